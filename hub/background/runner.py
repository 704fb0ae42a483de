"""The runtime of the hub's background work: the tasks the slices declare (hub/tasks.py lists
them), each run every interval, and the runs asked for through the API. The only module that
imports APScheduler.

Locks, `job_run` and the jobs' own thread are in docs/contributing.md ("Background jobs").
"""

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger
from pydantic import BaseModel
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from hub.background import repository
from hub.background.task import Task
from hub.database import create_engine, create_sessionmaker, exclusive, write_session
from hub.errors import FleetmarkError
from hub.settings import HubSettings
from hub.types import Clock, Sessions

__all__ = [
    "Jobs",
    "beside_jobs",
    "record_job_run",
    "run_after_placement",
    "run_requested",
    "run_round",
    "start_jobs",
    "stop_jobs",
]

Outcome = Literal["succeeded", "failed", "skipped"]
log = structlog.get_logger("fleetmark.jobs")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Jobs:
    scheduler: AsyncIOScheduler
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    engine: AsyncEngine
    sessions: Sessions
    # The tasks that run at once after a decommissioning or a placement.
    follow_placement: tuple[str, ...]


async def record_job_run(
    sessions: Sessions,
    *,
    job: str,
    started_at: datetime,
    finished_at: datetime,
    outcome: Outcome,
    error: str | None = None,
) -> None:
    async with write_session(sessions) as session:
        await repository.record_run(
            session,
            job=job,
            started_at=started_at,
            finished_at=finished_at,
            outcome=outcome,
            error=error,
        )


async def _finish_run(
    sessions: Sessions,
    run_id: int,
    *,
    finished_at: datetime,
    outcome: Literal["succeeded", "failed"],
    error: str | None = None,
    result: BaseModel | None = None,
) -> None:
    async with write_session(sessions) as session:
        await repository.finish_run(
            session,
            run_id,
            finished_at=finished_at,
            outcome=outcome,
            error=error,
            result=None if result is None else result.model_dump(mode="json"),
        )


async def run_round(task: Task, sessions: Sessions, settings: HubSettings, clock: Clock) -> Outcome:
    """One round of `task` under its lock, recorded: skipped, and said so, when another replica
    holds the lock; a failing round is logged, and the task keeps its schedule."""
    started_at = clock()
    outcome: Outcome = "succeeded"
    error = None
    try:
        async with exclusive(sessions, task.lock) as acquired:
            if acquired:
                await task.run(sessions, settings, clock)
            else:
                log.info(task.skipped)
                outcome = "skipped"
    except Exception as exc:
        log.exception("job failed; it runs again at the next interval", job=task.name)
        outcome, error = "failed", f"{type(exc).__name__}: {exc}"
    try:
        await record_job_run(
            sessions,
            job=task.name,
            started_at=started_at,
            finished_at=clock(),
            outcome=outcome,
            error=error,
        )
    except (SQLAlchemyError, OSError):
        log.exception("the job's run could not be recorded", job=task.name, outcome=outcome)
    return outcome


def start_jobs(
    database_url: str, settings: HubSettings, clock: Clock, tasks: Sequence[Task]
) -> Jobs:
    """Start the scheduler on a thread of its own with the tasks enabled by the settings, each
    run every interval; the first run is one interval away, but for the tasks that run at
    start."""
    loop = asyncio.new_event_loop()
    engine = create_engine(database_url, settings)
    sessions = create_sessionmaker(engine)
    scheduler = AsyncIOScheduler(timezone=UTC, event_loop=loop)
    enabled = [task for task in tasks if task.enabled(settings)]
    for task in enabled:
        scheduler.add_job(
            run_round,
            IntervalTrigger(seconds=task.interval(settings).total_seconds(), timezone=UTC),
            id=task.name,
            args=(task, sessions, settings, clock),
            # A run longer than the interval is not started twice, and missed runs collapse.
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            **({"next_run_time": datetime.now(UTC)} if task.first_run_at_start else {}),
        )
    thread = threading.Thread(target=loop.run_forever, name="fleetmark-jobs", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(_start(scheduler), loop).result()
    follow = tuple(task.name for task in enabled if task.follows_placement)
    return Jobs(scheduler, loop, thread, engine, sessions, follow)


def run_after_placement(jobs: Jobs) -> None:
    """Run the tasks that follow placement now: a cluster was decommissioned or placed."""
    run_soon(jobs, jobs.follow_placement)


def run_soon(jobs: Jobs, names: Sequence[str]) -> None:
    """Bring the next run of each named job forward to now (each still takes its lock, so a
    replica already at it keeps its round); the schedule goes on from there."""

    def bring_forward() -> None:
        for name in names:
            jobs.scheduler.modify_job(name, next_run_time=datetime.now(UTC))

    jobs.loop.call_soon_threadsafe(bring_forward)


def run_requested(
    jobs: Jobs,
    run_id: int,
    work: Callable[[Sessions], Awaitable[BaseModel]],
    clock: Clock,
) -> None:
    """Run `work` (a harvest, a scheduling run asked for through the API, recorded as running
    under `run_id`) on the jobs' thread, as a job runs, and complete its record when it ends:
    the request that asked for it has been answered already (202)."""
    asyncio.run_coroutine_threadsafe(_requested(jobs.sessions, run_id, work, clock), jobs.loop)


async def _requested(
    sessions: Sessions,
    run_id: int,
    work: Callable[[Sessions], Awaitable[BaseModel]],
    clock: Clock,
) -> None:
    try:
        result = await work(sessions)
    except FleetmarkError as exc:
        await _finish_run(sessions, run_id, finished_at=clock(), outcome="failed", error=exc.detail)
    except Exception as exc:
        log.exception("requested run failed", run=run_id)
        error = f"{type(exc).__name__}: {exc}"
        await _finish_run(sessions, run_id, finished_at=clock(), outcome="failed", error=error)
    else:
        await _finish_run(sessions, run_id, finished_at=clock(), outcome="succeeded", result=result)


async def beside_jobs(jobs: Jobs, work: Callable[[Sessions], Coroutine[Any, Any, T]]) -> T:
    """`work` run on the jobs' thread and loop, with their sessions, as a job is: its Python
    work (thousands of rows made into values) holds up no request (/metrics' snapshot)."""
    return await asyncio.wrap_future(
        asyncio.run_coroutine_threadsafe(work(jobs.sessions), jobs.loop)
    )


async def stop_jobs(jobs: Jobs) -> None:
    """Stop scheduling; a job still running is cancelled (a harvest's committed chunks stay)."""
    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_stop(jobs), jobs.loop))
    jobs.loop.call_soon_threadsafe(jobs.loop.stop)
    await asyncio.to_thread(jobs.thread.join)
    jobs.loop.close()


async def _start(scheduler: AsyncIOScheduler) -> None:
    scheduler.start()


async def _stop(jobs: Jobs) -> None:
    jobs.scheduler.shutdown(wait=False)
    running = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    await jobs.engine.dispose()
