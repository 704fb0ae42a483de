"""Go's fmt for template values: `{{ .X }}` printing (%v), `print`, `println` and `printf`.

The verbs, flags and forms are in docs/scheduling.md ("Templates"). Every function takes the
render's `Meter` (none by default) and charges each element printed, each character formatted
and the padding a width or precision asks for, before it is made.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from scheduler_core.gotemplate.gotime import go_time_string
from scheduler_core.gotemplate.meter import UNMETERED, Meter
from scheduler_core.gotemplate.syntax import go_quote, go_quote_rune
from scheduler_core.gotemplate.values import (
    Walk,
    go_type_name,
    is_struct,
    sorted_items,
    struct_fields,
)

__all__ = [
    "Unprintable",
    "format_float",
    "format_value",
    "json_float",
    "sprint",
    "sprintf",
    "sprintln",
]

_MAX_WIDTH = 1_000_000  # Go's fmt refuses larger widths and precisions


class Unprintable(Exception):
    """A value of a type that has no printed form (a function, an unknown object)."""


@dataclass(slots=True)
class _Spec:
    plus: bool = False
    minus: bool = False
    sharp: bool = False
    space: bool = False
    zero: bool = False
    width: int | None = None
    precision: int | None = None
    plus_v: bool = False


def _digits(value: float) -> tuple[str, int]:
    """The shortest decimal digits of abs(value) and the decimal point position (Go's dp)."""
    if value == 0:
        return "", 0
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digit_tuple))
    point = len(text) + exponent
    stripped = text.lstrip("0")
    point -= len(text) - len(stripped)
    return stripped.rstrip("0"), point


def _fixed(digits: str, point: int, precision: int) -> str:
    whole = digits[:point].ljust(point, "0") if point > 0 else "0"
    fraction = "".join(
        digits[point + i] if 0 <= point + i < len(digits) else "0" for i in range(precision)
    )
    return whole + ("." + fraction if precision > 0 else "")


def _exponent(digits: str, point: int, precision: int, letter: str) -> str:
    first = digits[:1] or "0"
    rest = digits[1:].ljust(precision, "0")[:precision]
    exponent = point - 1 if digits else 0
    sign = "-" if exponent < 0 else "+"
    return f"{first}{'.' + rest if precision > 0 else ''}{letter}{sign}{abs(exponent):02d}"


def _hex_float(value: float, upper: bool) -> str:
    if value == 0:
        text = "0x0p+00"
    else:
        mantissa, _, exponent = float.hex(abs(value))[2:].partition("p")
        head, _, tail = mantissa.partition(".")
        tail = tail.rstrip("0")
        power = int(exponent)
        text = f"0x{head}{'.' + tail if tail else ''}p{'-' if power < 0 else '+'}{abs(power):02d}"
    return text.upper() if upper else text


def format_float(value: float, verb: str = "g", precision: int = -1) -> str:
    """Go's `strconv.FormatFloat(value, verb, precision, 64)` for verbs b e E f F g G x X."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if verb in "xX":
        return sign + _hex_float(value, verb == "X")
    if verb == "b":
        if value == 0:
            return f"{sign}0p-1074"
        mantissa, exponent = math.frexp(abs(value))
        return f"{sign}{int(mantissa * (1 << 53))}p{exponent - 53:+d}"
    if precision >= 0:
        text = f"{abs(value):.{precision}{'f' if verb == 'F' else verb}}"
        return sign + text
    digits, point = _digits(value)
    letter = "E" if verb in "EG" else "e"
    if verb in "eE":
        return sign + _exponent(digits, point, max(len(digits) - 1, 0), letter)
    if verb in "fF":
        return sign + _fixed(digits, point, max(len(digits) - point, 0))
    exponent = point - 1
    if exponent < -4 or exponent >= 6:
        return sign + _exponent(digits, point, max(len(digits) - 1, 0), letter)
    return sign + _fixed(digits, point, max(len(digits) - point, 0))


def json_float(value: float) -> str:
    """A float as Go's encoding/json writes it (ValueError for NaN and infinities)."""
    if not math.isfinite(value):
        raise ValueError(f"json: unsupported value: {format_float(value)}")
    if value != 0 and (abs(value) < 1e-6 or abs(value) >= 1e21):
        text = format_float(value, "e")
        if text[-3:-1] == "-0":  # Go writes 1e-7, not 1e-07
            text = text[:-2] + text[-1]
        return text
    return format_float(value, "f")


def _pad(text: str, spec: _Spec) -> str:
    if spec.width is None or spec.width <= len(text):
        return text
    fill = spec.width - len(text)
    if spec.minus:
        return text + " " * fill
    return ("0" if spec.zero else " ") * fill + text


