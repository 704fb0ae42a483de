"""Go's literal syntax: quoted strings, character constants and numbers.

Used by the parser (string, raw string, character and number literals in actions) and by the
functions that print or read Go-quoted text (`printf "%q"`, sprig's `quote`, Kalypso's
`unquote`). Follows `strconv.Quote`, `strconv.Unquote` and Go's number literal rules.
"""

import re
from dataclasses import dataclass

__all__ = [
    "NumberLiteral",
    "go_quote",
    "go_quote_rune",
    "go_unquote",
    "go_unquote_char",
    "parse_float",
    "parse_int",
    "parse_number",
]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1

_SIMPLE_ESCAPES = {
    "\a": r"\a",
    "\b": r"\b",
    "\f": r"\f",
    "\n": r"\n",
    "\r": r"\r",
    "\t": r"\t",
    "\v": r"\v",
    "\\": r"\\",
}
_UNESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}


def _escape_rune(char: str, quote: str, ascii_only: bool) -> str:
    if char == quote:
        return "\\" + char
    if char in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[char]
    code = ord(char)
    printable = char == " " or char.isprintable()
    if printable and (code < 0x80 or not ascii_only):
        return char
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if 0xD800 <= code <= 0xDFFF:  # not a valid rune: Go escapes the replacement character
        return r"\ufffd"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def go_quote(text: str, *, ascii_only: bool = False) -> str:
    """`strconv.Quote` (or `QuoteToASCII`): a double-quoted Go string literal."""
    return '"' + "".join(_escape_rune(char, '"', ascii_only) for char in text) + '"'


def go_quote_rune(code: int, *, ascii_only: bool = False) -> str:
    """`strconv.QuoteRune`: a single-quoted Go character literal."""
    if not 0 <= code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        code = 0xFFFD
    return "'" + _escape_rune(chr(code), "'", ascii_only) + "'"


def _read_escape(body: str, index: int, quote: str) -> tuple[int, bool, int]:
    """Reads the escape after a backslash at `index`: (value, is_byte, next index)."""
    if index >= len(body):
        raise ValueError("invalid syntax")
    char = body[index]
    if char in _UNESCAPES:
        return _UNESCAPES[char], False, index + 1
    if char in "'\"":
        if char != quote:
            raise ValueError("invalid syntax")
        return ord(char), False, index + 1
    if char in "xuU":
        size = {"x": 2, "u": 4, "U": 8}[char]
        digits = body[index + 1 : index + 1 + size]
        if len(digits) != size or not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise ValueError("invalid syntax")
        value = int(digits, 16)
        if char != "x" and (value > 0x10FFFF or 0xD800 <= value <= 0xDFFF):
            raise ValueError("invalid syntax")
        return value, char == "x", index + 1 + size
    if char in "01234567":
        digits = body[index : index + 3]
        if len(digits) != 3 or not all(c in "01234567" for c in digits):
            raise ValueError("invalid syntax")
        value = int(digits, 8)
        if value > 255:
            raise ValueError("invalid syntax")
        return value, True, index + 3
    raise ValueError("invalid syntax")


def go_unquote(literal: str) -> str:
    """`strconv.Unquote` for string literals: "..." with escapes, or `...` raw.

    Raises ValueError("invalid syntax") as strconv does. Bytes written as `\\x..` or octal
    escapes that do not form UTF-8 become U+FFFD.
    """
    if len(literal) < 2 or literal[0] != literal[-1] or literal[0] not in "\"`'":
        raise ValueError("invalid syntax")
    quote, body = literal[0], literal[1:-1]
    if quote == "`":
        if "`" in body:
            raise ValueError("invalid syntax")
        return body.replace("\r", "")
    if quote == "'":
        return chr(go_unquote_char(literal))
    if "\n" in body:
        raise ValueError("invalid syntax")
    out = bytearray()
    index = 0
    while index < len(body):
        char = body[index]
        if char == quote:
            raise ValueError("invalid syntax")
        if char != "\\":
            out += char.encode("utf-8", "surrogatepass")
            index += 1
            continue
        value, is_byte, index = _read_escape(body, index + 1, quote)
        out += bytes([value]) if is_byte else chr(value).encode("utf-8")
    return out.decode("utf-8", "replace")


