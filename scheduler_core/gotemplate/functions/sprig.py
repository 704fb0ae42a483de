"""The sprig functions templates commonly use (github.com/Masterminds/sprig), plus Helm's
`required`, `include` and `tpl`, with sprig's argument order, conversions and quirks.

Where they differ on purpose, for purity and safety, is in docs/scheduling.md ("Templates");
what each charges to the meter, in docs/contributing.md ("The template engine").
"""

import base64
import binascii
import hashlib
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from scheduler_core.gotemplate.encoding import from_json, to_json
from scheduler_core.gotemplate.functions.spec import CallContext, Function, FunctionError, Param
from scheduler_core.gotemplate.gotime import format_layout, go_time_string
from scheduler_core.gotemplate.meter import UNMETERED, Meter
from scheduler_core.gotemplate.printf import format_value
from scheduler_core.gotemplate.syntax import go_quote, parse_float, parse_int
from scheduler_core.gotemplate.values import (
    LocalMap,
    Walk,
    go_type_name,
    is_struct,
    is_true,
    sorted_items,
    struct_fields,
)

__all__ = ["FUNCTIONS", "deep_copy", "strval"]

_GO_SPACE = "\t\n\v\f\r \x85\xa0"


def _is_go_space(char: str) -> bool:
    return char in _GO_SPACE or (char > "\xff" and char.isspace())


def strval(value: object, meter: Meter = UNMETERED) -> str:
    """sprig's strval: strings as they are, times by their String form, the rest as %v."""
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return go_time_string(value)
    return format_value(value, meter)


def _strslice(value: object, meter: Meter) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        meter.elements(len(value))
        return [strval(item, meter) for item in value if item is not None]
    return [strval(value, meter)]


def _wrap(number: int) -> int:
    """Go's int64 overflow: wrap around."""
    return (number + (1 << 63)) % (1 << 64) - (1 << 63)


def _trim_zero_decimal(text: str) -> str:
    found_zero = False
    for index in range(len(text), 0, -1):
        char = text[index - 1]
        if char == "." and found_zero:
            return text[: index - 1]
        if char == "0":
            found_zero = True
        elif char != ".":
            return text
    return text


def to_int64(value: object) -> int:
    """spf13/cast's ToInt64, as sprig uses it: anything unconvertible is 0."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return _wrap(value)
    if isinstance(value, float):
        return _wrap(int(value)) if math.isfinite(value) else 0
    if isinstance(value, str):
        number = parse_int(_trim_zero_decimal(value))
        return number if number is not None and -(1 << 63) <= number < 1 << 63 else 0
    return 0


def to_float64(value: object) -> float:
    """spf13/cast's ToFloat64: anything unconvertible is 0."""
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        words = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "nan": math.nan}
        special = words.get(value.lower().replace("infinity", "inf"))
        if special is not None:
            return special
        number = parse_float(value)
        return number if number is not None else 0.0
    return 0.0


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _deep_equal(left: object, right: object, meter: Meter) -> bool:
    """reflect.DeepEqual over template values: types must match, containers element-wise.
    Every pair of elements compared is charged to `meter`."""
    meter.elements(1)
    kind = type(left)
    if kind in _SCALARS:  # the common case, quickly
        if kind is str:
            meter.chars(len(left))  # type: ignore[arg-type]
        return kind is type(right) and left == right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(
            _deep_equal(left[key], right[key], meter) for key in left
        )
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(
            _deep_equal(a, b, meter) for a, b in zip(left, right, strict=True)
        )
    if type(left) is not type(right):
        return False
    if is_struct(left):
        return all(
            _deep_equal(a, b, meter)
            for (_, a), (_, b) in zip(struct_fields(left), struct_fields(right), strict=True)
        )
    return left == right


