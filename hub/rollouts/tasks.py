"""Each rollout's state judged and kept, as of the DORA rollup's last refresh, by one replica
at a time."""

from datetime import timedelta

import structlog

from hub.background.task import Task
from hub.database import write_session
from hub.events.service import event_source
from hub.rollouts import repository
from hub.rollouts.service import Kept, keep_rollouts
from hub.settings import HubSettings
from hub.types import Sessions

ROLLOUTS_JOB = "rollouts"
# A run judges only rollouts not converged yet, as of the DORA job's last refresh: this often
# (or as often as the DORA job, if that is more often), the kept states follow each refresh
# within a minute.
ROLLOUTS_INTERVAL = timedelta(minutes=1)
log = structlog.get_logger("fleetmark.rollouts")


async def scheduled_rollouts(sessions: Sessions, settings: HubSettings) -> Kept:
    """A round of the periodic job: the rollouts judged and kept."""
    async with write_session(sessions) as session:
        kept = await keep_rollouts(
            session, stall_after=settings.rollout_stall_after, source=event_source(settings)
        )
    log.info(
        "rollouts kept",
        judged=kept.judged,
        written=kept.written,
        events=kept.events,
        seconds=round(kept.seconds, 3),
    )
    return kept


ROLLOUTS = Task(
    name=ROLLOUTS_JOB,
    run=lambda sessions, settings, clock: scheduled_rollouts(sessions, settings),
    interval=lambda settings: min(ROLLOUTS_INTERVAL, settings.dora_interval),
    lock=repository.ROLLOUTS_LOCK,
    skipped="rollouts skipped: another replica is judging them",
)
