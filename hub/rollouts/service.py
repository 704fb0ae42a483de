"""The rollouts job: each rollout's state kept in the store (`rollout`), for the dashboards,
the alert rules and every other reader of what a rollout is doing.

Data flow: the DORA job judges who each rollout expected, reached and failed into `dora_rollup`
-> the rollouts job (hub/rollouts/tasks.py) reads those new or not converged -> the pure policy
(hub/rollouts/policy.py) decides each one's state as of that refresh -> the changed ones are
written in one transaction. Most runs find nothing to judge: the DORA job refreshes every
`dora_interval`.

Why as of the DORA job's refresh and not the hub's clock: the facts say what moved a rollout
only up to the refresh. Judged against a later clock, a rollout a cluster reached just after the
refresh would count as stalled until the next one. So the kept state is at most `dora_interval`
and a minute old, and says as of when (`evaluated_at`).
"""

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog
from sqlalchemy import Row
from sqlalchemy.dialects.postgresql import Range
from sqlalchemy.ext.asyncio import AsyncSession

from hub.rollouts import repository
from hub.rollouts.policy import Facts, judge

__all__ = ["Kept", "keep_rollouts"]

log = structlog.get_logger("fleetmark.rollouts")


@dataclass(frozen=True, slots=True)
class Kept:
    # Rollouts judged, and of those written: new, or their state or facts changed.
    judged: int
    written: int
    seconds: float


def _kept(row: Row[Any], stall_after: timedelta) -> dict[str, Any]:
    """The `rollout` row of one of the DORA job's rollouts."""
    facts = row._mapping
    judged = judge(
        Facts(
            started_at=facts["started_at"],
            reached_at=facts["reached_times"],
            converged_at=facts["converged_at"],
            failed_at=facts["failed_at"],
        ),
        as_of=facts["evaluated_at"],
        stall_after=stall_after,
    )
    copied = {name: facts[name] for name in repository.COPIED}
    return copied | {
        "dora_rollup_id": facts["dora_rollup_id"],
        "state": judged.state.value,
        "state_since": judged.since,
        "last_progress_at": judged.last_progress_at,
        "stalled": [Range(stall.started_at, stall.ended_at) for stall in judged.stalls],
        "stall_after": stall_after,
    }


async def keep_rollouts(session: AsyncSession, *, stall_after: timedelta) -> Kept:
    """Judge the rollouts whose state may have changed and keep them; the caller commits."""
    started = time.perf_counter()
    rows = await repository.to_judge(session, stall_after)
    written = await repository.keep(session, [_kept(row, stall_after) for row in rows])
    return Kept(len(rows), written, time.perf_counter() - started)
