"""Lexer: template text to tokens, scanned the way Go's text/template lexer does.

TEXT is already trimmed where an action starts `{{- ` or ends ` -}}` (the space is needed:
`{{-3}}` is the number -3); comments are dropped. Tokens come lazily, so a syntax error the
parser finds early is reported before a lexical one later in the text.
"""

import enum
from collections.abc import Generator, Iterator
from dataclasses import dataclass

from scheduler_core.gotemplate.errors import TemplateError
from scheduler_core.gotemplate.syntax import go_quote

__all__ = ["Kind", "Token", "line_column", "tokens"]

_SPACE = " \t\r\n"
_LEFT = "{{"
_RIGHT = "}}"


class Kind(enum.Enum):
    TEXT = "text"
    LEFT_DELIM = "left delimiter"
    RIGHT_DELIM = "right delimiter"
    SPACE = "space"
    EOF = "EOF"
    BOOL = "bool"
    CHAR = "character"
    CHAR_CONSTANT = "character constant"
    NUMBER = "number"
    STRING = "string"
    RAW_STRING = "raw string"
    IDENTIFIER = "identifier"
    FIELD = "field"
    VARIABLE = "variable"
    PIPE = "pipe"
    LEFT_PAREN = "left paren"
    RIGHT_PAREN = "right paren"
    DECLARE = "declare"
    ASSIGN = "assign"
    # keywords
    BLOCK = "block"
    BREAK = "break"
    CONTINUE = "continue"
    DOT = "."
    DEFINE = "define"
    ELSE = "else"
    END = "end"
    IF = "if"
    NIL = "nil"
    RANGE = "range"
    TEMPLATE = "template"
    WITH = "with"


_KEYWORDS = {
    kind.value: kind
    for kind in (
        Kind.BLOCK,
        Kind.BREAK,
        Kind.CONTINUE,
        Kind.DEFINE,
        Kind.ELSE,
        Kind.END,
        Kind.IF,
        Kind.NIL,
        Kind.RANGE,
        Kind.TEMPLATE,
        Kind.WITH,
    )
}
_KEYWORD_KINDS = frozenset(_KEYWORDS.values()) | {Kind.DOT}


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    value: str
    pos: int

    def __str__(self) -> str:
        """The token as Go's parser quotes it in errors: EOF, <keyword>, "text"."""
        if self.kind is Kind.EOF:
            return "EOF"
        if self.kind in _KEYWORD_KINDS:
            return f"<{self.value}>"
        if len(self.value) > 10:
            return go_quote(self.value[:10]) + "..."
        return go_quote(self.value)


def line_column(text: str, pos: int) -> tuple[int, int]:
    """1-based line and 0-based column (in characters) of a position, as Go reports them."""
    line_start = text.rfind("\n", 0, pos) + 1
    return text.count("\n", 0, pos) + 1, pos - line_start


def _is_space(char: str) -> bool:
    return len(char) == 1 and char in _SPACE


def _is_digit(char: str) -> bool:
    return len(char) == 1 and "0" <= char <= "9"


def _is_alphanumeric(char: str) -> bool:
    return char == "_" or char.isalpha() or char.isdecimal()


def _unicode_name(char: str) -> str:
    """Go's %#U: U+0041 'A'."""
    code = f"U+{ord(char):04X}"
    return f"{code} '{char}'" if char.isprintable() else code


