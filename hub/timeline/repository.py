"""SQL of the timeline: a page of `timeline(...)` (migration 0052_timeline), the union of its
sources, newest first, after a cursor."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncSession


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
