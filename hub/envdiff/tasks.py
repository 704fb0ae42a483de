"""The environment diff's summary of what clusters run (deployed_version), refreshed every
`env_diff_interval` for the clusters that changed (now and then for every cluster, a part of the
fleet at a time), and the diff of every environment kept after it, by one replica at a time."""

import time
from datetime import datetime

import structlog

from hub.background.pacing import Pacer
from hub.background.task import Task
from hub.database import write_session
from hub.envdiff import repository, service
from hub.envdiff.service import Refresh
from hub.placement.repository import PART_CLUSTERS
from hub.types import Clock, Sessions

ENV_DIFF_JOB = "env_diff"
log = structlog.get_logger("fleetmark.envdiff")


async def refresh_deployed(sessions: Sessions, *, now: datetime) -> Refresh:
    """Sum up what the fleet's clusters run as of `now` (deployed_version): those that changed
    since the last refresh (service.increment_since_last), else every one; a part of the fleet
    per unit of work at most, with a pause between, so that the work never holds a core for
    long (a rollout through an environment changes thousands of clusters at once)."""
    async with write_session(sessions) as session:
        increment = await service.increment_since_last(session, now=now)
        if increment is None:
            parts = await service.deployed_parts(session)
        else:
            summed = await service.resolve_versions_again(session, increment.since)
    if increment is None:
        return await _full_pass(sessions, parts, now=now)
    size, pacer = PART_CLUSTERS, Pacer()
    for start in range(0, len(increment.clusters), size):
        await pacer.part()
        async with write_session(sessions) as session:
            summed |= await service.read_again(session, increment.clusters[start : start + size])
    async with write_session(sessions) as session:
        await service.set_refreshed(session, now=now, full=False)
    return Refresh(
        refreshed_at=now, full=False, clusters=len(increment.clusters), parts=len(summed)
    )


async def _full_pass(sessions: Sessions, parts: list[tuple[int, int]], *, now: datetime) -> Refresh:
    clusters, pacer = 0, Pacer()
    for part, (first, end) in enumerate(parts):
        await pacer.part()
        async with write_session(sessions) as session:
            clusters += await service.refresh_deployed_part(session, part, first, end)
    async with write_session(sessions) as session:
        await service.set_refreshed(session, now=now, full=True)
    return Refresh(refreshed_at=now, full=True, clusters=clusters, parts=len(parts))


async def scheduled_refresh(sessions: Sessions, *, clock: Clock) -> None:
    """A round of the job: a refresh, then the diff of every environment kept."""
    now = clock()
    started = time.perf_counter()
    refresh = await refresh_deployed(sessions, now=now)
    log.info(
        "deployed summary refreshed",
        full=refresh.full,
        clusters=refresh.clusters,
        parts=refresh.parts,
        seconds=round(time.perf_counter() - started, 3),
    )
    async with write_session(sessions) as session:
        await service.keep_diff(session, now=now)


ENV_DIFF = Task(
    name=ENV_DIFF_JOB,
    run=lambda sessions, settings, clock: scheduled_refresh(sessions, clock=clock),
    interval=lambda settings: settings.env_diff_interval,
    lock=repository.REFRESH_LOCK,
    skipped="deployed summary refresh skipped: another replica holds the lock",
    follows_placement=True,
)
