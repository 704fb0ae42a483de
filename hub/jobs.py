"""Background jobs of the hub: the periodic harvest, the periodic drift evaluation, the
periodic summary of what clusters run (for the environment diff) and, when a control plane is
configured, the periodic scheduling. The only module that imports APScheduler.

Every replica runs the scheduler; each job takes a PostgreSQL advisory lock of its own, so one
replica harvests (schedules) at a time and the others skip that round. A failing run is logged
and the job keeps its schedule.
"""

from datetime import UTC

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.drift.service import scheduled_drift
from hub.envdiff.service import scheduled_refresh
from hub.harvest.service import Clock, scheduled_harvest
from hub.scheduling.service import scheduled_schedule
from hub.settings import HubSettings

HARVEST_JOB = "harvest"
DRIFT_JOB = "drift"
ENV_DIFF_JOB = "env_diff"
SCHEDULE_JOB = "schedule"
log = structlog.get_logger("fleetmark.jobs")


async def _harvest(
    sessions: async_sessionmaker[AsyncSession], settings: HubSettings, clock: Clock
) -> None:
    try:
        await scheduled_harvest(sessions, settings, clock=clock)
    except Exception:
        log.exception("harvest job failed; it runs again at the next interval")


async def _drift(
    sessions: async_sessionmaker[AsyncSession], settings: HubSettings, clock: Clock
) -> None:
    try:
        await scheduled_drift(sessions, settings, clock=clock)
    except Exception:
        log.exception("drift job failed; it runs again at the next interval")


async def _env_diff(sessions: async_sessionmaker[AsyncSession]) -> None:
    try:
        await scheduled_refresh(sessions)
    except Exception:
        log.exception("environment diff refresh failed; it runs again at the next interval")


async def _schedule(
    sessions: async_sessionmaker[AsyncSession], settings: HubSettings, clock: Clock
) -> None:
    try:
        await scheduled_schedule(sessions, settings, clock=clock)
    except Exception:
        log.exception("schedule job failed; it runs again at the next interval")


def start_jobs(
    sessions: async_sessionmaker[AsyncSession], settings: HubSettings, clock: Clock
) -> AsyncIOScheduler:
    """Start the scheduler on the running event loop; each job's first run is one interval away."""
    scheduler = AsyncIOScheduler(timezone=UTC)
    scheduler.add_job(
        _harvest,
        IntervalTrigger(seconds=settings.harvest_interval.total_seconds(), timezone=UTC),
        id=HARVEST_JOB,
        kwargs={"sessions": sessions, "settings": settings, "clock": clock},
        # A harvest longer than the interval is not run twice, and missed runs collapse.
        max_instances=1,
        coalesce=True,
        misfire_grace_time=None,
    )
    scheduler.add_job(
        _drift,
        IntervalTrigger(seconds=settings.drift_interval.total_seconds(), timezone=UTC),
        id=DRIFT_JOB,
        kwargs={"sessions": sessions, "settings": settings, "clock": clock},
        max_instances=1,
        coalesce=True,
        misfire_grace_time=None,
    )
    scheduler.add_job(
        _env_diff,
        IntervalTrigger(seconds=settings.env_diff_interval.total_seconds(), timezone=UTC),
        id=ENV_DIFF_JOB,
        kwargs={"sessions": sessions},
        max_instances=1,
        coalesce=True,
        misfire_grace_time=None,
    )
    if settings.schedule_control_plane is not None:
        scheduler.add_job(
            _schedule,
            IntervalTrigger(seconds=settings.schedule_interval.total_seconds(), timezone=UTC),
            id=SCHEDULE_JOB,
            kwargs={"sessions": sessions, "settings": settings, "clock": clock},
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
    scheduler.start()
    return scheduler


def stop_jobs(scheduler: AsyncIOScheduler) -> None:
    """Stop scheduling; a harvest still running is cancelled (its committed chunks stay)."""
    scheduler.shutdown(wait=False)
