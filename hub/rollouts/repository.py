"""SQL of the rollouts job: the DORA job's rollouts whose state may have changed, and the kept
rollouts (`rollout`, migration 0038_rollouts) written where they did."""

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Row, RowMapping, select, text, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import Rollout

# Held while the rollouts are judged and written ("rollouts" in ASCII): one replica at a time.
ROLLOUTS_LOCK = 0x726F6C6C6F757473

# What `rollout` keeps of the DORA job's row, by its name in `dora_rollup`.
COPIED = {
    "workload": "NULLIF(d.workload, '')",
    "environment": "d.environment",
    "environment_position": "d.environment_position",
    "repository": "d.repository",
    "branch": "d.branch",
    "revision": "d.revision",
    "commit_sha": "d.commit_sha",
    "committed_at": "d.committed_at",
    "expected_clusters": "d.expected_clusters",
    "reached_clusters": "d.reached_clusters",
    "failed_clusters": "d.failed_clusters",
    "started_at": "d.started_at",
    "converged_at": "d.completed_at",
    "failed_at": "d.failed_at",
    "failed_cluster": "d.failed_cluster",
    "failure_reason": "d.failure_reason",
    "failure_message": "d.failure_message",
    "evaluated_at": "s.refreshed_at",
}
_COPIED = ", ".join(f"{column} AS {name}" for name, column in COPIED.items())
_FACTS = [name for name in COPIED if name != "evaluated_at"]
_KEPT = ", ".join(f"r.{name}" for name in _FACTS)
_FROM_DORA = ", ".join(COPIED[name] for name in _FACTS)

# A state follows from the DORA job's facts, its refresh and the stall-after: a rollout is
# judged again once the DORA job refreshed it since, or the stall-after changed. A converged
# one is final: judged again after a refresh only when its facts changed (reports that
# arrived late).
_TO_JUDGE = text(f"""
SELECT d.id AS dora_rollup_id, {_COPIED}, d.reached_times, r.state AS kept_state
FROM dora_rollup d
JOIN dora_refresh s ON s.workload = d.workload
LEFT JOIN rollout r ON r.dora_rollup_id = d.id
WHERE r.dora_rollup_id IS NULL
   OR r.stall_after <> CAST(:stall_after AS interval)
   OR r.evaluated_at <> s.refreshed_at
      AND (r.state <> 'converged' OR ROW({_KEPT}) IS DISTINCT FROM ROW({_FROM_DORA}))
""")  # noqa: S608 - constants only


async def to_judge(session: AsyncSession, stall_after: timedelta) -> Sequence[Row[Any]]:
    """The DORA job's rollouts the rollouts job has not judged, or whose state may have
    changed since it did: COPIED's columns, `dora_rollup_id`, `reached_times` and the state
    kept (`kept_state`, None: not judged yet)."""
    result = await session.execute(_TO_JUDGE, {"stall_after": stall_after})
    return result.all()


async def keep(session: AsyncSession, rollouts: Sequence[dict[str, Any]]) -> int:
    """Write the judged rollouts (Rollout's columns) where they changed; how many were."""
    if not rollouts:
        return 0
    statement = insert(Rollout)
    changed = [column for column in Rollout.__table__.c if not column.primary_key]
    upsert = statement.on_conflict_do_update(
        index_elements=[Rollout.dora_rollup_id],
        set_={column.name: statement.excluded[column.name] for column in changed},
        where=tuple_(*changed).is_distinct_from(
            tuple_(*(statement.excluded[column.name] for column in changed))
        ),
    )
    written = await session.execute(upsert.returning(Rollout.dora_rollup_id), list(rollouts))
    return len(written.all())


async def unconverged(session: AsyncSession, ids: Sequence[int]) -> set[int]:
    """Of these rollouts (the DORA job's ids), those kept and not converged."""
    if not ids:
        return set()
    rows = await session.scalars(
        select(Rollout.dora_rollup_id).where(
            Rollout.dora_rollup_id.in_(ids), Rollout.state != "converged"
        )
    )
    return set(rows)


# The current rollout of each workload (NULL: the platform commits) per environment, by the
# view of migration 0050_rollout_health, in promotion order.
_HEALTH = text("""
SELECT * FROM rollout_health
WHERE (CAST(:environments AS text[]) IS NULL OR environment = ANY(CAST(:environments AS text[])))
  AND (CAST(:workload AS text) IS NULL OR workload = CAST(:workload AS text))
ORDER BY environment_position NULLS LAST, environment, workload NULLS FIRST
""")


async def health(
    session: AsyncSession, *, environments: Sequence[str] | None, workload: str | None
) -> Sequence[RowMapping]:
    """The rows of `rollout_health` of these environments (None: all) and this workload (None:
    every one and the platform commits)."""
    found = await session.execute(
        _HEALTH,
        {
            "environments": None if environments is None else list(environments),
            "workload": workload,
        },
    )
    return found.mappings().all()
