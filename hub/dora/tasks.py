"""The DORA rollup's refresh, every `dora_interval`, by one replica at a time."""

import structlog

from hub.background.task import Task
from hub.database import write_session
from hub.dora import repository
from hub.dora.service import Refresh, refresh_rollup
from hub.settings import HubSettings
from hub.types import Clock, Sessions

DORA_JOB = "dora"
log = structlog.get_logger("fleetmark.dora")


async def scheduled_dora(sessions: Sessions, settings: HubSettings, clock: Clock) -> Refresh:
    """A round of the periodic job: the rollup refreshed."""
    async with write_session(sessions) as session:
        refresh = await refresh_rollup(session, now=clock(), settle=settings.dora_settle_after)
    log.info(
        "DORA rollup refreshed",
        subjects=refresh.subjects,
        judged_in_full=refresh.judged_in_full,
        written=refresh.written,
        seconds=round(refresh.seconds, 3),
    )
    return refresh


DORA = Task(
    name=DORA_JOB,
    run=scheduled_dora,
    interval=lambda settings: settings.dora_interval,
    lock=repository.REFRESH_LOCK,
    skipped="DORA refresh skipped: another replica is refreshing",
)
