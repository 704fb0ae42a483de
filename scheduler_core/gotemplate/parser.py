"""Parser: a template text to node trees, by the grammar of Go's text/template/parse.

One tree per text, plus one per `{{define}}` and `{{block}}`. As in Go, it rejects undefined
functions, undeclared variables, `break`/`continue` outside `range`, a nested `define` and two
non-empty definitions of a name. Nesting is bounded by `max_depth`, to spare the stack.
"""

from collections.abc import Container, Iterator

from scheduler_core.gotemplate.errors import TemplateError
from scheduler_core.gotemplate.lexer import Kind, Token, line_column, tokens
from scheduler_core.gotemplate.nodes import (
    ActionNode,
    BoolNode,
    BreakNode,
    ChainNode,
    CommandNode,
    ContinueNode,
    DotNode,
    FieldNode,
    IdentifierNode,
    IfNode,
    ListNode,
    NilNode,
    Node,
    NumberNode,
    PipeNode,
    RangeNode,
    StringNode,
    TemplateNode,
    TextNode,
    Tree,
    VariableNode,
    WithNode,
)
from scheduler_core.gotemplate.syntax import go_quote, go_unquote, parse_number

__all__ = ["is_empty", "parse"]

_OPERAND_START = frozenset(
    {
        Kind.BOOL,
        Kind.CHAR_CONSTANT,
        Kind.DOT,
        Kind.FIELD,
        Kind.IDENTIFIER,
        Kind.NUMBER,
        Kind.NIL,
        Kind.RAW_STRING,
        Kind.STRING,
        Kind.VARIABLE,
        Kind.LEFT_PAREN,
    }
)
_NOT_EXECUTABLE = (BoolNode, DotNode, NilNode, NumberNode, StringNode)


class _End(Node):
    """`{{end}}`: closes a list; never part of a tree."""

    def __str__(self) -> str:
        return "{{end}}"


class _Else(Node):
    """`{{else}}`: closes a list; never part of a tree."""

    def __str__(self) -> str:
        return "{{else}}"


def is_empty(node: Node) -> bool:
    """Whether a tree holds nothing but space (Go's IsEmptyTree)."""
    if isinstance(node, ListNode):
        return all(is_empty(child) for child in node.nodes)
    if isinstance(node, TextNode):
        return not node.text.strip()
    return False


