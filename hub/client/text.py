"""Durations as people write and read them: `600`, `10m`, `1h30m`, `PT10M` in; `1h2m5s` out."""

import math
import re
from datetime import timedelta
from typing import Annotated

from pydantic import BeforeValidator, TypeAdapter, ValidationError

__all__ = ["Duration", "format_duration", "parse_duration"]

_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3_600, "d": 86_400}
_COMPACT = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+")
_COMPACT_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_ISO_8601 = TypeAdapter(timedelta)


def parse_duration(value: object) -> object:
    """Seconds (`600`), the compact form `format_duration` writes (`10m`, `1h30m`, `500ms`), or
    an ISO 8601 duration (`PT10M`, left to pydantic). Other values go on to pydantic as given."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        if _SECONDS.fullmatch(text):
            return timedelta(seconds=float(text))
        if _COMPACT.fullmatch(text):
            return timedelta(
                seconds=sum(
                    float(count) * _UNIT_SECONDS[unit]
                    for count, unit in _COMPACT_PART.findall(text)
                )
            )
    except OverflowError:
        raise ValueError(f"{value!r} is longer than any duration can be") from None
    try:
        return _ISO_8601.validate_python(text)
    except ValidationError:
        raise ValueError(
            f"{value!r} is not a duration: give seconds (600), an ISO 8601 duration (PT10M) "
            "or 10m, 1h30m"
        ) from None


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


def format_duration(delta: timedelta) -> str:
    """`1h2m5s`, `10m`, `0s`: whole seconds, rounded up so a remainder never reads as 0s."""
    seconds = math.ceil(delta.total_seconds())
    if seconds <= 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
