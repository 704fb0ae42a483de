"""The functions Kalypso's templater adds to sprig: toYaml, stringify, hash, unquote.

What each does is in docs/scheduling.md ("Templates"); `toYaml`, `stringify` and `hash`
charge the render's meter for every node they encode.
"""

import hashlib
from collections.abc import Mapping

from scheduler_core.gotemplate.encoding import to_json, to_yaml
from scheduler_core.gotemplate.functions.spec import CallContext, Function, Param
from scheduler_core.gotemplate.functions.sprig import strval
from scheduler_core.gotemplate.meter import STEP_UNITS, Meter
from scheduler_core.gotemplate.syntax import go_unquote
from scheduler_core.gotemplate.values import LocalMap

__all__ = ["FUNCTIONS"]


def _to_yaml(context: CallContext, value: object) -> str:
    try:
        return to_yaml(value, context.meter).removesuffix("\n")
    except ValueError:
        return ""


def _as_string(value: object, meter: Meter) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple | Mapping):
        meter.charge(STEP_UNITS)  # an encoding of its own
        return to_json(value, meter=meter)
    return strval(value, meter)


def _stringify(context: CallContext, value: object) -> object:
    meter = context.meter
    if isinstance(value, Mapping):
        meter.elements(len(value))
        return LocalMap((key, _as_string(item, meter)) for key, item in value.items())
    return _as_string(value, meter)


def _hash(context: CallContext, value: object) -> str:
    text = _as_string(value, context.meter)
    if text is not value:  # made here: hashing reads it (an argument is charged already)
        context.meter.chars(len(text))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _unquote(text: str) -> str:
    try:
        return go_unquote(text)
    except ValueError:
        return text


FUNCTIONS = [
    Function("toYaml", _to_yaml, (Param.ANY,), needs_context=True),
    Function("stringify", _stringify, (Param.ANY,), needs_context=True),
    Function("hash", _hash, (Param.ANY,), needs_context=True),
    Function("unquote", _unquote, (Param.STRING,)),
]
