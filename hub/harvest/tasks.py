"""The harvest as background work: every `harvest_interval` unless turned off, and when a run
is asked for (the API, the CLI); one replica at a time, each step of it in a unit of work."""

import structlog

from hub.background.task import Task
from hub.database import exclusive, write_session
from hub.errors import HarvestRunning
from hub.harvest import repository, service
from hub.harvest.schemas import HarvestReport
from hub.harvest.service import Progress
from hub.settings import HubSettings
from hub.types import Clock, Sessions

HARVEST_JOB = "harvest"
log = structlog.get_logger("fleetmark.harvest")


async def harvest(
    sessions: Sessions,
    settings: HubSettings,
    *,
    clock: Clock,
    only: str | None = None,
    backfill: bool = False,
    progress: Progress | None = None,
) -> HarvestReport:
    """Harvest now (the CLI, a run asked for through the API); HarvestRunning when another
    process is harvesting."""
    async with exclusive(sessions, repository.HARVEST_LOCK) as acquired:
        if not acquired:
            raise HarvestRunning(
                "a harvest is running elsewhere (another hub replica); try again later"
            )
        return await run_harvest(
            sessions, settings, clock=clock, only=only, backfill=backfill, progress=progress
        )


async def run_harvest(
    sessions: Sessions,
    settings: HubSettings,
    *,
    clock: Clock,
    only: str | None = None,
    backfill: bool = False,
    progress: Progress | None = None,
) -> HarvestReport:
    """Harvest every enabled repository (or `only` the one with that URL); the caller holds
    the harvest lock. `backfill` re-reads every branch from its root commit."""
    return await service.harvest_repositories(
        lambda: write_session(sessions),
        settings,
        clock=clock,
        only=only,
        backfill=backfill,
        progress=progress,
    )


async def scheduled_harvest(
    sessions: Sessions, settings: HubSettings, clock: Clock
) -> HarvestReport:
    """A round of the periodic job. A repositories file that cannot be used fails the run
    (InvalidConfiguration)."""
    report = await run_harvest(sessions, settings, clock=clock)
    log.info(
        "harvest finished",
        repositories=len(report.repositories),
        new_commits=sum(b.new_commits for r in report.repositories for b in r.branches),
        errors=sum(r.errors for r in report.repositories),
        seconds=round(report.seconds, 3),
    )
    return report


HARVEST = Task(
    name=HARVEST_JOB,
    run=scheduled_harvest,
    interval=lambda settings: settings.harvest_interval,
    lock=repository.HARVEST_LOCK,
    skipped="harvest skipped: another replica is harvesting",
    enabled=lambda settings: settings.harvest_enabled,
)
