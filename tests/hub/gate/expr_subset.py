"""The part of expr-lang (github.com/expr-lang/expr) the integration recipes keep to, read and
evaluated as expr does, so that a recipe's conditions can be run against real answers here.

Argo Rollouts, Kargo and GitOps Promoter all evaluate expr. The subset (docs/integrations.md):
literals (strings in single or double quotes, numbers, true, false, nil), variables and their
fields (`response.body.verdict`), comparisons (== != < <= > >=), && || ! and parentheses,
`condition ? a : b`, and a map literal (`{phase: "success"}`). Anything else is refused, so a
recipe that strays from the subset fails its test rather than being evaluated loosely.

As in expr: a missing key of a map is nil; a field of nil is an error; && || ! and a
condition take booleans only; == between values of different kinds is false; order
comparisons take numbers only.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ExprError", "evaluate"]

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>\d+(?:\.\d+)?)
      | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<operator>==|!=|<=|>=|&&|\|\||[<>!?:.(){},])
    )""",
    re.VERBOSE,
)
_LITERALS = {"true": True, "false": False, "nil": None}
_ORDER = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


class ExprError(Exception):
    """The expression is outside the subset, or expr would fail evaluating it."""


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str


def _tokens(source: str) -> list[_Token]:
    tokens, position = [], 0
    source = source.rstrip()
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None or match.end() == position:
            raise ExprError(f"outside the subset at {source[position:]!r}")
        kind = match.lastgroup
        assert kind is not None
        tokens.append(_Token(kind, match.group(kind)))
        position = match.end()
    return tokens


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(left: Any, right: Any) -> bool:
    if _number(left) and _number(right):
        return bool(left == right)
    return type(left) is type(right) and bool(left == right)


def _boolean(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ExprError(f"{what} takes a boolean, got {value!r}")
    return value


class _Reader:
    """A recursive descent over the tokens that evaluates as it reads; a branch not taken is
    read with `live` false, so it is checked against the subset but not evaluated."""

    def __init__(self, source: str, variables: Mapping[str, Any]) -> None:
        self.tokens = _tokens(source)
        self.position = 0
        self.variables = variables

    def peek(self) -> str | None:
        if self.position < len(self.tokens):
            return self.tokens[self.position].text
        return None

    def take(self, expected: str | None = None) -> _Token:
        if self.position >= len(self.tokens):
            raise ExprError("the expression ends too early")
        token = self.tokens[self.position]
        if expected is not None and token.text != expected:
            raise ExprError(f"expected {expected!r}, got {token.text!r}")
        self.position += 1
        return token

    def expression(self, live: bool) -> Any:
        condition = self.disjunction(live)
        if self.peek() != "?":
            return condition
        self.take("?")
        chosen = live and _boolean(condition, "?:")
        yes = self.expression(live and chosen)
        self.take(":")
        no = self.expression(live and not chosen)
        return yes if chosen else no

    def disjunction(self, live: bool) -> Any:
        value = self.conjunction(live)
        while self.peek() == "||":
            self.take()
            done = live and _boolean(value, "||")
            right = self.conjunction(live and not done)
            value = True if done else (live and _boolean(right, "||"))
        return value

    def conjunction(self, live: bool) -> Any:
        value = self.negation(live)
        while self.peek() == "&&":
            self.take()
            done = live and not _boolean(value, "&&")
            right = self.negation(live and not done)
            value = False if done else (live and _boolean(right, "&&"))
        return value

    def negation(self, live: bool) -> Any:
        if self.peek() == "!":
            self.take()
            value = self.negation(live)
            return live and not _boolean(value, "!")
        return self.comparison(live)

    def comparison(self, live: bool) -> Any:
        left = self.member(live)
        operator = self.peek()
        if operator not in ("==", "!=", *_ORDER):
            return left
        self.take()
        right = self.member(live)
        if not live:
            return None
        if operator == "==":
            return _equal(left, right)
        if operator == "!=":
            return not _equal(left, right)
        if not (_number(left) and _number(right)):
            raise ExprError(f"{operator} takes numbers, got {left!r} and {right!r}")
        return _ORDER[operator](left, right)

    def member(self, live: bool) -> Any:
        value = self.primary(live)
        while self.peek() == ".":
            self.take()
            name = self.take()
            if name.kind != "name":
                raise ExprError(f"expected a field name, got {name.text!r}")
            if not live:
                continue
            if not isinstance(value, Mapping):
                raise ExprError(f"cannot fetch {name.text} from {value!r}")
            value = value.get(name.text)
        return value

    def primary(self, live: bool) -> Any:
        token = self.take()
        if token.kind == "number":
            return float(token.text) if "." in token.text else int(token.text)
        if token.kind == "string":
            return token.text[1:-1].encode().decode("unicode_escape")
        if token.kind == "name":
            if token.text in _LITERALS:
                return _LITERALS[token.text]
            if live and token.text not in self.variables:
                raise ExprError(f"unknown variable {token.text}")
            return self.variables.get(token.text)
        if token.text == "(":
            value = self.expression(live)
            self.take(")")
            return value
        if token.text == "{":
            return self.map(live)
        raise ExprError(f"outside the subset at {token.text!r}")

    def map(self, live: bool) -> dict[str, Any]:
        entries = {}
        while self.peek() != "}":
            key = self.take()
            if key.kind not in ("name", "string"):
                raise ExprError(f"expected a key, got {key.text!r}")
            self.take(":")
            name = key.text if key.kind == "name" else key.text[1:-1]
            entries[name] = self.expression(live)
            if self.peek() != "}":
                self.take(",")
        self.take("}")
        return entries


def evaluate(source: str, variables: Mapping[str, Any]) -> Any:
    """The value of the expression `source` with `variables`, as expr gives it."""
    reader = _Reader(source, variables)
    value = reader.expression(live=True)
    if reader.position != len(reader.tokens):
        raise ExprError(f"outside the subset at {reader.tokens[reader.position].text!r}")
    return value
