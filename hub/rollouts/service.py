"""The rollouts job: each rollout's state kept in the store (`rollout`), judged by the pure policy
from what the DORA job found, written in one transaction when it changed.

Judged as of the DORA job's refresh, not the hub's clock: the facts go only that far, and a
later clock would count a rollout reached just after the refresh as stalled until the next.
"""

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog
from sqlalchemy import Row, RowMapping
from sqlalchemy.dialects.postgresql import Range
from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.gate import GateQuery
from hub.client.schemas.rollouts import (
    RolloutHealth,
    RolloutHealthList,
    RolloutHealthQuery,
    TimeToConverge,
)
from hub.events.service import Event, Held, held, hold, publish, published_kinds, release
from hub.gate import service as gate_service
from hub.placement import repository as placement_repository
from hub.placement import service as placement_service
from hub.rollouts import repository
from hub.rollouts.policy import Facts, Judged, RolloutState, judge
from hub.rollouts.schemas import ROLLOUT_EVENTS, RolloutEventData

__all__ = ["Kept", "current_health", "keep_rollouts", "rollout_health"]

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


# The kind of the states (hub.events) the rollouts job holds: a rollout whose stall was
# announced, by the DORA job's id of it, until it converges or is no longer kept.
STALL_ANNOUNCED = "rollout_stalled"


def _announced(previous: str | None, judged: Judged, stall_announced: bool) -> list[RolloutState]:
    """The states a change from `previous` (None: seen first) announces: started once (as
    in_progress), then converged, failed or stalled as it is entered, stalled only if no stall
    of the rollout was announced before: at most four events a rollout."""
    states = [RolloutState.IN_PROGRESS] if previous is None else []
    state = judged.state
    announced = state is RolloutState.STALLED and stall_announced
    if state.value != previous and state is not RolloutState.IN_PROGRESS and not announced:
        states.append(state)
    return states


def _evidence(facts: RowMapping, source: str) -> str:
    """The gate page for the rollout's target: where each of its clusters stands."""
    if facts["workload"] is None:
        query = GateQuery(environment=facts["environment"], commit=facts["commit_sha"])
    else:
        query = GateQuery(
            environment=facts["environment"],
            workload=facts["workload"],
            version=facts["revision"],
        )
    return gate_service.evidence_url(source, query)


def _events(
    row: Row[Any],
    judged: Judged,
    states: Sequence[RolloutState],
    cluster_types: Sequence[str],
    source: str,
) -> list[Event]:
    facts = row._mapping
    previous = facts["kept_state"]
    workload, environment = facts["workload"], facts["environment"]
    target = facts["revision"] if workload is None else f"{workload}/{facts['revision']}"
    events = []
    for state in states:
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
            evidence_url=_evidence(facts, source),
        )
        events.append(
            Event(
                type=f"fleetmark.rollout.{'started' if started else state.value}",
                subject=f"rollouts/{environment}/{target}",
                time=facts["started_at"] if started else judged.since,
                data=data.model_dump(mode="json"),
                environment=environment,
                workload=workload,
                cluster_types=cluster_types,
            )
        )
    return events


async def keep_rollouts(session: AsyncSession, *, stall_after: timedelta, source: str) -> Kept:
    """Judge the rollouts whose state may have changed and keep them, publishing the events
    of their changes of state (as from `source`, the hub's URL); the caller commits. A rollout
    whose stall is announced is held (hub.events) until it converges or is no longer kept, so
    that it announces one stall whatever the judgements between."""
    started = time.perf_counter()
    rows = await repository.to_judge(session, stall_after)
    judged = [(row, _judged(row, stall_after)) for row in rows]
    written = await repository.keep(session, [_kept(row, at, stall_after) for row, at in judged])
    stalls = await held(session, STALL_ANNOUNCED)
    cluster_types: dict[str, list[str]] = {}
    events, stalled = [], {}
    for row, at in judged:
        key = str(row.dora_rollup_id)
        states = _announced(row.kept_state, at, key in stalls)
        if not states:
            continue
        if RolloutState.STALLED in states:
            stalled[key] = Held(at.since, announced=True)
        environment = row.environment
        if environment not in cluster_types:
            cluster_types[environment] = await placement_repository.cluster_type_names(
                session, environment
            )
        events += _events(row, at, states, cluster_types[environment], source)
    await hold(session, STALL_ANNOUNCED, stalled)
    open_ids = await repository.unconverged(session, [int(key) for key in stalls])
    await release(session, STALL_ANNOUNCED, [key for key in stalls if int(key) not in open_ids])
    # A rollout the DORA job found again (a row made anew, as after the rollup was emptied
    # by hand) is not announced again: each kind of event goes out once a rollout, as the
    # outbox keeps them (event_retention).
    said = await published_kinds(session, [event.subject for event in events], ROLLOUT_EVENTS)
    events = [event for event in events if (event.type, event.subject) not in said]
    await publish(session, events, source=source)
    return Kept(len(rows), written, len(events), time.perf_counter() - started)


# --- health -----------------------------------------------------------------------------------


def _health(row: RowMapping) -> RolloutHealth:
    return RolloutHealth(
        environment=row["environment"],
        position=row["environment_position"],
        workload=row["workload"],
        revision=row["revision"],
        commit=row["commit_sha"],
        committed_at=row["committed_at"],
        started_at=row["started_at"],
        state=row["state"],
        expected_clusters=row["expected_clusters"],
        converged_clusters=row["converged_clusters"],
        converged_ratio=row["converged_ratio"],
        failed_clusters=row["failed_clusters"],
        failed_cluster=row["failed_cluster"],
        failure_reason=row["failure_reason"],
        time_to_converge=TimeToConverge(
            p50_seconds=row["time_to_converge_p50_seconds"],
            p95_seconds=row["time_to_converge_p95_seconds"],
            max_seconds=row["time_to_converge_max_seconds"],
            max_open=row["max_open"],
        ),
        converged_at=row["converged_at"],
        evaluated_at=row["evaluated_at"],
    )


async def current_health(session: AsyncSession) -> list[RolloutHealth]:
    """The current rollout of each workload and of the platform commits per environment."""
    rows = await repository.health(session, environments=None, workload=None)
    return [_health(row) for row in rows]


async def rollout_health(session: AsyncSession, query: RolloutHealthQuery) -> RolloutHealthList:
    """The current rollouts of the environments and the workload asked about (each name
    checked: an unknown one is an error, not an empty list)."""
    if query.environments:
        await placement_service.environments(session, query.environments)
    if query.workload is not None:
        await placement_service.check_names(session, workload=query.workload)
    rows = await repository.health(
        session, environments=query.environments or None, workload=query.workload
    )
    return RolloutHealthList(items=[_health(row) for row in rows])
