"""SQL of the job runs: one row written per round, the oldest beyond the kept ones deleted, and
the newest of each job and outcome read; a run asked for through the API written when it
starts, completed when it ends, and read by its id."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping, delete, insert, select, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import JobRun

# Rows kept per job and outcome: the last success stays however many skipped or failed rounds
# follow it, and the table stays small (jobs x outcomes x KEPT_RUNS rows).
KEPT_RUNS = 20


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
    kept = (
        select(JobRun.id)
        .where(JobRun.job == job, JobRun.outcome == outcome)
        .order_by(JobRun.finished_at.desc(), JobRun.id.desc())
        .limit(KEPT_RUNS)
    )
    await session.execute(
        delete(JobRun).where(JobRun.job == job, JobRun.outcome == outcome, JobRun.id.not_in(kept))
    )


async def latest_runs(session: AsyncSession) -> Sequence[RowMapping]:
    """The newest run of each job and outcome."""
    statement = (
        select(JobRun.job, JobRun.outcome, JobRun.started_at, JobRun.finished_at)
        .where(JobRun.outcome != "running")
        .ext(distinct_on(JobRun.job, JobRun.outcome))
        .order_by(JobRun.job, JobRun.outcome, JobRun.finished_at.desc(), JobRun.id.desc())
    )
    return (await session.execute(statement)).mappings().all()


async def start_run(session: AsyncSession, *, job: str, started_at: datetime) -> JobRun:
    """A run asked for through the API, recorded as running."""
    statement = (
        insert(JobRun).values(job=job, started_at=started_at, outcome="running").returning(JobRun)
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
    statement = (
        update(JobRun)
        .where(JobRun.id == run_id)
        .values(finished_at=finished_at, outcome=outcome, error=error, result=result)
        .returning(JobRun.job)
    )
    job = (await session.execute(statement)).scalar_one()
    await _keep_newest(session, job, outcome)


async def find_run(session: AsyncSession, run_id: int) -> JobRun | None:
    return await session.get(JobRun, run_id)
