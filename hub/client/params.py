"""Types of the values requests carry, shared by the routers' parameters, the wire schemas and
the query models the client sends: text PostgreSQL can store and integers its columns hold. A
value outside them is refused with a 422 naming the parameter (or body field) and the rule,
before any SQL runs. Pydantic alone, for the light install."""

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, Field, StringConstraints
from pydantic_core import PydanticCustomError

INTEGER_MAX = 2**31 - 1
# The longest text parameter: the longest name Kubernetes allows (a DNS subdomain); shas,
# versions and config keys are shorter. With at most MAX_REPEATED values of a repeatable one,
# every request line stays within what the HTTP server reads (64 KiB).
MAX_TEXT_CHARS = 253
MAX_REPEATED = 20
MAX_PAGE = 1000
MAX_OFFSET = 1_000_000_000

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def _storable(text: str) -> str:
    """PostgreSQL text and jsonb hold neither NUL nor an unpaired surrogate (which JSON can
    carry as an escape, and which has no UTF-8 form)."""
    found = _UNSTORABLE.search(text)
    if found is not None:
        what = "a NUL character" if found.group() == "\x00" else "an unpaired surrogate"
        raise PydanticCustomError("unstorable_character", f"must not contain {what}")
    return text


def _storable_path(path: Path) -> Path:
    _storable(str(path))
    return path


def _not_a_number(value: object) -> object:
    """pydantic reads a number as seconds since 1970; the document promises ISO 8601 only."""
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        raise PydanticCustomError(
            "datetime_from_number",
            "expected a date and time in ISO 8601 with a time zone (2026-01-15T10:00:00Z), "
            "not a number",
        )
    return value


_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST = datetime(9999, 1, 1, tzinfo=UTC)


def within_reach(moment: datetime) -> datetime:
    if not _EARLIEST <= moment < _LATEST:
        raise PydanticCustomError(
            "datetime_out_of_range", "must be from 1970-01-01T00:00:00Z to before 9999-01-01"
        )
    return moment


# A string field of a request body that reaches the store; its model bounds the length.
StorableText = Annotated[str, AfterValidator(_storable)]
StorablePath = Annotated[Path, AfterValidator(_storable_path)]
# A text parameter (path or query): a name, a sha, a version, a config key.
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS), AfterValidator(_storable)]
# A repeatable text parameter (?environment=dev&environment=stage).
TextList = Annotated[list[Text], Field(max_length=MAX_REPEATED)]
# A row id: the hub's tables number their rows with INTEGER keys.
Id = Annotated[int, Field(ge=1, le=INTEGER_MAX)]
# A count a caller sets (INTEGER).
Count = Annotated[int, Field(ge=1, le=INTEGER_MAX)]
# A moment within the years the hub's date arithmetic (a range of days or weeks around it)
# can reach.
WithinReach = AfterValidator(within_reach)
# A moment a query is asked about.
Timestamp = Annotated[AwareDatetime, BeforeValidator(_not_a_number), WithinReach]
# Paging: rows skipped and rows returned. SQL's OFFSET reads every row it skips, so no page
# worth asking for lies a billion rows on; the bound keeps offset + limit, which the queries
# compute, within INTEGER.
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]
Limit = Annotated[int, Field(ge=1, le=MAX_PAGE)]
