"""Go's predefined template functions, with Go's rules and messages (docs/scheduling.md).

The executor charges the text of string arguments and results; printing charges what it
prints, `slice` the elements it copies.
"""

from collections.abc import Iterable, Mapping
from datetime import datetime
from urllib.parse import quote_plus

from scheduler_core.gotemplate.functions.spec import CallContext, Function, FunctionError, Param
from scheduler_core.gotemplate.printf import format_value, sprint, sprintf, sprintln
from scheduler_core.gotemplate.values import (
    StringMap,
    go_type_name,
    is_struct,
    is_true,
    struct_fields,
)

__all__ = ["FUNCTIONS"]

_BASIC = (bool, int, float, str)


def _and(values: Iterable[object]) -> object:
    value: object = None
    for value in values:
        if not is_true(value):
            return value
    return value


def _or(values: Iterable[object]) -> object:
    value: object = None
    for value in values:
        if is_true(value):
            return value
    return value


def _not(value: object) -> bool:
    return not is_true(value)


def _basic_kind(value: object) -> type | None:
    """bool, int, float or str for Go's basic kinds; None for nil and everything else."""
    for kind in _BASIC:
        if isinstance(value, kind):
            return kind
    return None


def _comparable_equal(left: object, right: object) -> bool:
    """== on two non-basic values of one category, or Go's non-comparable error."""
    if isinstance(right, list | tuple | Mapping):
        raise FunctionError(f"non-comparable type {format_value(right)}: {go_type_name(right)}")
    if isinstance(left, datetime) and isinstance(right, datetime):
        return left == right
    if is_struct(left) and type(left) is type(right):
        pairs = zip(struct_fields(left), struct_fields(right), strict=True)
        return all(_equal(a, b) for (_, a), (_, b) in pairs)
    return left is right


def _category(value: object) -> str:
    if isinstance(value, list | tuple):
        return "slice"
    if isinstance(value, Mapping):
        return "map"
    return go_type_name(value)


def _equal(left: object, right: object) -> bool:
    left_kind, right_kind = _basic_kind(left), _basic_kind(right)
    if left_kind is not right_kind:
        if left is not None and right is not None:
            raise FunctionError(
                f"incompatible types for comparison: {go_type_name(left)} and {go_type_name(right)}"
            )
        return False
    if left_kind is not None:
        return left == right
    if left is None or right is None:
        return left is None and right is None
    if _category(left) != _category(right):
        raise FunctionError(
            f"non-comparable types {format_value(left)}: {go_type_name(left)}, "
            f"{go_type_name(right)}: {format_value(right)}"
        )
    return _comparable_equal(left, right)


def _eq(first: object, *others: object) -> bool:
    if not others:
        raise FunctionError("missing argument for comparison")
    return any(_equal(first, other) for other in others)


def _ne(left: object, right: object) -> bool:
    return not _equal(left, right)


def _lt(left: object, right: object) -> bool:
    left_kind, right_kind = _basic_kind(left), _basic_kind(right)
    if left_kind is None or right_kind is None:
        raise FunctionError("invalid type for comparison")
    if left_kind is not right_kind:
        raise FunctionError(
            f"incompatible types for comparison: {go_type_name(left)} and {go_type_name(right)}"
        )
    if left_kind is bool:
        raise FunctionError("invalid type for comparison")
    return bool(left < right)  # type: ignore[operator]


def _le(left: object, right: object) -> bool:
    return _lt(left, right) or _equal(left, right)


def _gt(left: object, right: object) -> bool:
    return not _le(left, right)


def _ge(left: object, right: object) -> bool:
    return not _lt(left, right)


def _index_arg(index: object, cap: int) -> int:
    if index is None:
        raise FunctionError("cannot index slice/array with nil")
    if not isinstance(index, int) or isinstance(index, bool):
        raise FunctionError(f"cannot index slice/array with type {go_type_name(index)}")
    if index < 0 or index > cap:
        raise FunctionError(f"index out of range: {index}")
    return index


def _index(context: CallContext, item: object, *indexes: object) -> object:
    if item is None:
        raise FunctionError("index of untyped nil")
    for index in indexes:
        if item is None:
            raise FunctionError("index of nil pointer")
        if isinstance(item, str | list | tuple):
            sequence = item.encode("utf-8") if isinstance(item, str) else item
            position = _index_arg(index, len(sequence))
            if position == len(sequence):
                raise FunctionError(f"index out of range: {position}")
            item = sequence[position]
        elif isinstance(item, Mapping):
            if not isinstance(index, str) and item:
                context.meter.elements(len(item))  # the keys' types are looked at
                if all(isinstance(key, str) for key in item):
                    raise FunctionError(f"value has type {go_type_name(index)}; should be string")
            item = item.get(index, "" if isinstance(item, StringMap) else None)
        else:
            raise FunctionError(f"can't index item of type {go_type_name(item)}")
    return item


