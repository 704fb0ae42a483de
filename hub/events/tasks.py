"""The delivery of events: every `event_delivery_interval`, the deliveries due are sent to their
subscriptions, by one replica at a time."""

import structlog

from hub.background.task import Task
from hub.database import write_session
from hub.events import service
from hub.settings import HubSettings
from hub.types import Clock, Sessions

EVENT_DELIVERY_JOB = "event_delivery"
EVENT_DELIVERY_LOCK = 0x6576656E7473
log = structlog.get_logger("fleetmark.events")


async def deliver(sessions: Sessions, settings: HubSettings, clock: Clock) -> int:
    """A round of the periodic job: the attempts made."""
    outcomes = await service.deliver_due(lambda: write_session(sessions), settings, clock)
    if outcomes:
        log.info("events delivered", **outcomes)
    return sum(outcomes.values())


EVENT_DELIVERY = Task(
    name=EVENT_DELIVERY_JOB,
    run=deliver,
    interval=lambda settings: settings.event_delivery_interval,
    lock=EVENT_DELIVERY_LOCK,
    skipped="event delivery skipped: another replica is sending",
)


async def prune_events(sessions: Sessions, settings: HubSettings, clock: Clock) -> None:
    """The events' part of the retention job: events and finished deliveries older than
    `event_retention` go."""
    async with write_session(sessions) as session:
        pruned = await service.prune(session, before=clock() - settings.event_retention)
    log.info("events pruned", **pruned)
