"""Every periodic task of the hub, as the slices declare them, for the app to run
(hub/background/runner.py). The store's own upkeep is declared here: the history's retention (at
start, then daily) and the hourly rollups where the store does not keep them itself
(hub/store.py)."""

from datetime import timedelta

from pydantic import BaseModel

from hub.background.task import Task
from hub.dora.tasks import DORA
from hub.drift.schemas import DRIFT_EVENTS
from hub.drift.tasks import DRIFT
from hub.envdiff.tasks import ENV_DIFF
from hub.events.tasks import EVENT_DELIVERY, prune_events
from hub.gate.schemas import GATE_EVENTS
from hub.gate.tasks import GATE_ANSWERS
from hub.harvest.schemas import HARVEST_EVENTS
from hub.harvest.tasks import HARVEST
from hub.rollouts.schemas import ROLLOUT_EVENTS
from hub.rollouts.tasks import ROLLOUTS
from hub.scheduling.schemas import SCHEDULE_EVENTS
from hub.scheduling.tasks import SCHEDULE
from hub.settings import HubSettings
from hub.statuses.tasks import COMMIT_STATUSES
from hub.store import RETENTION_LOCK, ROLLUP_LOCK, keep_history, refresh_rollups
from hub.suspects.schemas import SUSPECT_EVENTS
from hub.suspects.tasks import HALTS
from hub.timeline.tasks import READINESS
from hub.types import Clock, Sessions

__all__ = [
    "EVENT_TYPES",
    "RETENTION_INTERVAL",
    "RETENTION_JOB",
    "ROLLUP_INTERVAL",
    "ROLLUP_JOB",
    "TASKS",
]

RETENTION_JOB = "retention"
RETENTION_INTERVAL = timedelta(days=1)
ROLLUP_JOB = "rollup"
ROLLUP_INTERVAL = timedelta(minutes=10)


async def keep_for_retention(sessions: Sessions, settings: HubSettings, clock: Clock) -> None:
    """The retention job's round: the history as the store keeps it, then the events."""
    await keep_history(sessions, settings, clock())
    await prune_events(sessions, settings, clock)


RETENTION = Task(
    name=RETENTION_JOB,
    run=keep_for_retention,
    interval=lambda settings: RETENTION_INTERVAL,
    lock=RETENTION_LOCK,
    skipped="history retention skipped: another replica holds the lock",
    # It sets the store's policies.
    first_run_at_start=True,
)
ROLLUP = Task(
    name=ROLLUP_JOB,
    run=lambda sessions, settings, clock: refresh_rollups(sessions, clock(), settings.stale_after),
    interval=lambda settings: ROLLUP_INTERVAL,
    lock=ROLLUP_LOCK,
    skipped="rollup skipped: another replica holds the lock",
)

TASKS = (
    HARVEST,
    DRIFT,
    ENV_DIFF,
    DORA,
    ROLLOUTS,
    GATE_ANSWERS,
    RETENTION,
    ROLLUP,
    SCHEDULE,
    EVENT_DELIVERY,
    COMMIT_STATUSES,
    HALTS,
    READINESS,
)

# The events the tasks publish, each type with the model of its `data` (docs/events.md shows
# their JSON Schemas).
EVENT_TYPES: dict[str, type[BaseModel]] = (
    GATE_EVENTS | ROLLOUT_EVENTS | DRIFT_EVENTS | HARVEST_EVENTS | SCHEDULE_EVENTS | SUSPECT_EVENTS
)