def _format_int(value: int, verb: str, spec: _Spec) -> str:
    base = {"d": 10, "v": 10, "b": 2, "o": 8, "O": 8, "x": 16, "X": 16}[verb]
    negative = value < 0
    magnitude = abs(value)
    if spec.precision is not None:
        if spec.precision == 0 and magnitude == 0:
            return " " * (spec.width or 0)
        minimum = spec.precision
    elif spec.zero and not spec.minus and spec.width is not None:
        minimum = spec.width - (1 if negative or spec.plus or spec.space else 0)
    else:
        minimum = 0
    digits = {2: "b", 8: "o", 10: "d", 16: "x"}[base]
    text = format(magnitude, digits)
    if verb == "X":
        text = text.upper()
    text = text.rjust(minimum, "0")
    if spec.sharp:
        if base == 2:
            text = "0b" + text
        elif base == 8 and not text.startswith("0"):
            text = "0" + text
        elif base == 16:
            text = ("0X" if verb == "X" else "0x") + text
    if verb == "O":
        text = "0o" + text
    if negative:
        text = "-" + text
    elif spec.plus:
        text = "+" + text
    elif spec.space:
        text = " " + text
    return _pad(text, _Spec(minus=spec.minus, width=spec.width))


def _format_float(value: float, verb: str, spec: _Spec) -> str:
    if verb == "v":
        verb = "g"
    precision = spec.precision if spec.precision is not None else -1
    if precision < 0 and verb in "eEfF":
        precision = 6
    number = format_float(value, verb, precision)
    if number[0] not in "+-":
        number = "+" + number
    if spec.space and number[0] == "+" and not spec.plus:
        number = " " + number[1:]
    if number[1] in "IN":  # infinities and NaN are never padded with zeros
        if number[1] == "N" and not spec.space and not spec.plus:
            number = number[1:]
        return _pad(number, _Spec(minus=spec.minus, width=spec.width))
    if spec.plus or number[0] != "+":
        if spec.zero and not spec.minus and spec.width is not None and spec.width > len(number):
            return number[0] + "0" * (spec.width - len(number)) + number[1:]
        return _pad(number, spec)
    return _pad(number[1:], spec)


def _format_string(text: str, verb: str, spec: _Spec) -> str:
    if verb in "vs":
        if spec.precision is not None:
            text = text[: spec.precision]
        return _pad(text, spec)
    if verb == "q":
        if spec.precision is not None:
            text = text[: spec.precision]
        if spec.sharp and "`" not in text and all(c == "\t" or c.isprintable() for c in text):
            return _pad("`" + text + "`", spec)
        return _pad(go_quote(text, ascii_only=spec.plus), spec)
    data = text.encode("utf-8")
    if spec.precision is not None:
        data = data[: spec.precision]
    form = "{:02X}" if verb == "X" else "{:02x}"
    prefix = ("0X" if verb == "X" else "0x") if spec.sharp else ""
    if spec.space:
        return _pad(" ".join(prefix + form.format(byte) for byte in data), spec)
    return _pad(prefix + "".join(form.format(byte) for byte in data), spec)


def _format_rune(value: int, verb: str, spec: _Spec) -> str:
    valid = 0 <= value <= 0x10FFFF and not 0xD800 <= value <= 0xDFFF
    if verb == "c":
        return _pad(chr(value) if valid else "\ufffd", spec)
    if verb == "q":
        return _pad(go_quote_rune(value, ascii_only=spec.plus), spec)
    text = f"U+{value:04X}"
    if spec.sharp and valid and chr(value).isprintable():
        text += f" '{chr(value)}'"
    return _pad(text, spec)