def _slice(context: CallContext, item: object, *indexes: object) -> object:
    if item is None:
        raise FunctionError("slice of untyped nil")
    if len(indexes) > 3:
        raise FunctionError(f"too many slice indexes: {len(indexes)}")
    if isinstance(item, str):
        if len(indexes) == 3:
            raise FunctionError("cannot 3-index slice a string")
        sequence: bytes | list[object] | tuple[object, ...] = item.encode("utf-8")
    elif isinstance(item, list | tuple):
        sequence = item
    else:
        raise FunctionError(f"can't slice item of type {go_type_name(item)}")
    bounds = [0, len(sequence), len(sequence)]
    for position, index in enumerate(indexes):
        bounds[position] = _index_arg(index, len(sequence))
    if bounds[0] > bounds[1]:
        raise FunctionError(f"invalid slice index: {bounds[0]} > {bounds[1]}")
    if len(indexes) == 3 and bounds[1] > bounds[2]:
        raise FunctionError(f"invalid slice index: {bounds[1]} > {bounds[2]}")
    if isinstance(sequence, bytes):
        return sequence[bounds[0] : bounds[1]].decode("utf-8", "replace")
    context.meter.elements(bounds[1] - bounds[0])
    return list(sequence[bounds[0] : bounds[1]])


def _len(item: object) -> int:
    if item is None:
        raise FunctionError("len of nil pointer")
    if isinstance(item, str):
        return len(item.encode("utf-8"))
    if isinstance(item, list | tuple | Mapping):
        return len(item)
    raise FunctionError(f"len of type {go_type_name(item)}")


def _text(context: CallContext, args: tuple[object, ...]) -> str:
    if len(args) == 1 and isinstance(args[0], str):
        return args[0]
    return sprint(args, context.meter)


_HTML = {"\0": "\ufffd", '"': "&#34;", "'": "&#39;", "&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _html(context: CallContext, *args: object) -> str:
    return "".join(_HTML.get(char, char) for char in _text(context, args))


_JS = {"\\": "\\\\", "'": "\\'", '"': '\\"', "<": "\\u003C", ">": "\\u003E", "&": "\\u0026"}


def _js_char(char: str) -> str:
    if char in _JS:
        return _JS[char]
    if char == "=":
        return "\\u003D"
    if char < " ":
        return f"\\u{ord(char):04X}"
    if char >= "\x80" and not char.isprintable():
        return f"\\u{ord(char):04X}"
    return char


def _js(context: CallContext, *args: object) -> str:
    return "".join(_js_char(char) for char in _text(context, args))


def _urlquery(context: CallContext, *args: object) -> str:
    return quote_plus(_text(context, args), safe="")


def _print(context: CallContext, *args: object) -> str:
    return sprint(args, context.meter)


def _println(context: CallContext, *args: object) -> str:
    return sprintln(args, context.meter)


def _printf(context: CallContext, format_text: str, *args: object) -> str:
    return sprintf(format_text, args, context.meter)


def _call(context: CallContext, function: object, *args: object) -> object:
    return context.call(function, list(args))


ANY, STRING = Param.ANY, Param.STRING
FUNCTIONS = [
    Function("and", _and, (ANY,), ANY, lazy=True),
    Function("or", _or, (ANY,), ANY, lazy=True),
    Function("not", _not, (ANY,)),
    Function("eq", _eq, (ANY,), ANY),
    Function("ne", _ne, (ANY, ANY)),
    Function("lt", _lt, (ANY, ANY)),
    Function("le", _le, (ANY, ANY)),
    Function("gt", _gt, (ANY, ANY)),
    Function("ge", _ge, (ANY, ANY)),
    Function("index", _index, (ANY,), ANY, needs_context=True),
    Function("slice", _slice, (ANY,), ANY, needs_context=True),
    Function("len", _len, (ANY,)),
    Function("print", _print, (), ANY, needs_context=True),
    Function("printf", _printf, (STRING,), ANY, needs_context=True),
    Function("println", _println, (), ANY, needs_context=True),
    Function("html", _html, (), ANY, needs_context=True),
    Function("js", _js, (), ANY, needs_context=True),
    Function("urlquery", _urlquery, (), ANY, needs_context=True),
    Function("call", _call, (ANY,), ANY, needs_context=True),
]