class _Parser:
    def __init__(self, name: str, text: str, functions: Container[str], max_depth: int) -> None:
        self.name = name
        self.text = text
        self.functions = functions
        self.max_depth = max_depth
        self.stream: Iterator[Token] = tokens(
            name,
            text,
            break_ok="break" not in functions,
            continue_ok="continue" not in functions,
        )
        self.pending: list[Token] = []
        self.last = Token(Kind.EOF, "", 0)
        self.trees: dict[str, Tree] = {}
        self.vars = ["$"]
        self.range_depth = 0
        self.depth = 0

    # tokens

    def next(self) -> Token:
        if self.pending:
            self.last = self.pending.pop()
        else:
            self.last = next(self.stream, Token(Kind.EOF, "", len(self.text)))
        return self.last

    def backup(self, *pushed: Token) -> None:
        """Puts tokens back; the first one given is the next one read."""
        self.pending.extend(reversed(pushed))

    def peek(self) -> Token:
        token = self.next()
        self.backup(token)
        return token

    def next_non_space(self) -> Token:
        token = self.next()
        while token.kind is Kind.SPACE:
            token = self.next()
        return token

    def peek_non_space(self) -> Token:
        token = self.next_non_space()
        self.backup(token)
        return token

    # errors

    def error(self, detail: str, pos: int | None = None) -> TemplateError:
        line, column = line_column(self.text, self.last.pos if pos is None else pos)
        return TemplateError(detail, name=self.name, line=line, column=column)

    def unexpected(self, token: Token, context: str) -> TemplateError:
        return self.error(f"unexpected {token} in {context}", token.pos)

    def expect(self, kind: Kind, context: str) -> Token:
        token = self.next_non_space()
        if token.kind is not kind:
            raise self.unexpected(token, context)
        return token

    def enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise self.error(
                f"blocks and parentheses nest more than {self.max_depth} levels deep", pos
            )

    def unquote(self, token: Token) -> str:
        try:
            return go_unquote(token.value)
        except ValueError:
            raise self.error(f"invalid syntax in {token}", token.pos) from None

    # templates

    def add(self, tree: Tree, pos: int) -> None:
        existing = self.trees.get(tree.name)
        if existing is None or is_empty(existing.root):
            self.trees[tree.name] = tree
        elif not is_empty(tree.root):
            raise self.error(f"multiple definition of template {go_quote(tree.name)}", pos)

    def parse(self) -> dict[str, Tree]:
        root = ListNode(self.peek().pos)
        while self.peek().kind is not Kind.EOF:
            if self.peek().kind is Kind.LEFT_DELIM:
                delim = self.next()
                token = self.next_non_space()
                if token.kind is Kind.DEFINE:
                    self.definition()
                    continue
                self.backup(delim, token)
            node = self.text_or_action()
            if isinstance(node, _End | _Else):
                raise self.error(f"unexpected {node}", node.pos)
            root.nodes.append(node)
        self.add(Tree(self.name, self.name, self.text, root), self.last.pos)
        return self.trees

    def definition(self) -> None:
        context = "define clause"
        token = self.next_non_space()
        if token.kind not in (Kind.STRING, Kind.RAW_STRING):
            raise self.unexpected(token, context)
        name = self.unquote(token)
        self.expect(Kind.RIGHT_DELIM, context)
        body = self.separate_body(context)
        self.add(Tree(name, self.name, self.text, body), token.pos)

    def separate_body(self, context: str) -> ListNode:
        """The body of a define or block: a template of its own, with its own variables."""
        outer_vars, outer_range_depth = self.vars, self.range_depth
        self.vars, self.range_depth = ["$"], 0
        self.enter(self.last.pos)
        body, end = self.item_list()
        if not isinstance(end, _End):
            raise self.error(f"unexpected {end} in {context}", end.pos)
        self.depth -= 1
        self.vars, self.range_depth = outer_vars, outer_range_depth
        return body

    def item_list(self) -> tuple[ListNode, Node]:
        """Nodes up to {{end}} or {{else}}, which is returned separately."""
        body = ListNode(self.peek_non_space().pos)
        while self.peek_non_space().kind is not Kind.EOF:
            node = self.text_or_action()
            if isinstance(node, _End | _Else):
                return body, node
            body.nodes.append(node)
        raise self.error("unexpected EOF")

    def text_or_action(self) -> Node:
        token = self.next_non_space()
        if token.kind is Kind.TEXT:
            return TextNode(token.pos, token.value)
        if token.kind is Kind.LEFT_DELIM:
            return self.action()
        raise self.unexpected(token, "input")

    # actions

    def action(self) -> Node:
        token = self.next_non_space()
        control = {
            Kind.BLOCK: self.block_control,
            Kind.BREAK: self.break_control,
            Kind.CONTINUE: self.continue_control,
            Kind.ELSE: self.else_control,
            Kind.END: self.end_control,
            Kind.IF: self.if_control,
            Kind.RANGE: self.range_control,
            Kind.TEMPLATE: self.template_control,
            Kind.WITH: self.with_control,
        }.get(token.kind)
        if control is not None:
            return control(token)
        self.backup(token)
        return ActionNode(token.pos, self.pipeline("command", Kind.RIGHT_DELIM))

    def break_control(self, token: Token) -> Node:
        after = self.next_non_space()
        if after.kind is not Kind.RIGHT_DELIM:
            raise self.unexpected(after, "{{break}}")
        if self.range_depth == 0:
            raise self.error("{{break}} outside {{range}}", token.pos)
        return BreakNode(token.pos)

    def continue_control(self, token: Token) -> Node:
        after = self.next_non_space()
        if after.kind is not Kind.RIGHT_DELIM:
            raise self.unexpected(after, "{{continue}}")
        if self.range_depth == 0:
            raise self.error("{{continue}} outside {{range}}", token.pos)
        return ContinueNode(token.pos)

    def else_control(self, token: Token) -> Node:
        after = self.peek_non_space()
        if after.kind not in (Kind.IF, Kind.WITH):  # "else if" / "else with" continue the chain
            self.expect(Kind.RIGHT_DELIM, "else")
        return _Else(token.pos)

    def end_control(self, token: Token) -> Node:
        self.expect(Kind.RIGHT_DELIM, "end")
        return _End(token.pos)

    def control(self, context: str) -> tuple[PipeNode, ListNode, ListNode | None]:
        mark = len(self.vars)
        self.enter(self.last.pos)
        pipe = self.pipeline(context, Kind.RIGHT_DELIM)
        if context == "range":
            self.range_depth += 1
        body, following = self.item_list()
        if context == "range":
            self.range_depth -= 1
        else_body = None
        if isinstance(following, _Else):
            # {{if a}}x{{else if b}}y{{end}} is {{if a}}x{{else}}{{if b}}y{{end}}{{end}}.
            if context == "if" and self.peek().kind is Kind.IF:
                else_body = ListNode(following.pos, [self.if_control(self.next())])
            elif context == "with" and self.peek().kind is Kind.WITH:
                else_body = ListNode(following.pos, [self.with_control(self.next())])
            else:
                else_body, following = self.item_list()
                if not isinstance(following, _End):
                    raise self.error(f"expected end; found {following}", following.pos)
        self.depth -= 1
        del self.vars[mark:]
        return pipe, body, else_body

    def if_control(self, token: Token) -> Node:
        pipe, body, else_body = self.control("if")
        return IfNode(pipe.pos, pipe, body, else_body)

    def range_control(self, token: Token) -> Node:
        pipe, body, else_body = self.control("range")
        return RangeNode(pipe.pos, pipe, body, else_body)

    def with_control(self, token: Token) -> Node:
        pipe, body, else_body = self.control("with")
        return WithNode(pipe.pos, pipe, body, else_body)

    def template_name(self, token: Token, context: str) -> str:
        if token.kind not in (Kind.STRING, Kind.RAW_STRING):
            raise self.unexpected(token, context)
        return self.unquote(token)

    def template_control(self, token: Token) -> Node:
        context = "template clause"
        name_token = self.next_non_space()
        name = self.template_name(name_token, context)
        pipe = None
        following = self.next_non_space()
        if following.kind is not Kind.RIGHT_DELIM:
            self.backup(following)
            pipe = self.pipeline(context, Kind.RIGHT_DELIM)
        return TemplateNode(name_token.pos, name, pipe)

    def block_control(self, token: Token) -> Node:
        context = "block clause"
        name_token = self.next_non_space()
        name = self.template_name(name_token, context)
        pipe = self.pipeline(context, Kind.RIGHT_DELIM)
        body = self.separate_body(context)
        self.add(Tree(name, self.name, self.text, body), name_token.pos)
        return TemplateNode(name_token.pos, name, pipe)

    # pipelines

    def pipeline(self, context: str, end: Kind) -> PipeNode:
        pipe = PipeNode(self.peek_non_space().pos)
        while (variable := self.peek_non_space()).kind is Kind.VARIABLE:
            self.next()
            # "$x := ..." declares, "$x foo" uses: look past the space to tell them apart.
            adjacent = self.peek()
            following = self.peek_non_space()
            if following.kind in (Kind.ASSIGN, Kind.DECLARE):
                pipe.is_assign = following.kind is Kind.ASSIGN
                self.next_non_space()
                self.declare(pipe, variable)
                break
            if following.kind is Kind.CHAR and following.value == ",":
                self.next_non_space()
                self.declare(pipe, variable)
                if context == "range" and len(pipe.decl) < 2:
                    if self.peek_non_space().kind in (
                        Kind.VARIABLE,
                        Kind.RIGHT_DELIM,
                        Kind.RIGHT_PAREN,
                    ):
                        continue
                    raise self.error("range can only initialize variables", variable.pos)
                raise self.error(f"too many declarations in {context}", variable.pos)
            if adjacent.kind is Kind.SPACE:
                self.backup(variable, adjacent)
            else:
                self.backup(variable)
            break
        while True:
            token = self.next_non_space()
            if token.kind is end:
                self.check_pipeline(pipe, context)
                return pipe
            if token.kind not in _OPERAND_START:
                raise self.unexpected(token, context)
            self.backup(token)
            pipe.cmds.append(self.command())

    def declare(self, pipe: PipeNode, token: Token) -> None:
        pipe.decl.append(VariableNode(token.pos, [token.value]))
        self.vars.append(token.value)

    def check_pipeline(self, pipe: PipeNode, context: str) -> None:
        if not pipe.cmds:
            raise self.error(f"missing value for {context}")
        for stage, cmd in enumerate(pipe.cmds[1:], start=2):
            if isinstance(cmd.args[0], _NOT_EXECUTABLE):
                raise self.error(f"non executable command in pipeline stage {stage}", cmd.pos)

    def command(self) -> CommandNode:
        cmd = CommandNode(self.peek_non_space().pos)
        while True:
            self.peek_non_space()
            operand = self.operand()
            if operand is not None:
                cmd.args.append(operand)
            token = self.next()
            if token.kind is Kind.SPACE:
                continue
            if token.kind in (Kind.RIGHT_DELIM, Kind.RIGHT_PAREN):
                self.backup(token)
            elif token.kind is not Kind.PIPE:
                raise self.unexpected(token, "operand")
            break
        if not cmd.args:
            raise self.error("empty command", cmd.pos)
        return cmd

    def operand(self) -> Node | None:
        node = self.term()
        if node is None or self.peek().kind is not Kind.FIELD:
            return node
        chain = ChainNode(self.peek().pos, node)
        while self.peek().kind is Kind.FIELD:
            chain.fields.append(self.next().value[1:])
        if isinstance(node, FieldNode):
            return FieldNode(chain.pos, [*node.idents, *chain.fields])
        if isinstance(node, VariableNode):
            return VariableNode(chain.pos, [*node.idents, *chain.fields])
        if isinstance(node, _NOT_EXECUTABLE):
            raise self.error(f"unexpected . after term {go_quote(str(node))}", chain.pos)
        return chain

    def term(self) -> Node | None:
        token = self.next_non_space()
        kind = token.kind
        if kind is Kind.IDENTIFIER:
            if token.value not in self.functions:
                raise self.error(f"function {go_quote(token.value)} not defined", token.pos)
            return IdentifierNode(token.pos, token.value)
        if kind is Kind.DOT:
            return DotNode(token.pos)
        if kind is Kind.NIL:
            return NilNode(token.pos)
        if kind is Kind.VARIABLE:
            if token.value not in self.vars:
                raise self.error(f"undefined variable {go_quote(token.value)}", token.pos)
            return VariableNode(token.pos, [token.value])
        if kind is Kind.FIELD:
            return FieldNode(token.pos, [token.value[1:]])
        if kind is Kind.BOOL:
            return BoolNode(token.pos, token.value == "true")
        if kind in (Kind.NUMBER, Kind.CHAR_CONSTANT):
            try:
                return NumberNode(token.pos, parse_number(token.value))
            except ValueError as error:
                raise self.error(str(error), token.pos) from None
        if kind is Kind.LEFT_PAREN:
            self.enter(token.pos)
            pipe = self.pipeline("parenthesized pipeline", Kind.RIGHT_PAREN)
            self.depth -= 1
            return pipe
        if kind in (Kind.STRING, Kind.RAW_STRING):
            return StringNode(token.pos, token.value, self.unquote(token))
        self.backup(token)
        return None


def parse(name: str, text: str, *, functions: Container[str], max_depth: int) -> dict[str, Tree]:
    """The trees of one text: the one named `name` and those it defines.

    `functions` are the names calls may use. Raises TemplateError naming line and column.
    """
    return _Parser(name, text, functions, max_depth).parse()
