"""The parse tree the parser builds and the executor walks, one class per Go node type.

Every node keeps `pos`, its offset in the text it was parsed from, for error locations;
`str(node)` gives the source-like form Go prints in errors ("at <.Manifests.repo>").
"""

from dataclasses import dataclass, field

from scheduler_core.gotemplate.syntax import NumberLiteral, go_quote

__all__ = [
    "ActionNode",
    "BoolNode",
    "BranchNode",
    "BreakNode",
    "ChainNode",
    "CommandNode",
    "ContinueNode",
    "DotNode",
    "FieldNode",
    "IdentifierNode",
    "IfNode",
    "ListNode",
    "NilNode",
    "Node",
    "NumberNode",
    "PipeNode",
    "RangeNode",
    "StringNode",
    "TemplateNode",
    "TextNode",
    "Tree",
    "VariableNode",
    "WithNode",
]


@dataclass(eq=False, slots=True)
class Node:
    pos: int


@dataclass(eq=False, slots=True)
class ListNode(Node):
    nodes: list[Node] = field(default_factory=list)

    def __str__(self) -> str:
        return "".join(str(node) for node in self.nodes)


@dataclass(eq=False, slots=True)
class TextNode(Node):
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(eq=False, slots=True)
class IdentifierNode(Node):
    """A function name."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False, slots=True)
class VariableNode(Node):
    """`$x` or `$x.Field.Other`: the variable name (with `$`), then the fields."""

    idents: list[str]

    def __str__(self) -> str:
        return ".".join(self.idents)


@dataclass(eq=False, slots=True)
class DotNode(Node):
    def __str__(self) -> str:
        return "."


@dataclass(eq=False, slots=True)
class NilNode(Node):
    def __str__(self) -> str:
        return "nil"


@dataclass(eq=False, slots=True)
class FieldNode(Node):
    """`.A.B`: the field names without their dots."""

    idents: list[str]

    def __str__(self) -> str:
        return "".join("." + ident for ident in self.idents)


@dataclass(eq=False, slots=True)
class BoolNode(Node):
    value: bool

    def __str__(self) -> str:
        return "true" if self.value else "false"


@dataclass(eq=False, slots=True)
class NumberNode(Node):
    number: NumberLiteral

    def __str__(self) -> str:
        return self.number.text


@dataclass(eq=False, slots=True)
class StringNode(Node):
    quoted: str
    text: str

    def __str__(self) -> str:
        return self.quoted


@dataclass(eq=False, slots=True)
class CommandNode(Node):
    """One stage of a pipeline: a function, field or value and its arguments."""

    args: list[Node] = field(default_factory=list)

    def __str__(self) -> str:
        return " ".join(f"({arg})" if isinstance(arg, PipeNode) else str(arg) for arg in self.args)


@dataclass(eq=False, slots=True)
class PipeNode(Node):
    """`$x := a | b c`: declared (or assigned) variables and the commands."""

    decl: list[VariableNode] = field(default_factory=list)
    is_assign: bool = False
    cmds: list[CommandNode] = field(default_factory=list)

    def __str__(self) -> str:
        head = ""
        if self.decl:
            names = ", ".join(str(variable) for variable in self.decl)
            head = names + (" = " if self.is_assign else " := ")
        return head + " | ".join(str(cmd) for cmd in self.cmds)


@dataclass(eq=False, slots=True)
class ChainNode(Node):
    """`(pipeline).Field.Other` or `$x.Field` where the term is not a plain field."""

    node: Node
    fields: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        head = f"({self.node})" if isinstance(self.node, PipeNode) else str(self.node)
        return head + "".join("." + name for name in self.fields)


@dataclass(eq=False, slots=True)
class ActionNode(Node):
    pipe: PipeNode

    def __str__(self) -> str:
        return "{{" + str(self.pipe) + "}}"


@dataclass(eq=False, slots=True)
class BranchNode(Node):
    """The shape shared by if, range and with."""

    pipe: PipeNode
    body: ListNode
    else_body: ListNode | None

    def _render(self, keyword: str) -> str:
        text = "{{" + keyword + " " + str(self.pipe) + "}}" + str(self.body)
        if self.else_body is not None:
            text += "{{else}}" + str(self.else_body)
        return text + "{{end}}"


@dataclass(eq=False, slots=True)
class IfNode(BranchNode):
    def __str__(self) -> str:
        return self._render("if")


@dataclass(eq=False, slots=True)
class RangeNode(BranchNode):
    def __str__(self) -> str:
        return self._render("range")


@dataclass(eq=False, slots=True)
class WithNode(BranchNode):
    def __str__(self) -> str:
        return self._render("with")


@dataclass(eq=False, slots=True)
class TemplateNode(Node):
    """`{{template "name" pipeline}}` (also what `{{block}}` leaves in place)."""

    name: str
    pipe: PipeNode | None

    def __str__(self) -> str:
        argument = f" {self.pipe}" if self.pipe is not None else ""
        return "{{template " + go_quote(self.name) + argument + "}}"


@dataclass(eq=False, slots=True)
class BreakNode(Node):
    def __str__(self) -> str:
        return "{{break}}"


@dataclass(eq=False, slots=True)
class ContinueNode(Node):
    def __str__(self) -> str:
        return "{{continue}}"


@dataclass(eq=False, slots=True)
class Tree:
    """One named template: its body and the text it was parsed from (for error locations)."""

    name: str
    parse_name: str
    text: str
    root: ListNode
