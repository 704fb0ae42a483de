"""The environment diff's summary of what clusters run (deployed_version), refreshed every
`env_diff_interval` a part of the fleet at a time, and the diff of every environment kept after
it, by one replica at a time."""

import asyncio

import structlog

from hub.background.task import Task
from hub.database import write_session
from hub.envdiff import repository, service
from hub.placement.repository import PART_PACE
from hub.types import Clock, Sessions

ENV_DIFF_JOB = "env_diff"
log = structlog.get_logger("fleetmark.envdiff")


async def refresh_deployed(sessions: Sessions) -> None:
    """Sum up what the fleet's clusters run now (deployed_version): a part of the fleet per
    unit of work, with a pause between, so that the work never holds a core for long."""
    async with write_session(sessions) as session:
        parts = await service.deployed_parts(session)
    for part, (first, end) in enumerate(parts):
        if part:
            await asyncio.sleep(PART_PACE)
        async with write_session(sessions) as session:
            await service.refresh_deployed_part(session, part, first, end)


async def scheduled_refresh(sessions: Sessions, *, clock: Clock) -> None:
    """A round of the job: a refresh, then the diff of every environment kept."""
    await refresh_deployed(sessions)
    async with write_session(sessions) as session:
        await service.keep_diff(session, now=clock())


ENV_DIFF = Task(
    name=ENV_DIFF_JOB,
    run=lambda sessions, settings, clock: scheduled_refresh(sessions, clock=clock),
    interval=lambda settings: settings.env_diff_interval,
    lock=repository.REFRESH_LOCK,
    skipped="deployed summary refresh skipped: another replica holds the lock",
    follows_placement=True,
)
