"""SQL of the job runs: one row written per round, the oldest beyond the kept ones deleted, and
the newest of each job and outcome read; a run asked for through the API written when it
starts, completed when it ends, read by its id, and deleted once expired."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping, delete, func, insert, select, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import JobRun

# Rounds kept per job and outcome: the last success stays however many skipped or failed rounds
# follow it, and the table stays small (jobs x outcomes x KEPT_RUNS rows).
KEPT_RUNS = 20
# Held while a run is asked for, until the request's transaction ends: requests counted one
# at a time keep the number of requested runs within its bound.
REQUESTED_RUNS_LOCK = 0x72756E73


async def record_run(
    session: AsyncSession,
    *,
    job: str,
    started_at: datetime,
    finished_at: datetime,
    outcome: str,
    error: str | None,
) -> None:
    await session.execute(
        insert(JobRun).values(
            job=job, started_at=started_at, finished_at=finished_at, outcome=outcome, error=error
        )
    )
    await _keep_newest(session, job, outcome)


async def _keep_newest(session: AsyncSession, job: str, outcome: str) -> None:
    rounds = (JobRun.job == job, JobRun.outcome == outcome, JobRun.requested.is_(False))
    kept = (
        select(JobRun.id)
        .where(*rounds)
        .order_by(JobRun.finished_at.desc(), JobRun.id.desc())
        .limit(KEPT_RUNS)
    )
    await session.execute(delete(JobRun).where(*rounds, JobRun.id.not_in(kept)))


async def latest_runs(session: AsyncSession) -> Sequence[RowMapping]:
    """The newest run of each job and outcome."""
    statement = (
        select(JobRun.job, JobRun.outcome, JobRun.started_at, JobRun.finished_at)
        .where(JobRun.outcome != "running")
        .ext(distinct_on(JobRun.job, JobRun.outcome))
        .order_by(JobRun.job, JobRun.outcome, JobRun.finished_at.desc(), JobRun.id.desc())
    )
    return (await session.execute(statement)).mappings().all()


async def lock_requested_runs(session: AsyncSession) -> None:
    await session.execute(select(func.pg_advisory_xact_lock(REQUESTED_RUNS_LOCK)))


async def delete_requested_runs(session: AsyncSession, job: str, *, through: datetime) -> None:
    """Delete the runs of `job` asked for through the API that started at `through` or before."""
    await session.execute(
        delete(JobRun).where(
            JobRun.job == job, JobRun.requested.is_(True), JobRun.started_at <= through
        )
    )


async def requested_runs(session: AsyncSession, job: str) -> tuple[int, datetime | None]:
    """How many runs of `job` asked for through the API are kept, and when the oldest started."""
    count, oldest = (
        await session.execute(
            select(func.count(), func.min(JobRun.started_at)).where(
                JobRun.job == job, JobRun.requested.is_(True)
            )
        )
    ).one()
    return int(count), oldest


async def start_run(session: AsyncSession, *, job: str, started_at: datetime) -> JobRun:
    """A run asked for through the API, recorded as running."""
    statement = (
        insert(JobRun)
        .values(job=job, started_at=started_at, outcome="running", requested=True)
        .returning(JobRun)
    )
    return (await session.scalars(statement)).one()


async def finish_run(
    session: AsyncSession,
    run_id: int,
    *,
    finished_at: datetime,
    outcome: str,
    error: str | None,
    result: dict[str, Any] | None,
) -> None:
    """Complete a run asked for through the API (nothing, if it ran so long it expired)."""
    await session.execute(
        update(JobRun)
        .where(JobRun.id == run_id)
        .values(finished_at=finished_at, outcome=outcome, error=error, result=result)
    )


async def find_run(session: AsyncSession, run_id: int) -> JobRun | None:
    return await session.get(JobRun, run_id)
