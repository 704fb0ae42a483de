"""Executor: walks parsed trees over the data and writes the output, with Go's semantics.

Follows Go's text/template exec.go. Every step, character written and function call is charged
to the render's `Meter`; output, depth and what one function may build are bounded by its
`Limits`. `LimitExceeded` names where the template was; nested renders pass it on unchanged.
"""

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Final

from scheduler_core.gotemplate.errors import TemplateError
from scheduler_core.gotemplate.functions import Function, FunctionError, Param
from scheduler_core.gotemplate.lexer import line_column
from scheduler_core.gotemplate.limits import Limits
from scheduler_core.gotemplate.meter import STEP_UNITS, Meter, OverBudget
from scheduler_core.gotemplate.nodes import (
    ActionNode,
    BoolNode,
    BranchNode,
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
from scheduler_core.gotemplate.parser import parse
from scheduler_core.gotemplate.printf import Unprintable, format_value
from scheduler_core.gotemplate.syntax import go_quote
from scheduler_core.gotemplate.values import (
    MISSING,
    LocalMap,
    ValueTooLarge,
    go_type_name,
    is_struct,
    is_true,
    sorted_items,
    struct_field,
)

__all__ = ["LimitExceeded", "execute"]

# What `tpl` charges for parsing, beyond the text's characters, per action in the text.
_PARSE_ACTION_UNITS = 64


class _Absent:
    """No value passed down the pipeline (Go's missingVal), unlike MISSING, a value."""

    __slots__ = ()


_NO_FINAL: Final = _Absent()


class LimitExceeded(TemplateError):
    """A render went beyond its Limits."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


def _describe(value: object) -> str:
    try:
        return format_value(value)
    except (Unprintable, ValueTooLarge):
        return f"value of type {go_type_name(value)}"


class _Output:
    __slots__ = ("limit", "parts", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def text(self) -> str:
        return "".join(self.parts)


class _Render:
    """What all templates of one render share: definitions, functions, clock and budgets."""

    def __init__(
        self,
        functions: Mapping[str, Function],
        callables: Mapping[int, Function],
        limits: Limits,
        now: datetime | None,
        meter: Meter,
    ) -> None:
        self.functions = functions
        self.callables = callables
        self.limits = limits
        self.now = now
        self.meter = meter
        self.depth = 0

    def run(self, templates: Mapping[str, Tree], tree: Tree, data: object) -> str:
        out = _Output(self.limits.max_output_chars)
        _State(self, templates, tree, data, out).walk(data, tree.root)
        return out.text()


class _Context:
    """The CallContext handed to functions that need the render."""

    __slots__ = ("state",)

    def __init__(self, state: "_State") -> None:
        self.state = state

    @property
    def now(self) -> datetime | None:
        return self.state.render.now

    @property
    def limits(self) -> Limits:
        return self.state.render.limits

    @property
    def meter(self) -> Meter:
        return self.state.render.meter

    def nested(self, templates: Mapping[str, Tree], tree: Tree, data: object) -> str:
        render = self.state.render
        self.state.enter()
        try:
            return render.run(templates, tree, data)
        finally:
            render.depth -= 1

    def include(self, name: str, data: object) -> str:
        tree = self.state.templates.get(name)
        if tree is None:
            raise FunctionError(f"template {go_quote(name)} not defined")
        return self.nested(self.state.templates, tree, data)

    def tpl(self, text: str, data: object) -> str:
        render = self.state.render
        render.meter.chars(len(text))  # parsing, in Python: the text, and each action more
        render.meter.charge(text.count("{{") * _PARSE_ACTION_UNITS)
        parsed = parse("tpl", text, functions=render.functions, max_depth=render.limits.max_depth)
        return self.nested({**self.state.templates, **parsed}, parsed["tpl"], data)

    def call(self, function: object, args: list[object]) -> object:
        if function is None:
            raise FunctionError("call of nil")
        spec = self.state.render.callables.get(id(function))
        if spec is None or spec.impl is not function:
            raise FunctionError(f"non-function of type {go_type_name(function)}")
        wanted = len(spec.params)
        if spec.variadic is None and len(args) != wanted:
            raise FunctionError(
                f"wrong number of args for {spec.name}: got {len(args)} want {wanted}"
            )
        if len(args) < wanted:
            raise FunctionError(
                f"wrong number of args for {spec.name}: got {len(args)} want at least {wanted}"
            )
        return spec.impl(self, *args) if spec.needs_context else spec.impl(*args)


class _State:
    """The execution of one template: its tree, its variables, where it is."""

    __slots__ = ("node", "out", "render", "templates", "tree", "vars")

    def __init__(
        self,
        render: _Render,
        templates: Mapping[str, Tree],
        tree: Tree,
        data: object,
        out: _Output,
    ) -> None:
        self.render = render
        self.templates = templates
        self.tree = tree
        self.vars: list[tuple[str, object]] = [("$", data)]
        self.out = out
        self.node: Node | None = None

    # errors and budgets

    def error(self, detail: str, node: Node | None = None, *, limit: bool = False) -> TemplateError:
        node = node if node is not None else self.node
        kind = LimitExceeded if limit else TemplateError
        if node is None:
            return kind(detail, name=self.tree.parse_name, executing=self.tree.name)
        line, column = line_column(self.tree.text, node.pos)
        return kind(
            detail,
            name=self.tree.parse_name,
            line=line,
            column=column,
            executing=self.tree.name,
            context=str(node),
        )

    def step(self, node: Node | None = None) -> None:
        try:
            self.render.meter.charge(STEP_UNITS)
        except OverBudget as over:
            raise self.error(over.message, node, limit=True) from None

    def enter(self) -> None:
        render = self.render
        render.depth += 1
        if render.depth > render.limits.max_depth:
            raise self.error(
                f"exceeded maximum template depth ({render.limits.max_depth})", limit=True
            )

    def write(self, text: str) -> None:
        out = self.out
        out.size += len(text)
        if out.size > out.limit:
            raise self.error(f"output exceeds the limit of {out.limit} characters", limit=True)
        try:
            self.render.meter.chars(len(text))
        except OverBudget as over:
            raise self.error(over.message, limit=True) from None
        out.parts.append(text)

    # variables

    def var_value(self, name: str) -> object:
        for variable, value in reversed(self.vars):
            if variable == name:
                return value
        raise self.error(f"undefined variable: {name}")

    def set_var(self, name: str, value: object) -> None:
        for index in range(len(self.vars) - 1, -1, -1):
            if self.vars[index][0] == name:
                self.vars[index] = (name, value)
                return
        raise self.error(f"undefined variable: {name}")

    # walking

    def walk(self, dot: object, node: Node) -> None:
        self.node = node
        self.step()
        if isinstance(node, TextNode):
            self.write(node.text)
        elif isinstance(node, ActionNode):
            value = self.eval_pipeline(dot, node.pipe)
            if not node.pipe.decl:
                self.print_value(node, value)
        elif isinstance(node, ListNode):
            for child in node.nodes:
                self.walk(dot, child)
        elif isinstance(node, IfNode | WithNode):
            self.walk_if_or_with(dot, node)
        elif isinstance(node, RangeNode):
            self.walk_range(dot, node)
        elif isinstance(node, TemplateNode):
            self.walk_template(dot, node)
        elif isinstance(node, BreakNode):
            raise _Break
        elif isinstance(node, ContinueNode):
            raise _Continue
        else:
            raise self.error(f"unknown node: {node}")

    def walk_if_or_with(self, dot: object, node: BranchNode) -> None:
        mark = len(self.vars)
        self.enter()
        try:
            value = self.eval_pipeline(dot, node.pipe)
            if is_true(value):
                self.walk(value if isinstance(node, WithNode) else dot, node.body)
            elif node.else_body is not None:
                self.walk(dot, node.else_body)
        finally:
            self.render.depth -= 1
            del self.vars[mark:]

    def walk_range(self, dot: object, node: RangeNode) -> None:
        mark = len(self.vars)
        self.enter()
        try:
            value = self.eval_pipeline(dot, node.pipe)
            try:
                ran = self.range_over(value, node)
            except _Break:
                return
            if not ran and node.else_body is not None:
                self.walk(dot, node.else_body)
        finally:
            self.render.depth -= 1
            del self.vars[mark:]

    def range_over(self, value: object, node: RangeNode) -> bool:
        """Runs the body once per element; whether there was any element."""
        decl = node.pipe.decl
        if value is MISSING:
            return False
        if isinstance(value, int) and not isinstance(value, bool):
            if len(decl) > 1:
                raise self.error(f"can't use {value} to iterate over more than one variable")
            for number in range(value):
                self.iteration(node, MISSING, number)
            return value > 0
        if isinstance(value, list | tuple):
            for index, element in enumerate(value):
                self.iteration(node, index, element)
            return len(value) > 0
        if isinstance(value, Mapping):
            try:  # sorting its keys touches them all, whatever the body does
                self.render.meter.elements(len(value))
            except OverBudget as over:
                raise self.error(over.message, limit=True) from None
            for key, element in sorted_items(value):
                self.iteration(node, key, element)
            return len(value) > 0
        raise self.error(f"range can't iterate over {_describe(value)}")

    def iteration(self, node: RangeNode, index: object, element: object) -> None:
        self.step()
        pipe = node.pipe
        decl = pipe.decl
        mark = len(self.vars)
        if decl:
            if pipe.is_assign:
                self.set_var(decl[0].idents[0], index if len(decl) > 1 else element)
                if len(decl) > 1:
                    self.set_var(decl[1].idents[0], element)
            else:
                # The pipeline pushed the declared variables; the element is the last one.
                self.vars[mark - 1] = (decl[-1].idents[0], element)
                if len(decl) > 1:
                    self.vars[mark - 2] = (decl[0].idents[0], index)
        try:
            self.walk(element, node.body)
        except _Continue:
            pass
        finally:
            del self.vars[mark:]

    def walk_template(self, dot: object, node: TemplateNode) -> None:
        tree = self.templates.get(node.name)
        if tree is None:
            raise self.error(f"template {go_quote(node.name)} not defined")
        self.enter()
        try:
            value = self.eval_pipeline(dot, node.pipe) if node.pipe is not None else MISSING
            _State(self.render, self.templates, tree, value, self.out).walk(value, tree.root)
        finally:
            self.render.depth -= 1

    def print_value(self, node: Node, value: object) -> None:
        self.node = node
        if value is MISSING:
            self.write("<no value>")
            return
        try:
            text = format_value(value, self.render.meter)
        except Unprintable:
            raise self.error(f"can't print {node} of type {go_type_name(value)}") from None
        except ValueTooLarge as error:
            raise self.error(str(error)) from None
        except OverBudget as over:
            raise self.error(over.message, limit=True) from None
        self.write(text)

    # evaluating

    def eval_pipeline(self, dot: object, pipe: PipeNode) -> object:
        self.node = pipe
        value: object = _NO_FINAL
        for cmd in pipe.cmds:
            value = self.eval_command(dot, cmd, value)
            if value is None:  # Go digs into the interface: a nil is no value at all
                value = MISSING
        for variable in pipe.decl:
            name = variable.idents[0]
            if pipe.is_assign:
                self.set_var(name, value)
            else:
                self.vars.append((name, value))
        return value

    def eval_nested_pipeline(self, dot: object, pipe: PipeNode) -> object:
        self.enter()
        try:
            return self.eval_pipeline(dot, pipe)
        finally:
            self.render.depth -= 1

    def not_a_function(self, args: list[Node], final: object) -> None:
        if len(args) > 1 or final is not _NO_FINAL:
            raise self.error(f"can't give argument to non-function {args[0]}")

    def eval_command(self, dot: object, cmd: CommandNode, final: object) -> object:
        self.step(cmd)
        first = cmd.args[0]
        if isinstance(first, FieldNode):
            return self.eval_field_node(dot, first, cmd.args, final)
        if isinstance(first, ChainNode):
            return self.eval_chain_node(dot, first, cmd.args, final)
        if isinstance(first, IdentifierNode):
            self.node = first
            return self.eval_call(dot, self.render.functions[first.name], cmd, cmd.args, final)
        if isinstance(first, PipeNode):
            self.not_a_function(cmd.args, final)
            return self.eval_nested_pipeline(dot, first)
        if isinstance(first, VariableNode):
            return self.eval_variable_node(dot, first, cmd.args, final)
        self.node = first
        self.not_a_function(cmd.args, final)
        if isinstance(first, BoolNode):
            return first.value
        if isinstance(first, DotNode):
            return dot
        if isinstance(first, NumberNode):
            return self.ideal_constant(first)
        if isinstance(first, StringNode):
            return first.text
        raise self.error("nil is not a command")

    def ideal_constant(self, node: NumberNode) -> object:
        """A number literal where no type is asked for: float if written like one, else int."""
        self.node = node
        number = node.number
        text = number.text
        hex_int = (
            len(text) > 2
            and text[0] == "0"
            and text[1] in "xX"
            and not any(c in text for c in "pP")
        )
        if (
            number.is_float
            and not hex_int
            and not text.startswith("'")
            and any(c in text for c in ".eEpP")
        ):
            return number.float_value
        if number.is_int:
            return number.int_value
        raise self.error(f"{text} overflows int")

    def eval_field_node(
        self, dot: object, field: FieldNode, args: list[Node] | None, final: object
    ) -> object:
        self.node = field
        return self.eval_field_chain(dot, dot, field, field.idents, args, final)

    def eval_chain_node(
        self, dot: object, chain: ChainNode, args: list[Node] | None, final: object
    ) -> object:
        self.node = chain
        if isinstance(chain.node, NilNode):
            raise self.error(f"indirection through explicit nil in {chain}")
        receiver = self.eval_arg(dot, None, chain.node)
        return self.eval_field_chain(dot, receiver, chain, chain.fields, args, final)

    def eval_variable_node(
        self, dot: object, variable: VariableNode, args: list[Node] | None, final: object
    ) -> object:
        self.node = variable
        value = self.var_value(variable.idents[0])
        if len(variable.idents) == 1:
            self.not_a_function(args or [variable], final)
            return value
        return self.eval_field_chain(dot, value, variable, variable.idents[1:], args, final)

    def eval_field_chain(
        self,
        dot: object,
        receiver: object,
        node: Node,
        idents: list[str],
        args: list[Node] | None,
        final: object,
    ) -> object:
        for ident in idents[:-1]:
            receiver = self.eval_field(ident, None, _NO_FINAL, receiver)
        return self.eval_field(idents[-1], args, final, receiver)

    def eval_field(
        self, name: str, args: list[Node] | None, final: object, receiver: object
    ) -> object:
        if receiver is MISSING:
            return MISSING
        if receiver is None:
            raise self.error(f"nil pointer evaluating interface {{}}.{name}")
        has_args = (args is not None and len(args) > 1) or final is not _NO_FINAL
        if isinstance(receiver, Mapping):
            if has_args:
                raise self.error(f"{name} is not a method but has arguments")
            return receiver.get(name, MISSING)
        if is_struct(receiver):
            found, value = struct_field(receiver, name)
            if found:
                if has_args:
                    raise self.error(f"{name} has arguments but cannot be invoked as function")
                return value
        raise self.error(f"can't evaluate field {name} in type {go_type_name(receiver)}")

    def eval_call(
        self,
        dot: object,
        function: Function,
        node: Node,
        args: list[Node] | None,
        final: object,
    ) -> object:
        name = function.name
        params = args[1:] if args is not None else []
        count = len(params) + (final is not _NO_FINAL)
        fixed = len(function.params)
        if function.variadic is not None:
            if count < fixed:
                raise self.error(
                    f"wrong number of args for {name}: want at least {fixed} got {len(params)}"
                )
        elif count != fixed:
            raise self.error(f"wrong number of args for {name}: want {fixed} got {count}")
        if function.lazy:
            return self.invoke(function, node, [self.lazy_args(dot, params, final)])
        argv = []
        for index, param in enumerate(params):
            kind = function.params[index] if index < fixed else function.variadic
            argv.append(self.eval_arg(dot, kind, param))
        if final is not _NO_FINAL:
            kind = function.params[count - 1] if count - 1 < fixed else function.variadic
            argv.append(self.validate(final, kind))
        return self.invoke(function, node, argv)

    def lazy_args(self, dot: object, params: list[Node], final: object) -> Iterator[object]:
        for param in params:
            yield self.eval_arg(dot, Param.ANY, param)
        if final is not _NO_FINAL:
            yield self.validate(final, Param.ANY)

    def invoke(self, function: Function, node: Node, argv: list[object]) -> object:
        meter = self.render.meter
        try:
            if not function.lazy:  # the call, and the text of its arguments, which it reads
                meter.charge(STEP_UNITS)
                meter.chars(sum(len(arg) for arg in argv if isinstance(arg, str)))
            if function.needs_context:
                result = function.impl(_Context(self), *argv)
            else:
                result = function.impl(*argv)
        except LimitExceeded:
            raise
        except OverBudget as over:
            raise self.over_budget(function, node, over) from None
        except TemplateError as error:
            if function.lazy:  # an error evaluating an argument of and/or, reported as is
                raise
            detail = error.detail if error.name is None else str(error)
            raise self.error(f"error calling {function.name}: {detail}", node) from None
        except Exception as error:  # a failing function is a template error, as in Go
            detail = str(error) or type(error).__name__
            raise self.error(f"error calling {function.name}: {detail}", node) from None
        if not function.lazy:
            limits = self.render.limits
            if isinstance(result, str) and len(result) > limits.max_output_chars:
                raise self.error(
                    f"{function.name} returned {len(result)} characters, "
                    f"more than the limit of {limits.max_output_chars}",
                    node,
                    limit=True,
                )
            if isinstance(result, list | tuple | Mapping) and len(result) > limits.max_items:
                raise self.error(
                    f"{function.name} returned {len(result)} items, "
                    f"more than the limit of {limits.max_items}",
                    node,
                    limit=True,
                )
            if isinstance(result, str):  # and the text it made
                try:
                    meter.chars(len(result))
                except OverBudget as over:
                    raise self.over_budget(function, node, over) from None
        return result

    def over_budget(self, function: Function, node: Node, over: OverBudget) -> TemplateError:
        return self.error(f"error calling {function.name}: {over.message}", node, limit=True)

    def eval_arg(self, dot: object, kind: Param | None, node: Node) -> object:
        self.node = node
        if isinstance(node, DotNode):
            return self.validate(dot, kind)
        if isinstance(node, NilNode):
            if kind in (None, Param.ANY, Param.MAP, Param.LIST):
                return self.validate(MISSING, kind)
            assert kind is not None
            raise self.error(f"cannot assign nil to {kind.value}")
        if isinstance(node, FieldNode):
            return self.validate(self.eval_field_node(dot, node, [node], _NO_FINAL), kind)
        if isinstance(node, VariableNode):
            return self.validate(self.eval_variable_node(dot, node, None, _NO_FINAL), kind)
        if isinstance(node, PipeNode):
            return self.validate(self.eval_nested_pipeline(dot, node), kind)
        if isinstance(node, IdentifierNode):
            function = self.render.functions[node.name]
            return self.validate(self.eval_call(dot, function, node, None, _NO_FINAL), kind)
        if isinstance(node, ChainNode):
            return self.validate(self.eval_chain_node(dot, node, None, _NO_FINAL), kind)
        return self.literal(node, kind)

    def literal(self, node: Node, kind: Param | None) -> object:
        if kind is Param.BOOL and isinstance(node, BoolNode):
            return node.value
        if kind is Param.INT and isinstance(node, NumberNode) and node.number.is_int:
            return node.number.int_value
        if kind is Param.FLOAT and isinstance(node, NumberNode) and node.number.is_float:
            return node.number.float_value
        if kind is Param.STRING and isinstance(node, StringNode):
            return node.text
        if kind in (None, Param.ANY):
            if isinstance(node, BoolNode):
                return node.value
            if isinstance(node, NumberNode):
                return self.ideal_constant(node)
            if isinstance(node, StringNode):
                return node.text
        assert kind is not None
        expected = {
            Param.BOOL: "bool",
            Param.INT: "integer",
            Param.FLOAT: "float",
            Param.STRING: "string",
        }.get(kind)
        if expected is None:
            raise self.error(f"can't handle {node} for arg of type {kind.value}")
        raise self.error(f"expected {expected}; found {node}")

    def validate(self, value: object, kind: Param | None) -> object:
        """Go's validateType: the value as a function parameter of `kind` receives it."""
        if value is MISSING:
            if kind is None:
                return MISSING
            if kind is Param.ANY:
                return None
            if kind is Param.MAP:
                return LocalMap()
            if kind is Param.LIST:
                return []
            raise self.error(f"invalid value; expected {kind.value}")
        if kind is None or kind is Param.ANY:
            return value
        if kind is Param.STRING:
            accepted = isinstance(value, str)
        elif kind is Param.INT:
            accepted = isinstance(value, int) and not isinstance(value, bool)
        elif kind is Param.FLOAT:
            accepted = isinstance(value, float)
        elif kind is Param.BOOL:
            accepted = isinstance(value, bool)
        elif kind is Param.MAP:
            if value is None:
                return LocalMap()
            accepted = isinstance(value, Mapping)
        else:
            if value is None:
                return []
            accepted = isinstance(value, list | tuple)
        if not accepted:
            raise self.error(
                f"wrong type for value; expected {kind.value}; got {go_type_name(value)}"
            )
        return value


def execute(
    templates: Mapping[str, Tree],
    name: str,
    data: object,
    *,
    functions: Mapping[str, Function],
    callables: Mapping[int, Function],
    limits: Limits,
    now: datetime | None,
    meter: Meter,
) -> str:
    """Renders the template `name` of `templates` over `data`, charging `meter`.

    `callables` are the caller's functions by the identity of their implementation: the only
    values `call` may call.
    """
    render = _Render(functions, callables, limits, now, meter)
    try:
        return render.run(templates, templates[name], data)
    except RecursionError:
        raise LimitExceeded(
            "templates nest too deeply for the interpreter", name=templates[name].parse_name
        ) from None
    except OverBudget as over:  # charged where no position is known
        name_of = templates[name].parse_name
        raise LimitExceeded(over.message, name=name_of, executing=name) from None
