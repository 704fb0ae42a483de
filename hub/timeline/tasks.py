"""The readiness turns the timeline's health rows read (migration 0053_readiness_turn), judged
per 5-minute bucket and kept up to the bucket under way, by one replica at a time."""

from datetime import UTC, datetime, timedelta

import structlog

from hub.background.task import Task
from hub.database import write_session
from hub.timeline import repository
from hub.types import Sessions

__all__ = ["READINESS", "READINESS_INTERVAL", "READINESS_JOB", "keep_readiness"]

READINESS_JOB = "readiness"
# The timeline judges the buckets from the watermark on when asked: at most the bucket under
# way and a round's interval.
READINESS_INTERVAL = timedelta(minutes=1)
# Each round judges again the buckets this long before the watermark: the reports that came in
# that late are counted.
REREAD = timedelta(minutes=15)
# A round commits the buckets of this long at a time: a store's first round judges its whole
# history.
STEP = timedelta(days=1)
BUCKET = timedelta(minutes=5)
# The buckets' origin, as the store's date_bin has it.
_ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)
log = structlog.get_logger("fleetmark.timeline")


def bucket_of(moment: datetime) -> datetime:
    """The start of the 5-minute bucket `moment` is in."""
    return moment - (moment - _ORIGIN) % BUCKET


async def keep_readiness(sessions: Sessions, now: datetime) -> int:
    """A round of the job: the buckets from REREAD before the watermark up to the one under
    way at `now` judged again and kept, a STEP at a time. The turns kept."""
    until = bucket_of(now)
    async with write_session(sessions) as session:
        kept_until = await repository.readiness_kept_until(session)
    since = None if kept_until is None else kept_until - REREAD
    kept = 0
    while since is not None and since < until:
        step = min(since + STEP, until)
        async with write_session(sessions) as session:
            kept += await repository.keep_readiness_turns(session, since, step)
        since = step
    log.info("readiness turns kept", until=until.isoformat(), turns=kept)
    return kept


READINESS = Task(
    name=READINESS_JOB,
    run=lambda sessions, settings, clock: keep_readiness(sessions, clock()),
    interval=lambda settings: READINESS_INTERVAL,
    lock=repository.READINESS_LOCK,
    skipped="readiness turns skipped: another replica is keeping them",
)
