"""What a template function is: its Go parameter types, its implementation, its context.

The executor checks and converts arguments by the declared Go types before calling `impl`, as
Go does, and turns an exception from `impl` into "error calling NAME: message". A function
whose work is not constant takes the CallContext (`needs_context`) and charges its meter.
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
