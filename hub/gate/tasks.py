"""The promotion gate's answers for the newest platform commits and workload versions of every
environment, judged every `gate_answers_interval` and kept in the store (gate_answer) for the
dashboards and alert rules that cannot run the gate's Python policy, by one replica at a time."""

import time

import structlog

from hub.background.task import Task
from hub.database import write_session
from hub.gate import service
from hub.gate.repository import ANSWERS_LOCK
from hub.settings import HubSettings
from hub.types import Clock, Sessions

GATE_ANSWERS_JOB = "gate_answers"
log = structlog.get_logger("fleetmark.promotion")


async def scheduled_answers(sessions: Sessions, settings: HubSettings, clock: Clock) -> int:
    """A round of the periodic job: the answers judged and kept (how many)."""
    started = time.perf_counter()
    async with write_session(sessions) as session:
        kept = await service.keep_answers(session, service.AnswerOptions.of(settings), now=clock())
    log.info("gate answers kept", answers=kept, seconds=round(time.perf_counter() - started, 3))
    return kept


GATE_ANSWERS = Task(
    name=GATE_ANSWERS_JOB,
    run=scheduled_answers,
    interval=lambda settings: settings.gate_answers_interval,
    lock=ANSWERS_LOCK,
    skipped="gate answers skipped: another replica is judging them",
    follows_placement=True,
)
