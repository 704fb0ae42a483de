"""The rollouts job: each rollout's state kept in the store (`rollout`), judged by the pure policy
from what the DORA job found, written in one transaction when it changed.

Judged as of the DORA job's refresh, not the hub's clock: the facts go only that far, and a
later clock would count a rollout reached just after the refresh as stalled until the next.
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