class _Lexer:
    def __init__(self, name: str, text: str, *, break_ok: bool, continue_ok: bool) -> None:
        self.name = name
        self.text = text
        self.break_ok = break_ok
        self.continue_ok = continue_ok

    def error(self, detail: str, pos: int) -> TemplateError:
        line, column = line_column(self.text, pos)
        return TemplateError(detail, name=self.name, line=line, column=column)

    def at_right_delim(self, pos: int) -> tuple[bool, bool]:
        """(at a right delimiter, with a trim marker " -}}")."""
        text = self.text
        if (
            pos + 1 < len(text)
            and text[pos] in _SPACE
            and text[pos + 1] == "-"
            and text.startswith(_RIGHT, pos + 2)
        ):
            return True, True
        return text.startswith(_RIGHT, pos), False

    def at_terminator(self, pos: int) -> bool:
        """Whether an identifier, field or variable may end at `pos`."""
        if pos >= len(self.text):
            return True
        char = self.text[pos]
        return char in _SPACE or char in ".,|:()" or self.text.startswith(_RIGHT, pos)

    def skip_space(self, pos: int) -> int:
        while pos < len(self.text) and self.text[pos] in _SPACE:
            pos += 1
        return pos

    def tokens(self) -> Iterator[Token]:
        text = self.text
        pos = 0
        while True:
            delim = text.find(_LEFT, pos)
            if delim < 0:
                if pos < len(text):
                    yield Token(Kind.TEXT, text[pos:], pos)
                yield Token(Kind.EOF, "", len(text))
                return
            trim = text[delim + 2 : delim + 3] == "-" and _is_space(text[delim + 3 : delim + 4])
            end = len(text[pos:delim].rstrip(_SPACE)) + pos if trim else delim
            if end > pos:
                yield Token(Kind.TEXT, text[pos:end], pos)
            inside = delim + 4 if trim else delim + 2
            if text.startswith("/*", inside):
                pos = self.comment(delim, inside)
                continue
            yield Token(Kind.LEFT_DELIM, _LEFT, delim)
            pos = yield from self.action(delim, inside)

    def comment(self, delim: int, pos: int) -> int:
        close = self.text.find("*/", pos + 2)
        if close < 0:
            raise self.error("unclosed comment", delim)
        at_delim, trim = self.at_right_delim(close + 2)
        if not at_delim:
            raise self.error("comment ends before closing delimiter", close)
        pos = close + 2 + (2 if trim else 0) + len(_RIGHT)
        return self.skip_space(pos) if trim else pos

    def action(self, delim: int, pos: int) -> Generator[Token, None, int]:
        """Tokens of one action, up to and including its right delimiter; returns the position
        after it."""
        text = self.text
        parens = 0
        while True:
            at_delim, trim = self.at_right_delim(pos)
            if at_delim:
                if parens:
                    raise self.error("unclosed left paren", delim)
                if trim:
                    pos += 2
                yield Token(Kind.RIGHT_DELIM, _RIGHT, pos)
                pos += len(_RIGHT)
                return self.skip_space(pos) if trim else pos
            if pos >= len(text):
                raise self.error("unclosed action", delim)
            char = text[pos]
            start = pos
            if char in _SPACE:
                pos = self.skip_space(pos)
                # The space before a trim-marked delimiter " -}}" belongs to the delimiter.
                if text[pos : pos + 1] == "-" and text.startswith(_RIGHT, pos + 1):
                    pos -= 1
                    if pos == start:
                        continue
                yield Token(Kind.SPACE, text[start:pos], start)
            elif char == "=":
                pos += 1
                yield Token(Kind.ASSIGN, "=", start)
            elif char == ":":
                if text[pos + 1 : pos + 2] != "=":
                    raise self.error("expected :=", pos)
                pos += 2
                yield Token(Kind.DECLARE, ":=", start)
            elif char == "|":
                pos += 1
                yield Token(Kind.PIPE, "|", start)
            elif char == '"':
                pos = self.quoted(pos, '"', "unterminated quoted string")
                yield Token(Kind.STRING, text[start:pos], start)
            elif char == "'":
                pos = self.quoted(pos, "'", "unterminated character constant")
                yield Token(Kind.CHAR_CONSTANT, text[start:pos], start)
            elif char == "`":
                close = text.find("`", pos + 1)
                if close < 0:
                    raise self.error("unterminated raw quoted string", start)
                pos = close + 1
                yield Token(Kind.RAW_STRING, text[start:pos], start)
            elif char == "$":
                pos, token = self.field_or_variable(pos, Kind.VARIABLE)
                yield token
            elif char == "." and not _is_digit(text[pos + 1 : pos + 2]):
                pos, token = self.field_or_variable(pos, Kind.FIELD)
                yield token
            elif char in "+-." or _is_digit(char):
                pos = self.number(pos)
                yield Token(Kind.NUMBER, text[start:pos], start)
            elif _is_alphanumeric(char):
                pos, token = self.identifier(pos)
                yield token
            elif char == "(":
                parens += 1
                pos += 1
                yield Token(Kind.LEFT_PAREN, "(", start)
            elif char == ")":
                parens -= 1
                if parens < 0:
                    raise self.error("unexpected right paren", start)
                pos += 1
                yield Token(Kind.RIGHT_PAREN, ")", start)
            elif char.isascii() and char.isprintable():
                pos += 1
                yield Token(Kind.CHAR, char, start)
            else:
                raise self.error(f"unrecognized character in action: {_unicode_name(char)}", start)

    def quoted(self, pos: int, quote: str, unterminated: str) -> int:
        """End of a "..." or '...' literal starting at `pos` (escapes skipped)."""
        text = self.text
        index = pos + 1
        while True:
            char = text[index : index + 1]
            if char == "\\":
                escaped = text[index + 1 : index + 2]
                if escaped in ("", "\n"):
                    raise self.error(unterminated, pos)
                index += 2
            elif char in ("", "\n"):
                raise self.error(unterminated, pos)
            elif char == quote:
                return index + 1
            else:
                index += 1

    def field_or_variable(self, pos: int, kind: Kind) -> tuple[int, Token]:
        start = pos
        pos += 1
        if self.at_terminator(pos):
            if kind is Kind.VARIABLE:
                return pos, Token(Kind.VARIABLE, "$", start)
            return pos, Token(Kind.DOT, ".", start)
        while pos < len(self.text) and _is_alphanumeric(self.text[pos]):
            pos += 1
        if not self.at_terminator(pos):
            raise self.error(f"bad character {_unicode_name(self.text[pos])}", pos)
        return pos, Token(kind, self.text[start:pos], start)

    def identifier(self, pos: int) -> tuple[int, Token]:
        start = pos
        while pos < len(self.text) and _is_alphanumeric(self.text[pos]):
            pos += 1
        if not self.at_terminator(pos):
            raise self.error(f"bad character {_unicode_name(self.text[pos])}", pos)
        word = self.text[start:pos]
        kind = _KEYWORDS.get(word, Kind.IDENTIFIER)
        if (kind is Kind.BREAK and not self.break_ok) or (
            kind is Kind.CONTINUE and not self.continue_ok
        ):
            kind = Kind.IDENTIFIER
        if word in ("true", "false"):
            kind = Kind.BOOL
        return pos, Token(kind, word, start)

    def scan_number(self, pos: int) -> tuple[int, bool]:
        """Go's scanNumber: (end, well formed) — the parser checks the value itself."""
        text = self.text

        def accept(index: int, valid: str) -> int:
            return index + 1 if index < len(text) and text[index] in valid else index

        def accept_run(index: int, valid: str) -> int:
            while index < len(text) and text[index] in valid:
                index += 1
            return index

        pos = accept(pos, "+-")
        digits = "0123456789_"
        if text[pos : pos + 1] == "0":
            pos += 1
            prefix = text[pos : pos + 1]
            if prefix and prefix in "xX":
                digits, pos = "0123456789abcdefABCDEF_", pos + 1
            elif prefix and prefix in "oO":
                digits, pos = "01234567_", pos + 1
            elif prefix and prefix in "bB":
                digits, pos = "01_", pos + 1
        pos = accept_run(pos, digits)
        if text[pos : pos + 1] == ".":
            pos = accept_run(pos + 1, digits)
        exponent = "eE" if len(digits) == 11 else "pP" if len(digits) == 23 else ""
        if exponent and text[pos : pos + 1] and text[pos] in exponent:
            pos = accept_run(accept(pos + 1, "+-"), "0123456789_")
        pos = accept(pos, "i")
        if pos < len(text) and _is_alphanumeric(text[pos]):
            return pos + 1, False
        return pos, True

    def number(self, pos: int) -> int:
        start = pos
        pos, ok = self.scan_number(pos)
        if ok and self.text[pos : pos + 1] in ("+", "-"):
            pos, ok = self.scan_number(pos)
            if ok and self.text[pos - 1] == "i":
                raise self.error(
                    f"complex number {go_quote(self.text[start:pos])} is not supported", start
                )
            ok = False
        if not ok:
            raise self.error(f"bad number syntax: {go_quote(self.text[start:pos])}", start)
        return pos


def tokens(
    name: str, text: str, *, break_ok: bool = True, continue_ok: bool = True
) -> Iterator[Token]:
    """The tokens of `text`, ending with EOF; raises TemplateError at the first bad one.

    `break_ok`/`continue_ok` are false when a function of that name is defined, which then
    shadows the keyword as in Go.
    """
    return _Lexer(name, text, break_ok=break_ok, continue_ok=continue_ok).tokens()
