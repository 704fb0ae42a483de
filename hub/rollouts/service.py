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

from hub.events.service import Event, publish
from hub.rollouts import repository
from hub.rollouts.policy import Facts, Judged, RolloutState, judge
from hub.rollouts.schemas import RolloutEventData

__all__ = ["Kept", "keep_rollouts"]

log = structlog.get_logger("fleetmark.rollouts")


@dataclass(frozen=True, slots=True)
class Kept:
    # Rollouts judged, and of those written: new, or their state or facts changed; the events
    # their changes of state published.
    judged: int
    written: int
    events: int
    seconds: float


def _judged(row: Row[Any], stall_after: timedelta) -> Judged:
    facts = row._mapping
    return judge(
        Facts(
            started_at=facts["started_at"],
            reached_at=facts["reached_times"],
            converged_at=facts["converged_at"],
            failed_at=facts["failed_at"],
        ),
        as_of=facts["evaluated_at"],
        stall_after=stall_after,
    )


def _kept(row: Row[Any], judged: Judged, stall_after: timedelta) -> dict[str, Any]:
    """The `rollout` row of one of the DORA job's rollouts."""
    facts = row._mapping
    copied = {name: facts[name] for name in repository.COPIED}
    return copied | {
        "dora_rollup_id": facts["dora_rollup_id"],
        "state": judged.state.value,
        "state_since": judged.since,
        "last_progress_at": judged.last_progress_at,
        "stalled": [Range(stall.started_at, stall.ended_at) for stall in judged.stalls],
        "stall_after": stall_after,
    }


def _announced(previous: str | None, judged: Judged) -> list[RolloutState]:
    """The states a change from `previous` (None: seen first) announces: started once (as
    in_progress), then converged, failed or stalled as it is entered, stalled only in the
    rollout's first stall: at most four events a rollout."""
    states = [RolloutState.IN_PROGRESS] if previous is None else []
    state = judged.state
    first_stall = state is not RolloutState.STALLED or len(judged.stalls) == 1
    if state.value != previous and state is not RolloutState.IN_PROGRESS and first_stall:
        states.append(state)
    return states


def _events(row: Row[Any], judged: Judged) -> list[Event]:
    facts = row._mapping
    previous = facts["kept_state"]
    workload, environment = facts["workload"], facts["environment"]
    target = facts["revision"] if workload is None else f"{workload}/{facts['revision']}"
    events = []
    for state in _announced(previous, judged):
        started = state is RolloutState.IN_PROGRESS
        data = RolloutEventData(
            environment=environment,
            workload=workload,
            revision=facts["revision"],
            commit_sha=facts["commit_sha"],
            state=judged.state,
            previous_state=previous,
            expected_clusters=facts["expected_clusters"],
            reached_clusters=facts["reached_clusters"],
            failed_clusters=facts["failed_clusters"],
            started_at=facts["started_at"],
            since=judged.since,
            failed_cluster=facts["failed_cluster"],
            failure_reason=facts["failure_reason"],
        )
        events.append(
            Event(
                type=f"fleetmark.rollout.{'started' if started else state.value}",
                subject=f"rollouts/{environment}/{target}",
                time=facts["started_at"] if started else judged.since,
                data=data.model_dump(mode="json"),
                environment=environment,
                workload=workload,
            )
        )
    return events


async def keep_rollouts(session: AsyncSession, *, stall_after: timedelta, source: str) -> Kept:
    """Judge the rollouts whose state may have changed and keep them, publishing the events
    of their changes of state (as from `source`, the hub's URL); the caller commits."""
    started = time.perf_counter()
    rows = await repository.to_judge(session, stall_after)
    judged = [(row, _judged(row, stall_after)) for row in rows]
    written = await repository.keep(session, [_kept(row, at, stall_after) for row, at in judged])
    events = [event for row, at in judged for event in _events(row, at)]
    await publish(session, events, source=source)
    return Kept(len(rows), written, len(events), time.perf_counter() - started)
