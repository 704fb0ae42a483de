"""The timeline: the rows of every source in a range, newest first, a page at a time.

A page ends with a cursor, its last row's time and key: the next page is the rows before
them, so rows written meanwhile (newer, or of a later bucket) neither repeat nor hide a row
of the pages still to come."""

import base64
import binascii
import json
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.timeline import TimelineQuery
from hub.errors import InvalidInput, Problem
from hub.placement import service as placement
from hub.timeline import repository
from hub.timeline.repository import After, Filters
from hub.timeline.schemas import TimelinePage, TimelineRow
from scheduler_core.kube import parse_selector

__all__ = ["DEFAULT_RANGE", "timeline"]

# The range asked when `since` is not.
DEFAULT_RANGE = timedelta(hours=24)
# The smallest step of a timestamptz: a cursor's rows are before its time, or at it.
_TICK = timedelta(microseconds=1)


def _cursor(after: After) -> str:
    text = json.dumps([after.at.isoformat(), after.key], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _after(cursor: str) -> After:
    """The cursor an answer gave as `next`; InvalidInput for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        at, key = json.loads(base64.urlsafe_b64decode(padded.encode()))
        after = After(datetime.fromisoformat(at), key)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        after = None
    if (
        after is None
        or after.at.tzinfo is None
        or not isinstance(after.key, str)
        or "\x00" in after.key
    ):
        problem = Problem(
            location="query",
            field="cursor",
            rule="invalid_cursor",
            message="not a cursor the hub gave: pass a page's `next` as it is",
        )
        raise InvalidInput(f"cursor: {problem.message}", [problem])
    return after


def _selector(text: str | None) -> str | None:
    """The selector's requirements as the store reads them; None: no selector."""
    if text is None:
        return None
    try:
        requirements = parse_selector(text).match_expressions
    except ValueError as exc:
        raise InvalidInput(f"selector: {exc}") from None
    return json.dumps([requirement.model_dump(mode="json") for requirement in requirements])


async def timeline(session: AsyncSession, query: TimelineQuery, *, now: datetime) -> TimelinePage:
    """A page of the timeline: the rows in [since, until) the filters keep, newest first,
    after the cursor. Unknown names are errors, naming what exists."""
    until = query.until or now
    since = query.since or until - DEFAULT_RANGE
    if since >= until:
        raise InvalidInput(
            f"since ({since.isoformat()}) must be before until ({until.isoformat()})"
        )
    after = None if query.cursor is None else _after(query.cursor)
    filters = Filters(
        environment=query.environment,
        workload=query.workload,
        cluster_type=query.cluster_type,
        cluster=query.cluster,
        selector=_selector(query.selector),
    )
    await placement.check_names(
        session,
        environment=query.environment,
        cluster_type=query.cluster_type,
        cluster=query.cluster,
        workload=query.workload,
    )
    rows = await repository.page(
        session,
        since=since,
        # The rows after the cursor are at its time or before: the sources read no further.
        until=until if after is None else min(until, after.at + _TICK),
        filters=filters,
        after=after,
        limit=query.limit + 1,
    )
    shown = rows[: query.limit]
    last = shown[-1] if len(rows) > query.limit else None
    return TimelinePage(
        since=since,
        until=until,
        items=[TimelineRow.model_validate(row, from_attributes=True) for row in shown],
        next=None if last is None else _cursor(After(last.at, last.key)),
    )
