"""The fleet as /metrics exports it, and the record of the background jobs' rounds.

A snapshot reads what the API answers from (the fleet state, the drift counts, the
repositories' harvest status) with the same definitions, so a gauge and the endpoint agree:
a cluster is reporting when its agent reported within `stale_after_seconds`, stale when it
reported before that, never_reported when it never did. Every replica reads the same store,
so every replica exports the same fleet gauges.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.database import read_session, write_session
from hub.drift import service as drift_service
from hub.drift.schemas import DriftSummary
from hub.harvest import service as harvest_service
from hub.harvest.schemas import RepositoryStatus
from hub.monitoring import repository
from hub.query import service as query_service
from hub.query.schemas import FleetCluster, FleetState

Outcome = Literal["succeeded", "failed", "skipped"]

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


async def fleet_snapshot(
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    now: datetime,
    stale_after: timedelta,
    per_cluster: bool,
) -> FleetSnapshot:
    """The fleet, its drift, the harvest and the jobs' runs, read in one READ ONLY transaction
    of its own (opened here: /metrics reads the store only when its snapshot is due)."""
    async with read_session(sessionmaker) as session:
        fleet = await query_service.fleet_state(
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
    )


async def record_job_run(
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    job: str,
    started_at: datetime,
    finished_at: datetime,
    outcome: Outcome,
    error: str | None = None,
) -> None:
    async with write_session(sessionmaker) as session:
        await repository.record_run(
            session,
            job=job,
            started_at=started_at,
            finished_at=finished_at,
            outcome=outcome,
            error=error,
        )
