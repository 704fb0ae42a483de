"""The functions a template can call: Go's builtins, sprig's and Kalypso's, and the caller's."""

import dataclasses
import inspect
from collections.abc import Callable, Mapping

from scheduler_core.gotemplate.functions import builtins, kalypso, sprig
from scheduler_core.gotemplate.functions.spec import CallContext, Function, FunctionError, Param

__all__ = [
    "CallContext",
    "Function",
    "FunctionError",
    "Param",
    "caller_functions",
    "default_functions",
]


def default_functions() -> dict[str, Function]:
    """Go's builtins, then sprig's and Kalypso's functions (later ones win on a name clash)."""
    functions: dict[str, Function] = {}
    for group in (builtins.FUNCTIONS, sprig.FUNCTIONS, kalypso.FUNCTIONS):
        functions.update((function.name, function) for function in group)
    return functions


def _is_identifier(name: str) -> bool:
    return (
        bool(name)
        and (name[0] == "_" or name[0].isalpha())
        and all(char == "_" or char.isalpha() or char.isdecimal() for char in name)
    )


def caller_functions(
    functions: Mapping[str, Callable[..., object] | Function],
) -> dict[str, Function]:
    """Functions the caller registers: every parameter is `interface {}`; the arity comes from
    the signature (`*args` makes the function variadic). A `Function` is taken as it is
    declared (under the name it is registered by): so a caller's function can take the
    CallContext, to charge its work to the render's meter. Raises ValueError for a name that
    is not an identifier or a value that is not callable."""
    wrapped: dict[str, Function] = {}
    for name, impl in functions.items():
        if not _is_identifier(name):
            raise ValueError(f"function name {name!r} is not a valid identifier")
        if isinstance(impl, Function):
            if impl.lazy:
                raise ValueError(f"function {name!r} cannot be lazy")
            wrapped[name] = dataclasses.replace(impl, name=name)
            continue
        if not callable(impl):
            raise ValueError(f"value for function {name!r} is not callable")
        parameters = inspect.signature(impl).parameters.values()
        positional = [
            parameter
            for parameter in parameters
            if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        ]
        variadic = any(parameter.kind is parameter.VAR_POSITIONAL for parameter in parameters)
        wrapped[name] = Function(
            name,
            impl,
            params=(Param.ANY,) * len(positional),
            variadic=Param.ANY if variadic else None,
        )
    return wrapped