def _copy(value: object, walk: Walk, depth: int) -> object:
    walk.step(depth)
    if isinstance(value, Mapping):
        return LocalMap((key, _copy(item, walk, depth + 1)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return [_copy(item, walk, depth + 1) for item in value]
    return value


def deep_copy(value: object, meter: Meter = UNMETERED) -> object:
    """A copy the template may change: maps become LocalMaps, tuples lists."""
    return _copy(value, Walk(meter), 0)


def _deep_copy(context: CallContext, value: object) -> object:
    return deep_copy(value, context.meter)


def _writable(value: Mapping[object, object], function: str) -> LocalMap:
    if not isinstance(value, LocalMap):
        raise FunctionError(
            f"{function} can't change a map passed in as data (data is read-only); "
            f"build one in the template instead, e.g. merge (dict) ... or deepCopy"
        )
    return value


# --- defaults and flow ------------------------------------------------------------------


def _default(default: object, *given: object) -> object:
    return given[0] if given and is_true(given[0]) else default


def _empty(value: object) -> bool:
    return not is_true(value)


def _coalesce(*values: object) -> object:
    return next((value for value in values if is_true(value)), None)


def _ternary(if_true: object, if_false: object, condition: bool) -> object:
    return if_true if condition else if_false


def _required(message: str, value: object) -> object:
    if value is None or value == "":
        raise FunctionError(message)
    return value


def _fail(message: str) -> str:
    raise FunctionError(message)


# --- strings ----------------------------------------------------------------------------


def _map_runes(text: str, convert: Callable[[str], str]) -> str:
    # Go maps rune by rune; a mapping that would yield several characters ("ß" -> "SS")
    # leaves the rune as it is.
    out = []
    for char in text:
        mapped = convert(char)
        out.append(mapped if len(mapped) == 1 else char)
    return "".join(out)


def _is_title_separator(char: str) -> bool:
    if char <= "\x7f":
        return not (char.isascii() and (char.isalnum() or char == "_"))
    if char.isalpha() or char.isdecimal():
        return False
    return char.isspace()


def _title(text: str) -> str:
    out = []
    previous = " "
    for char in text:
        if _is_title_separator(previous):
            titled = char.title()
            out.append(titled if len(titled) == 1 else char)
        else:
            out.append(char)
        previous = char
    return "".join(out)


def _trim_space(text: str) -> str:
    start, end = 0, len(text)
    while start < end and _is_go_space(text[start]):
        start += 1
    while end > start and _is_go_space(text[end - 1]):
        end -= 1
    return text[start:end]


def _trim_all(cutset: str, text: str) -> str:
    if len(cutset) <= 64:
        return text.strip(cutset)
    # str.strip looks through the whole cutset for every character it strips.
    cut = set(cutset)
    start, end = 0, len(text)
    while start < end and text[start] in cut:
        start += 1
    while end > start and text[end - 1] in cut:
        end -= 1
    return text[start:end]


def _checked_size(context: CallContext, size: int, what: str) -> None:
    limit = context.limits.max_output_chars
    if size > limit:
        raise FunctionError(f"{what} would be {size} characters, more than the limit of {limit}")


def _checked_items(context: CallContext, count: int, what: str) -> None:
    """Refuses to build more than `max_items` elements; charges the elements built."""
    limit = context.limits.max_items
    if count > limit:
        raise FunctionError(f"{what} would have {count} items, more than the limit of {limit}")
    context.meter.elements(count)


def _replace(context: CallContext, old: str, new: str, text: str) -> str:
    count = len(text) + 1 if old == "" else text.count(old)
    _checked_size(context, len(text) + count * (len(new) - len(old)), "the replaced text")
    return text.replace(old, new)


def _split_runes(context: CallContext, separator: str, text: str) -> list[str]:
    count = len(text) if separator == "" else text.count(separator) + 1
    _checked_items(context, count, "the split text")
    return list(text) if separator == "" else text.split(separator)


def _split(context: CallContext, separator: str, text: str) -> LocalMap:
    parts = _split_runes(context, separator, text)
    return LocalMap((f"_{index}", part) for index, part in enumerate(parts))


def _join(context: CallContext, separator: str, value: object) -> str:
    parts = _strslice(value, context.meter)
    size = sum(map(len, parts)) + len(separator) * max(len(parts) - 1, 0)
    _checked_size(context, size, "the joined text")
    return separator.join(parts)


def _quote(context: CallContext, *values: object) -> str:
    meter = context.meter
    meter.elements(len(values))
    quoted = []
    for value in values:
        if value is not None:
            text = strval(value, meter)
            meter.chars(len(text))  # quoted character by character
            quoted.append(go_quote(text))
    return " ".join(quoted)


def _squote(context: CallContext, *values: object) -> str:
    context.meter.elements(len(values))
    return " ".join(
        f"'{format_value(value, context.meter)}'" for value in values if value is not None
    )


def _cat(context: CallContext, *values: object) -> str:
    context.meter.elements(len(values))
    return " ".join(format_value(value, context.meter) for value in values if value is not None)


def _to_string(context: CallContext, value: object) -> str:
    return strval(value, context.meter)


def _to_strings(context: CallContext, value: object) -> list[str]:
    return _strslice(value, context.meter)


def _indent(context: CallContext, spaces: int, text: str) -> str:
    if spaces < 0:
        raise FunctionError("strings: negative Repeat count")
    _checked_size(context, len(text) + spaces * (text.count("\n") + 1), "the indented text")
    pad = " " * spaces
    return pad + text.replace("\n", "\n" + pad)


def _nindent(context: CallContext, spaces: int, text: str) -> str:
    return "\n" + _indent(context, spaces, text)


def _repeat(context: CallContext, count: int, text: str) -> str:
    if count < 0:
        raise FunctionError("strings: negative Repeat count")
    _checked_size(context, count * len(text), "the repeated text")
    return text * count


def _bounds_error(low: int, high: int, length: int) -> FunctionError:
    return FunctionError(f"slice bounds out of range [{low}:{high}] with length {length}")


def _substr(start: int, end: int, text: str) -> str:
    data = text.encode("utf-8")
    if start < 0:
        if not 0 <= end <= len(data):
            raise _bounds_error(0, end, len(data))
        part = data[:end]
    elif end < 0 or end > len(data):
        if start > len(data):
            raise _bounds_error(start, len(data), len(data))
        part = data[start:]
    else:
        if start > end:
            raise _bounds_error(start, end, len(data))
        part = data[start:end]
    return part.decode("utf-8", "replace")


def _trunc(count: int, text: str) -> str:
    data = text.encode("utf-8")
    if count < 0 and len(data) + count > 0:
        return data[len(data) + count :].decode("utf-8", "replace")
    if count >= 0 and len(data) > count:
        return data[:count].decode("utf-8", "replace")
    return text


_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\r\n")


def _b64dec(text: str) -> str:
    cleaned = text.replace("\r", "").replace("\n", "")
    try:
        return base64.b64decode(cleaned, validate=True).decode("utf-8", "replace")
    except binascii.Error:
        position = next((i for i, c in enumerate(text) if c not in _BASE64), len(text))
        return f"illegal base64 data at input byte {position}"


def _json(
    context: CallContext, value: object, indent: str | None = None, escape_html: bool = True
) -> str:
    try:
        return to_json(value, indent=indent, escape_html=escape_html, meter=context.meter)
    except ValueError:
        return ""


def _pretty_json(context: CallContext, value: object) -> str:
    return _json(context, value, indent="  ")


def _raw_json(context: CallContext, value: object) -> str:
    return _json(context, value, escape_html=False)


def _from_json(context: CallContext, text: str) -> object:
    try:
        return from_json(text, context.meter)
    except (ValueError, RecursionError):
        return None


# --- maps -------------------------------------------------------------------------------


def _dict(context: CallContext, *pairs: object) -> LocalMap:
    meter = context.meter
    meter.elements(len(pairs))
    result = LocalMap()
    for index in range(0, len(pairs), 2):
        key = strval(pairs[index], meter)
        result[key] = pairs[index + 1] if index + 1 < len(pairs) else ""
    return result


def _get(mapping: Mapping[object, object], key: str) -> object:
    return mapping.get(key, "")


def _set(mapping: Mapping[object, object], key: str, value: object) -> LocalMap:
    target = _writable(mapping, "set")
    target[key] = value
    return target


def _unset(mapping: Mapping[object, object], key: str) -> LocalMap:
    target = _writable(mapping, "unset")
    target.pop(key, None)
    return target


def _has_key(mapping: Mapping[object, object], key: str) -> bool:
    return key in mapping


def _keys(context: CallContext, *mappings: Mapping[object, object]) -> list[object]:
    context.meter.elements(sum(len(mapping) for mapping in mappings))
    return [key for mapping in mappings for key, _ in sorted_items(mapping)]


def _values(context: CallContext, mapping: Mapping[object, object]) -> list[object]:
    context.meter.elements(len(mapping))
    return [value for _, value in sorted_items(mapping)]


def _pick(context: CallContext, mapping: Mapping[object, object], *keys: str) -> LocalMap:
    context.meter.elements(len(keys))
    return LocalMap((key, mapping[key]) for key in keys if key in mapping)


def _omit(context: CallContext, mapping: Mapping[object, object], *keys: str) -> LocalMap:
    context.meter.elements(len(mapping) + len(keys))
    omitted = set(keys)
    return LocalMap((key, value) for key, value in mapping.items() if key not in omitted)


def _merge_into(
    target: LocalMap, source: Mapping[object, object], overwrite: bool, meter: Meter
) -> None:
    # mergo's rules, as sprig applies them: nil sources are skipped, maps merge deeply, a
    # non-empty destination value is kept unless overwriting (never by a map), and what is
    # taken over from a source is copied so that the source is never changed later.
    meter.elements(len(source))
    for key, value in source.items():
        if value is None:
            continue
        current = target.get(key)
        if isinstance(value, Mapping):
            if isinstance(current, Mapping):
                nested = current if isinstance(current, LocalMap) else deep_copy(current, meter)
                assert isinstance(nested, LocalMap)
                target[key] = nested
                _merge_into(nested, value, overwrite, meter)
            elif not is_true(current):
                target[key] = deep_copy(value, meter)
        elif overwrite or not is_true(current):
            target[key] = deep_copy(value, meter)


def _merge(
    context: CallContext, target: Mapping[object, object], *sources: Mapping[object, object]
) -> LocalMap:
    destination = _writable(target, "merge")
    for source in sources:
        _merge_into(destination, source, overwrite=False, meter=context.meter)
    return destination


def _merge_overwrite(
    context: CallContext, target: Mapping[object, object], *sources: Mapping[object, object]
) -> LocalMap:
    destination = _writable(target, "mergeOverwrite")
    for source in sources:
        _merge_into(destination, source, overwrite=True, meter=context.meter)
    return destination


# --- lists ------------------------------------------------------------------------------


def _as_list(value: object, message: str) -> list[object] | tuple[object, ...]:
    if not isinstance(value, list | tuple):
        raise FunctionError(message.format(go_type_name(value)))
    return value


def _list(context: CallContext, *values: object) -> list[object]:
    context.meter.elements(len(values))
    return list(values)


def _first(value: object) -> object:
    items = _as_list(value, "Cannot find first on type {}")
    return items[0] if items else None


def _last(value: object) -> object:
    items = _as_list(value, "Cannot find last on type {}")
    return items[-1] if items else None


def _copied(context: CallContext, items: list[object] | tuple[object, ...]) -> None:
    context.meter.elements(len(items))


def _rest(context: CallContext, value: object) -> object:
    items = _as_list(value, "Cannot find rest on type {}")
    _copied(context, items)
    return list(items[1:]) if items else None


def _initial(context: CallContext, value: object) -> object:
    items = _as_list(value, "Cannot find initial on type {}")
    _copied(context, items)
    return list(items[:-1]) if items else None


def _append(context: CallContext, value: object, item: object) -> list[object]:
    items = _as_list(value, "Cannot push on type {}")
    _copied(context, items)
    return [*items, item]


def _prepend(context: CallContext, value: object, item: object) -> list[object]:
    items = _as_list(value, "Cannot prepend on type {}")
    _copied(context, items)
    return [item, *items]


def _concat(context: CallContext, *values: object) -> list[object]:
    lists = [_as_list(value, "Cannot concat type {} as list") for value in values]
    _checked_items(context, sum(map(len, lists)), "the concatenated list")
    return [item for items in lists for item in items]


def _reverse(context: CallContext, value: object) -> list[object]:
    items = _as_list(value, "Cannot find reverse on type {}")
    _copied(context, items)
    return list(reversed(items))


def _uniq(context: CallContext, value: object) -> list[object]:
    meter = context.meter
    unique: list[object] = []
    for item in _as_list(value, "Cannot find uniq on type {}"):
        if not any(_deep_equal(item, seen, meter) for seen in unique):
            unique.append(item)
    return unique


def _compact(context: CallContext, value: object) -> list[object]:
    items = _as_list(value, "Cannot compact on type {}")
    _copied(context, items)
    return [item for item in items if is_true(item)]


def _has(context: CallContext, needle: object, haystack: object) -> bool:
    if haystack is None:
        return False
    items = _as_list(haystack, "Cannot find has on type {}")
    return any(_deep_equal(needle, item, context.meter) for item in items)


def _without(context: CallContext, value: object, *omitted: object) -> list[object]:
    meter = context.meter
    items = _as_list(value, "Cannot find without on type {}")
    meter.elements(len(items))
    return [item for item in items if not any(_deep_equal(item, other, meter) for other in omitted)]


def _sort_alpha(context: CallContext, value: object) -> list[str]:
    if not isinstance(value, list | tuple):
        return [strval(value, context.meter)]
    texts = _strslice(value, context.meter)
    context.meter.elements(len(texts))  # sorted
    return sorted(texts)


def _sequence(context: CallContext, start: int, stop: int, step: int) -> list[int]:
    """sprig's untilStep, refusing to build more than the limit allows."""
    if step == 0 or (stop < start and step > 0) or (stop >= start and step < 0):
        return []
    numbers = range(start, stop, step)
    limit = context.limits.max_items
    if len(numbers) > limit:
        raise FunctionError(f"{len(numbers)} numbers is more than the limit of {limit}")
    context.meter.elements(len(numbers))
    return list(numbers)


def _until(context: CallContext, count: int) -> list[int]:
    return _sequence(context, 0, count, -1 if count < 0 else 1)


def _until_step(context: CallContext, start: int, stop: int, step: int) -> list[int]:
    return _sequence(context, start, stop, step)


def _seq(context: CallContext, *params: int) -> str:
    if len(params) == 1:
        start, end, step = 1, params[0], 1
    elif len(params) == 2:
        start, end, step = params[0], params[1], 1
    elif len(params) == 3:
        start, step, end = params
        if end < start and step > 0:
            return ""
    else:
        return ""
    direction = -1 if end < start else 1
    if len(params) < 3:
        step = direction
    return " ".join(str(number) for number in _sequence(context, start, end + direction, step))


# --- numbers ----------------------------------------------------------------------------


def _int(value: object) -> int:
    return to_int64(value)


def _atoi(text: str) -> int:
    stripped = text.removeprefix("+").removeprefix("-")
    if not stripped.isascii() or not stripped.isdigit():
        return 0
    number = int(text)
    return number if -(1 << 63) <= number < 1 << 63 else 0


def _add(*values: object) -> int:
    return _wrap(sum(to_int64(value) for value in values))


def _add1(value: object) -> int:
    return _wrap(to_int64(value) + 1)


def _sub(left: object, right: object) -> int:
    return _wrap(to_int64(left) - to_int64(right))


def _mul(first: object, *values: object) -> int:
    product = to_int64(first)
    for value in values:
        product = _wrap(product * to_int64(value))
    return product


def _divide(left: object, right: object) -> tuple[int, int]:
    dividend, divisor = to_int64(left), to_int64(right)
    if divisor == 0:
        raise FunctionError("runtime error: integer divide by zero")
    quotient = abs(dividend) // abs(divisor) * (1 if (dividend < 0) == (divisor < 0) else -1)
    return _wrap(quotient), dividend - divisor * quotient


def _div(left: object, right: object) -> int:
    return _divide(left, right)[0]


def _mod(left: object, right: object) -> int:
    return _divide(left, right)[1]


def _max(first: object, *values: object) -> int:
    return max([to_int64(first), *(to_int64(value) for value in values)])


def _min(first: object, *values: object) -> int:
    return min([to_int64(first), *(to_int64(value) for value in values)])


# --- time, encoding, templates ----------------------------------------------------------


def _clock(context: CallContext) -> datetime:
    if context.now is None:
        raise FunctionError("no clock: the render was given no `now`")
    return context.now


def _now(context: CallContext) -> datetime:
    return _clock(context)


def _date(context: CallContext, layout: str, moment: object) -> str:
    context.meter.elements(len(layout))  # interpreted character by character
    if isinstance(moment, datetime):
        when = moment
    elif isinstance(moment, int) and not isinstance(moment, bool):
        when = datetime.fromtimestamp(moment, UTC)
    else:
        when = _clock(context)
    return format_layout(when, layout)


def _tpl(context: CallContext, text: str, data: object) -> str:
    return context.tpl(text, data)


def _include(context: CallContext, name: str, data: object) -> str:
    return context.include(name, data)


ANY, STRING, INT, BOOL, MAP = Param.ANY, Param.STRING, Param.INT, Param.BOOL, Param.MAP
FUNCTIONS = [
    # defaults and flow
    Function("default", _default, (ANY,), ANY),
    Function("empty", _empty, (ANY,)),
    Function("coalesce", _coalesce, (), ANY),
    Function("ternary", _ternary, (ANY, ANY, BOOL)),
    Function("required", _required, (STRING, ANY)),
    Function("fail", _fail, (STRING,)),
    # strings
    Function("upper", lambda text: _map_runes(text, str.upper), (STRING,)),
    Function("lower", lambda text: _map_runes(text, str.lower), (STRING,)),
    Function("title", _title, (STRING,)),
    Function("trim", _trim_space, (STRING,)),
    Function("trimAll", _trim_all, (STRING, STRING)),
    Function("trimPrefix", lambda prefix, text: text.removeprefix(prefix), (STRING, STRING)),
    Function("trimSuffix", lambda suffix, text: text.removesuffix(suffix), (STRING, STRING)),
    Function("nospace", lambda text: "".join(c for c in text if not _is_go_space(c)), (STRING,)),
    Function("replace", _replace, (STRING, STRING, STRING), needs_context=True),
    Function("contains", lambda part, text: part in text, (STRING, STRING)),
    Function("hasPrefix", lambda prefix, text: text.startswith(prefix), (STRING, STRING)),
    Function("hasSuffix", lambda suffix, text: text.endswith(suffix), (STRING, STRING)),
    Function("split", _split, (STRING, STRING), needs_context=True),
    Function("splitList", _split_runes, (STRING, STRING), needs_context=True),
    Function("join", _join, (STRING, ANY), needs_context=True),
    Function("quote", _quote, (), ANY, needs_context=True),
    Function("squote", _squote, (), ANY, needs_context=True),
    Function("cat", _cat, (), ANY, needs_context=True),
    Function("indent", _indent, (INT, STRING), needs_context=True),
    Function("nindent", _nindent, (INT, STRING), needs_context=True),
    Function("repeat", _repeat, (INT, STRING), needs_context=True),
    Function("substr", _substr, (INT, INT, STRING)),
    Function("trunc", _trunc, (INT, STRING)),
    Function("toString", _to_string, (ANY,), needs_context=True),
    Function("toStrings", _to_strings, (ANY,), needs_context=True),
    # encoding
    Function("toJson", _json, (ANY,), needs_context=True),
    Function("toPrettyJson", _pretty_json, (ANY,), needs_context=True),
    Function("toRawJson", _raw_json, (ANY,), needs_context=True),
    Function("fromJson", _from_json, (STRING,), needs_context=True),
    Function("b64enc", lambda text: base64.b64encode(text.encode()).decode(), (STRING,)),
    Function("b64dec", _b64dec, (STRING,)),
    Function("sha256sum", lambda text: hashlib.sha256(text.encode()).hexdigest(), (STRING,)),
    Function("sha1sum", lambda text: hashlib.sha1(text.encode()).hexdigest(), (STRING,)),  # noqa: S324
    # maps
    Function("dict", _dict, (), ANY, needs_context=True),
    Function("get", _get, (MAP, STRING)),
    Function("set", _set, (MAP, STRING, ANY)),
    Function("unset", _unset, (MAP, STRING)),
    Function("hasKey", _has_key, (MAP, STRING)),
    Function("keys", _keys, (), MAP, needs_context=True),
    Function("values", _values, (MAP,), needs_context=True),
    Function("pick", _pick, (MAP,), STRING, needs_context=True),
    Function("omit", _omit, (MAP,), STRING, needs_context=True),
    Function("merge", _merge, (MAP,), MAP, needs_context=True),
    Function("mergeOverwrite", _merge_overwrite, (MAP,), MAP, needs_context=True),
    Function("deepCopy", _deep_copy, (ANY,), needs_context=True),
    # lists
    Function("list", _list, (), ANY, needs_context=True),
    Function("first", _first, (ANY,)),
    Function("last", _last, (ANY,)),
    Function("rest", _rest, (ANY,), needs_context=True),
    Function("initial", _initial, (ANY,), needs_context=True),
    Function("append", _append, (ANY, ANY), needs_context=True),
    Function("prepend", _prepend, (ANY, ANY), needs_context=True),
    Function("concat", _concat, (), ANY, needs_context=True),
    Function("reverse", _reverse, (ANY,), needs_context=True),
    Function("uniq", _uniq, (ANY,), needs_context=True),
    Function("compact", _compact, (ANY,), needs_context=True),
    Function("has", _has, (ANY, ANY), needs_context=True),
    Function("without", _without, (ANY,), ANY, needs_context=True),
    Function("sortAlpha", _sort_alpha, (ANY,), needs_context=True),
    Function("until", _until, (INT,), needs_context=True),
    Function("untilStep", _until_step, (INT, INT, INT), needs_context=True),
    Function("seq", _seq, (), INT, needs_context=True),
    # numbers
    Function("int", _int, (ANY,)),
    Function("int64", _int, (ANY,)),
    Function("float64", to_float64, (ANY,)),
    Function("atoi", _atoi, (STRING,)),
    Function("add", _add, (), ANY),
    Function("add1", _add1, (ANY,)),
    Function("sub", _sub, (ANY, ANY)),
    Function("mul", _mul, (ANY,), ANY),
    Function("div", _div, (ANY, ANY)),
    Function("mod", _mod, (ANY, ANY)),
    Function("max", _max, (ANY,), ANY),
    Function("min", _min, (ANY,), ANY),
    # time and templates
    Function("now", _now, needs_context=True),
    Function("date", _date, (STRING, ANY), needs_context=True),
    Function("tpl", _tpl, (STRING, ANY), needs_context=True),
    Function("include", _include, (STRING, ANY), needs_context=True),
]