def go_unquote_char(literal: str) -> int:
    """The value of a Go character constant such as 'a', '\\n' or '\\u00e9'."""
    if len(literal) < 3 or literal[0] != "'" or literal[-1] != "'":
        raise ValueError("invalid syntax")
    body = literal[1:-1]
    if body[0] != "\\":
        if len(body) != 1 or body == "'":
            raise ValueError("invalid syntax")
        return ord(body)
    value, _, end = _read_escape(body, 1, "'")
    if end != len(body):
        raise ValueError("invalid syntax")
    return value


_INT_LITERAL = re.compile(
    r"""[+-]?(?:
        0[xX](?:_?[0-9a-fA-F])+
      | 0[bB](?:_?[01])+
      | 0[oO](?:_?[0-7])+
      | 0(?:_?[0-7])*
      | [1-9](?:_?[0-9])*
    )""",
    re.VERBOSE,
)
_DIGITS = r"[0-9](?:_?[0-9])*"
_HEX_DIGITS = r"[0-9a-fA-F](?:_?[0-9a-fA-F])*"
_FLOAT_LITERAL = re.compile(
    rf"""[+-]?(?:
        (?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?
      | 0[xX]_?(?:{_HEX_DIGITS}(?:\.(?:{_HEX_DIGITS})?)?|\.{_HEX_DIGITS})[pP][+-]?{_DIGITS}
    )""",
    re.VERBOSE,
)


def parse_int(text: str) -> int | None:
    """An integer in Go's base-0 syntax (strconv.ParseInt(text, 0, ...)), or None."""
    if not _INT_LITERAL.fullmatch(text):
        return None
    sign = -1 if text[0] == "-" else 1
    digits = text.lstrip("+-").replace("_", "")
    if len(digits) > 1 and digits[0] == "0" and digits[1] in "01234567":
        return sign * int(digits, 8)  # Go's legacy octal: 0755
    return sign * int(digits, 0)


def parse_float(text: str) -> float | None:
    """A finite float in Go's literal syntax, or None."""
    if not _FLOAT_LITERAL.fullmatch(text):
        return None
    cleaned = text.replace("_", "")
    unsigned = cleaned.lstrip("+-")
    value = float.fromhex(cleaned) if unsigned[:2] in ("0x", "0X") else float(cleaned)
    if value in (float("inf"), float("-inf")):
        return None  # strconv reports out-of-range; the literal is not a float
    return value


@dataclass(frozen=True, slots=True)
class NumberLiteral:
    """A number literal read the way Go's template parser does: every type that can hold it."""

    text: str
    is_int: bool
    is_uint: bool
    is_float: bool
    int_value: int
    float_value: float


def parse_number(text: str) -> NumberLiteral:
    """Reads a number or character literal. Raises ValueError with Go's message if invalid."""
    if text.startswith("'"):
        try:
            rune = go_unquote_char(text)
        except ValueError:
            raise ValueError(f"malformed character constant: {text}") from None
        return NumberLiteral(text, True, True, True, rune, float(rune))
    if text.endswith("i"):
        raise ValueError(f"complex number {text} is not supported")
    whole = parse_int(text)
    is_int = whole is not None and INT64_MIN <= whole <= INT64_MAX
    is_uint = whole is not None and 0 <= whole <= UINT64_MAX
    if whole is not None and (is_int or is_uint):
        return NumberLiteral(text, is_int, is_uint, True, whole, float(whole))
    floating = parse_float(text)
    if floating is None:
        raise ValueError(f"illegal number syntax: {go_quote(text)}")
    if not any(c in text for c in ".eEpP"):
        raise ValueError(f"integer overflow: {go_quote(text)}")
    integral = floating.is_integer()
    as_int = int(floating) if integral else 0
    return NumberLiteral(
        text,
        integral and INT64_MIN <= as_int <= INT64_MAX,
        integral and 0 <= as_int <= UINT64_MAX,
        True,
        as_int,
        floating,
    )
