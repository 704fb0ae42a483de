"""SQL of the timeline: a page of `timeline(...)` (migration 0052_timeline), the union of its
sources, newest first, after a cursor; and the readiness turns its health rows read, kept by
the `readiness` job (migration 0053_readiness_turn)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, Row, text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.database import plan_for_values

READINESS_LOCK = 0x7265616479


@dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    """What the rows must be about; None: anything. `selector` is the label selector's
    requirements as JSON (scheduler_core.kube.LabelSelectorRequirement)."""

    environment: str | None = None
    workload: str | None = None
    cluster_type: str | None = None
    cluster: str | None = None
    selector: str | None = None


@dataclass(frozen=True, slots=True)
class After:
    """Where a page ends: its last row's time and key. The next page holds the rows before it
    in (time, key) order, newest first."""

    at: datetime
    key: str


# Rows after the cursor are older, or as old with a smaller key: `(at, key) <` it. The key is
# compared byte by byte (COLLATE "C"), as it is ordered.
_PAGE = text("""
SELECT t.at, t.kind, t.key, t.environment, t.workload, t.cluster_types, t.clusters,
       t.summary, t.detail
FROM timeline(:since, :until, CAST(:environment AS text), CAST(:workload AS text),
              CAST(:cluster_type AS text), CAST(:cluster AS text), CAST(:selector AS jsonb)) t
WHERE CAST(:after_at AS timestamptz) IS NULL
   OR (t.at, t.key COLLATE "C") < (CAST(:after_at AS timestamptz), CAST(:after_key AS text))
ORDER BY t.at DESC, t.key COLLATE "C" DESC
LIMIT :limit
""")


async def page(
    session: AsyncSession,
    *,
    since: datetime,
    until: datetime,
    filters: Filters,
    after: After | None,
    limit: int,
) -> Sequence[Row[Any]]:
    """Up to `limit` rows of the timeline in [since, until) that the filters keep, newest
    first, after `after` (None: from the newest)."""
    # Planned for the range and filters asked: a generic plan took 8 s instead of 40 ms for the
    # last hour at 10,000 clusters on TimescaleDB.
    await plan_for_values(session)
    result = await session.execute(
        _PAGE,
        {
            "since": since,
            "until": until,
            "environment": filters.environment,
            "workload": filters.workload,
            "cluster_type": filters.cluster_type,
            "cluster": filters.cluster,
            "selector": filters.selector,
            "after_at": None if after is None else after.at,
            "after_key": None if after is None else after.key,
            "limit": limit,
        },
    )
    return result.all()


# Where the kept turns end (NULL: none kept yet), or the first bucket of the history.
_KEPT_UNTIL = text("""
SELECT COALESCE(
    (SELECT materialized_until FROM rollup_watermark WHERE name = 'readiness_turn'),
    (SELECT date_bin('5 minutes', min(observed_at), TIMESTAMPTZ '2000-01-01')
     FROM status_transition))
""")


async def readiness_kept_until(session: AsyncSession) -> datetime | None:
    """The end of the buckets whose readiness turns are kept; with none kept yet, the start of
    the history's first bucket (None: there is no history)."""
    kept_until: datetime | None = await session.scalar(_KEPT_UNTIL)
    return kept_until


async def keep_readiness_turns(session: AsyncSession, since: datetime, until: datetime) -> int:
    """Judge the buckets in [since, until) again into readiness_turn, replacing what it kept of
    them (a turn a late report undid goes), and move its watermark to `until`: the turns kept."""
    bounds = {"since": since, "until": until}
    await session.execute(
        text("DELETE FROM readiness_turn WHERE bucket >= :since AND bucket < :until"), bounds
    )
    kept = await session.execute(
        text("INSERT INTO readiness_turn SELECT * FROM readiness_turns(:since, :until)"), bounds
    )
    await session.execute(
        text(
            "UPDATE rollup_watermark SET materialized_until = :until WHERE name = 'readiness_turn'"
        ),
        bounds,
    )
    return cast(CursorResult[Any], kept).rowcount
