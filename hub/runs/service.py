"""The fleet as /metrics exports it, with the background tasks' newest rounds, and the runs
asked for through the API (a harvest, a scheduling run), followed until they are done.

A snapshot reads what the API answers from, by the same definitions, so a gauge and the
endpoint agree; every replica reads the same store and exports the same fleet gauges.
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from hub.background import repository
from hub.client.schemas.rollouts import RolloutHealth
from hub.database import read_session
from hub.drift import service as drift_service
from hub.drift.schemas import DriftSummary
from hub.errors import TooManyRuns, UnknownRun
from hub.events import service as events_service
from hub.events.service import EventCounts
from hub.fleet import service as fleet_service
from hub.fleet.schemas import FleetCluster, FleetState
from hub.harvest import service as harvest_service
from hub.harvest.schemas import RepositoryStatus
from hub.models import JobRun
from hub.rollouts import service as rollouts_service
from hub.runs.schemas import RequestedJob, RequestedRun
from hub.statuses import service as statuses_service
from hub.statuses.service import StatusCounts
from hub.types import Sessions

# How long a run asked for through the API answers by its id, and how many of a job's are kept.
REQUESTED_RUNS_KEPT_HOURS = 24
REQUESTED_RUNS_KEPT = timedelta(hours=REQUESTED_RUNS_KEPT_HOURS)
MAX_REQUESTED_RUNS = 1000

# Every cluster on one page: the per-cluster series list them all.
_EVERY_CLUSTER = 2**31 - 1


@dataclass(frozen=True, slots=True)
class JobRuns:
    """One job's newest round of each outcome: (started_at, finished_at) by outcome."""

    job: str
    newest: dict[str, tuple[datetime, datetime]]


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    taken_at: datetime
    fleet: FleetState
    # Every cluster when per-cluster series are on, else none.
    clusters: list[FleetCluster]
    drift: DriftSummary
    repositories: list[RepositoryStatus]
    jobs: list[JobRuns]
    events: EventCounts
    statuses: StatusCounts
    # The current rollout of each workload and of the platform commits per environment.
    rollouts: list[RolloutHealth]


async def fleet_snapshot(
    sessionmaker: Sessions,
    *,
    now: datetime,
    stale_after: timedelta,
    per_cluster: bool,
) -> FleetSnapshot:
    """The fleet, its drift, the harvest, the jobs' runs and the current rollouts, read in
    one READ ONLY transaction of its own (opened here: /metrics reads the store only when its
    snapshot is due)."""
    async with read_session(sessionmaker) as session:
        fleet = await fleet_service.fleet_state(
            session,
            environment=None,
            cluster_type=None,
            limit=_EVERY_CLUSTER if per_cluster else 0,
            offset=0,
            now=now,
            stale_after=stale_after,
        )
        drift = await drift_service.drift_summary(session, now=now, stale_after=stale_after)
        repositories = await harvest_service.list_repositories(session, now=now)
        events = await events_service.event_counts(session)
        statuses = await statuses_service.status_counts(session)
        rollouts = await rollouts_service.current_health(session)
        jobs: dict[str, dict[str, tuple[datetime, datetime]]] = {}
        for row in await repository.latest_runs(session):
            jobs.setdefault(row["job"], {})[row["outcome"]] = (
                row["started_at"],
                row["finished_at"],
            )
    return FleetSnapshot(
        taken_at=now,
        fleet=fleet,
        clusters=fleet.clusters.items,
        drift=drift,
        repositories=[item for item in repositories if item.enabled],
        jobs=[JobRuns(job, newest) for job, newest in jobs.items()],
        events=events,
        statuses=statuses,
        rollouts=rollouts,
    )


def _requested(run: JobRun) -> RequestedRun:
    result = {run.job: run.result} if run.result is not None else {}
    return RequestedRun.model_validate(
        {
            "id": run.id,
            "job": run.job,
            "outcome": run.outcome,
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "error": run.error,
            **result,
        }
    )


async def start_run(session: AsyncSession, job: RequestedJob, *, now: datetime) -> RequestedRun:
    """Record a run asked for through the API as running; the caller starts it once this is
    committed (hub/background/runner.py `run_requested`).

    Each run answers by its id for REQUESTED_RUNS_KEPT, and then is deleted by the next
    request of its job; with MAX_REQUESTED_RUNS of the job kept, a request is refused
    (TooManyRuns, Retry-After: until the oldest expires) rather than the oldest forgotten
    while its caller may poll it still.
    """
    await repository.lock_requested_runs(session)
    await repository.delete_requested_runs(session, job, through=now - REQUESTED_RUNS_KEPT)
    kept, oldest = await repository.requested_runs(session, job)
    if kept >= MAX_REQUESTED_RUNS and oldest is not None:
        wait = math.ceil((oldest + REQUESTED_RUNS_KEPT - now).total_seconds())
        raise TooManyRuns(
            f"{kept} {job} runs were asked for within {REQUESTED_RUNS_KEPT_HOURS} hours, as "
            f"many as are kept; the oldest expires in {wait} s",
            headers={"Retry-After": str(max(wait, 1))},
        )
    return _requested(await repository.start_run(session, job=job, started_at=now))


async def requested_run(session: AsyncSession, run_id: int) -> RequestedRun:
    run = await repository.find_run(session, run_id)
    # Periodic rounds share the table.
    if run is None or not run.requested:
        raise UnknownRun(f"no harvest or scheduling run {run_id}")
    return _requested(run)
