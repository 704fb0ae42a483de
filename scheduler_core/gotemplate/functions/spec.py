"""What a template function is: its Go parameter types, its implementation, its context.

Each function declares its Go parameter types, because Go checks arguments against them:
`upper 1` is an error ("expected string; found 1") while `toString 1` is fine. The executor
converts and checks arguments by these declarations before calling `impl`; an exception
raised by `impl` becomes the template error "error calling NAME: message", as a Go function
returning an error (or panicking) does.

What a call costs (`scheduler_core.gotemplate.meter`): the executor charges every call as a
step, plus the characters of each string argument it reads and of the string it returns. A
function that does more (touches the elements of a list or map, walks a value, makes text
beyond its arguments and result) takes the CallContext (`needs_context`) and charges that
work to `context.meter`, before doing it wherever its size is known. The functions that take
no context are those whose work is constant (`default`, `first`, `hasKey`, arithmetic, ...)
or lies in their string arguments and result.
"""

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from scheduler_core.gotemplate.limits import Limits
from scheduler_core.gotemplate.meter import Meter

__all__ = ["CallContext", "Function", "FunctionError", "Param"]


class Param(enum.Enum):
    """A parameter's Go type, named as Go's messages name it."""

    ANY = "interface {}"
    STRING = "string"
    INT = "int"
    FLOAT = "float64"
    BOOL = "bool"
    MAP = "map[string]interface {}"
    LIST = "[]interface {}"


class FunctionError(Exception):
    """The error a function returns; its message is shown as is."""


class CallContext(Protocol):
    """What functions that need the render get: the clock, limits, the meter to charge their
    work to, other templates."""

    @property
    def now(self) -> datetime | None: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def meter(self) -> Meter: ...

    def include(self, name: str, data: object) -> str: ...

    def tpl(self, text: str, data: object) -> str: ...

    def call(self, function: object, args: list[object]) -> object: ...


@dataclass(frozen=True, slots=True)
class Function:
    """A template function: `impl` takes the declared parameters (after the CallContext when
    `needs_context`) and returns one value. A `lazy` function (Go's and, or) instead takes one
    iterable that evaluates the arguments as it is consumed, so it can stop early."""

    name: str
    impl: Callable[..., object]
    params: tuple[Param, ...] = ()
    variadic: Param | None = None
    needs_context: bool = False
    lazy: bool = False