class _Printer:
    """Formats one printf argument (and, recursively, its elements) for one verb."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self.walk = Walk(meter)

    def bad_verb(self, value: object, verb: str, spec: _Spec, depth: int) -> str:
        if value is None:
            return f"%!{verb}(<nil>)"
        inner = self.value(value, "v", spec, depth)
        return f"%!{verb}({go_type_name(value)}={inner})"

    def value(self, value: object, verb: str, spec: _Spec, depth: int = 0) -> str:
        self.walk.step(depth)
        if spec.width or spec.precision:  # the padding (or digits) it may take, before made
            self.meter.chars((spec.width or 0) + (spec.precision or 0))
        if verb == "T":
            if isinstance(value, Mapping):  # its key types are looked at
                self.meter.elements(len(value))
            return _pad(go_type_name(value), spec)
        if value is None:
            return _pad("<nil>", spec) if verb == "v" or depth > 0 else f"%!{verb}(<nil>)"
        if isinstance(value, bool):
            if verb in "tv":
                return _pad("true" if value else "false", spec)
        elif isinstance(value, int):
            if verb in "vdboOxX":
                return _format_int(value, verb, spec)
            if verb in "cqU":
                return _format_rune(value, verb, spec)
        elif isinstance(value, float):
            if verb in "vbeEfFgGxX":
                return _format_float(value, verb, spec)
        elif isinstance(value, str):
            if verb in "vsqxX":
                self.meter.chars(len(value) * (3 if verb in "xX" else 1))
                return _format_string(value, verb, spec)
        elif isinstance(value, datetime):
            if verb in "vsqxX":
                return _format_string(go_time_string(value), verb, spec)
        elif isinstance(value, Mapping):
            items = (
                self.value(key, verb, spec, depth + 1)
                + ":"
                + self.value(item, verb, spec, depth + 1)
                for key, item in sorted_items(value)
            )
            return "map[" + " ".join(items) + "]"
        elif isinstance(value, list | tuple):
            return "[" + " ".join(self.value(item, verb, spec, depth + 1) for item in value) + "]"
        elif is_struct(value):
            fields = (
                (f"{name}:" if spec.plus_v else "") + self.value(item, verb, spec, depth + 1)
                for name, item in struct_fields(value)
            )
            return "{" + " ".join(fields) + "}"
        else:
            raise Unprintable(f"can't print value of type {go_type_name(value)}")
        return self.bad_verb(value, verb, spec, depth)


def format_value(value: object, meter: Meter = UNMETERED) -> str:
    """A value as `{{ . }}` and `fmt.Sprint` print it (%v)."""
    if isinstance(value, str):
        return value
    kind = type(value)
    if kind is int:  # the common cases, without a printer
        return str(value)
    if kind is bool:
        return "true" if value else "false"
    return _Printer(meter).value(value, "v", _Spec())


def sprint(args: Sequence[object], meter: Meter = UNMETERED) -> str:
    """`fmt.Sprint`: a space between operands when neither side is a string."""
    out: list[str] = []
    previous_string = False
    for index, arg in enumerate(args):
        is_string = isinstance(arg, str)
        if index > 0 and not is_string and not previous_string:
            out.append(" ")
        out.append(format_value(arg, meter))
        previous_string = is_string
    return "".join(out)


def sprintln(args: Sequence[object], meter: Meter = UNMETERED) -> str:
    """`fmt.Sprintln`: operands separated by spaces, then a newline."""
    return " ".join(format_value(arg, meter) for arg in args) + "\n"


def _number(text: str, index: int) -> tuple[int | None, int, bool]:
    """Reads decimal digits: (number or None, next index, too large)."""
    start = index
    while index < len(text) and text[index].isdigit() and text[index].isascii():
        index += 1
    if index == start:
        return None, index, False
    number = int(text[start:index])
    return number, index, number > _MAX_WIDTH


def sprintf(format_text: str, args: Sequence[object], meter: Meter = UNMETERED) -> str:
    """`fmt.Sprintf`."""
    out: list[str] = []
    printer = _Printer(meter)
    arg_index = 0
    index = 0
    end = len(format_text)
    while index < end:
        percent = format_text.find("%", index)
        if percent < 0:
            out.append(format_text[index:])
            break
        out.append(format_text[index:percent])
        index = percent + 1
        spec = _Spec()
        while index < end and format_text[index] in "#0+- ":
            flag = format_text[index]
            if flag == "#":
                spec.sharp = True
            elif flag == "0":
                spec.zero = not spec.minus
            elif flag == "+":
                spec.plus = True
            elif flag == "-":
                spec.minus, spec.zero = True, False
            else:
                spec.space = True
            index += 1
        if index < end and format_text[index] == "[":
            out.append("%!(BADINDEX)")
            closing = format_text.find("]", index)
            index = end if closing < 0 else closing + 1
            continue
        if index < end and format_text[index] == "*":
            index += 1
            star = args[arg_index] if arg_index < len(args) else None
            arg_index += 1
            if isinstance(star, int) and not isinstance(star, bool) and abs(star) <= _MAX_WIDTH:
                spec.width = abs(star)
                if star < 0:
                    spec.minus, spec.zero = True, False
            else:
                out.append("%!(BADWIDTH)")
        else:
            width, index, too_large = _number(format_text, index)
            if too_large:
                out.append("%!(BADWIDTH)")
            else:
                spec.width = width
        if index < end and format_text[index] == ".":
            index += 1
            if index < end and format_text[index] == "*":
                index += 1
                star = args[arg_index] if arg_index < len(args) else None
                arg_index += 1
                if isinstance(star, int) and not isinstance(star, bool) and star <= _MAX_WIDTH:
                    spec.precision = star if star >= 0 else None
                else:
                    out.append("%!(BADPREC)")
            else:
                precision, index, too_large = _number(format_text, index)
                if too_large:
                    out.append("%!(BADPREC)")
                else:
                    spec.precision = precision or 0
        if index >= end:
            out.append("%!(NOVERB)")
            break
        verb = format_text[index]
        index += 1
        if verb == "%":
            out.append("%")
            continue
        if arg_index >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        if verb == "v":
            spec.plus_v, spec.plus = spec.plus, False
        out.append(printer.value(args[arg_index], verb, spec))
        arg_index += 1
    if arg_index < len(args):
        extra = ", ".join(
            "<nil>" if arg is None else f"{go_type_name(arg)}={format_value(arg, meter)}"
            for arg in args[arg_index:]
        )
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)
