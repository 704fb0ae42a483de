"""The halts of the environments in FLEETMARK_HALT_ON_REGRESSION, judged from their suspects
every `halts_interval` and kept with their events, by one replica at a time."""

import structlog

from hub.background.task import Task
from hub.database import write_session
from hub.events.service import event_source
from hub.settings import HubSettings
from hub.suspects import repository
from hub.suspects.service import HaltOptions, KeptHalts, keep_halts
from hub.types import Clock, Sessions

HALTS_JOB = "halts"
log = structlog.get_logger("fleetmark.suspects")


async def scheduled_halts(sessions: Sessions, settings: HubSettings, clock: Clock) -> KeptHalts:
    """A round of the periodic job: suspects judged, halts started and ended."""
    options = HaltOptions(
        halting=settings.halt_on_regression,
        window=settings.suspect_window,
        min_regressions=settings.suspect_min_regressions,
        source=event_source(settings),
    )
    async with write_session(sessions) as session:
        kept = await keep_halts(session, options, now=clock())
    log.info("halts kept", started=kept.started, ended=kept.ended, events=kept.events)
    return kept


HALTS = Task(
    name=HALTS_JOB,
    run=scheduled_halts,
    interval=lambda settings: settings.halts_interval,
    lock=repository.HALTS_LOCK,
    skipped="halts skipped: another replica is judging them",
    enabled=lambda settings: bool(settings.halt_on_regression),
)
