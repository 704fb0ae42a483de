"""The periodic harvest, every `harvest_interval` unless turned off, by one replica at a time."""

import structlog

from hub.background.task import Task
from hub.database import exclusive
from hub.harvest import repository
from hub.harvest.schemas import HarvestReport
from hub.harvest.service import run_harvest
from hub.settings import HubSettings
from hub.types import Clock, Sessions

HARVEST_JOB = "harvest"
log = structlog.get_logger("fleetmark.harvest")


async def scheduled_harvest(
    sessions: Sessions, settings: HubSettings, clock: Clock
) -> HarvestReport | None:
    """The periodic job: harvest unless another replica is already at it (then None). A
    repositories file that cannot be used fails the run (InvalidConfiguration)."""
    async with exclusive(sessions, repository.HARVEST_LOCK) as acquired:
        if not acquired:
            log.info("harvest skipped: another replica is harvesting")
            return None
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
    enabled=lambda settings: settings.harvest_enabled,
)
