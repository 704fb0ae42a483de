"""The drift evaluation, every `drift_interval`: the live objects whose inputs changed judged
(every one now and then) and the drift periods brought up to date, by one replica at a time."""

import structlog

from hub.background.task import Task
from hub.database import write_session
from hub.drift import repository
from hub.drift.service import Announcing, Evaluation, evaluate_drift
from hub.events.service import event_source
from hub.settings import HubSettings
from hub.types import Clock, Sessions

DRIFT_JOB = "drift"
log = structlog.get_logger("fleetmark.drift")


async def scheduled_drift(sessions: Sessions, settings: HubSettings, clock: Clock) -> Evaluation:
    """A round of the periodic job (hub.drift.service.evaluate_drift)."""
    async with write_session(sessions) as session:
        evaluation = await evaluate_drift(
            session,
            now=clock(),
            stale_after=settings.stale_after,
            announcing=Announcing(settings.drift_grace, event_source(settings)),
        )
    log.info(
        "drift evaluated",
        full=evaluation.full,
        judged=evaluation.judged,
        objects=evaluation.objects,
        drifted=evaluation.drifted,
        changed=evaluation.changed,
        periods_opened=evaluation.periods_opened,
        periods_closed=evaluation.periods_closed,
        events=evaluation.events,
        seconds=round(evaluation.seconds, 3),
    )
    return evaluation


DRIFT = Task(
    name=DRIFT_JOB,
    run=scheduled_drift,
    interval=lambda settings: settings.drift_interval,
    lock=repository.DRIFT_LOCK,
    skipped="drift evaluation skipped: another replica is evaluating",
    follows_placement=True,
)
