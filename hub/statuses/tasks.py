"""The commit statuses of promotion pull requests: every `gate_answers_interval`, the statuses
whose gate answer changed are set on the control-plane commits, by one replica at a time."""

import structlog

from hub.background.task import Task
from hub.database import write_session
from hub.settings import HubSettings
from hub.statuses import service
from hub.statuses.repository import STATUSES_LOCK
from hub.types import Clock, Sessions

COMMIT_STATUSES_JOB = "commit_statuses"
log = structlog.get_logger("fleetmark.statuses")


async def post(sessions: Sessions, settings: HubSettings, clock: Clock) -> int:
    """A round of the periodic job: the statuses posted."""
    outcomes = await service.post_statuses(lambda: write_session(sessions), settings, clock)
    if outcomes:
        log.info("commit statuses", **outcomes)
    return outcomes["posted"]


COMMIT_STATUSES = Task(
    name=COMMIT_STATUSES_JOB,
    run=post,
    interval=lambda settings: settings.gate_answers_interval,
    lock=STATUSES_LOCK,
    skipped="commit statuses skipped: another replica is posting them",
    enabled=lambda settings: settings.repositories_file is not None,
)
