"""The summary of what clusters run (deployed_version) as the hub's background job keeps it:
refreshed every `env_diff_interval`, by one replica at a time; the diff reads what the last
refresh summed up and says when that was."""

from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.app import create_app
from hub.background.runner import run_round
from hub.client.schemas.diff import DiffOptions
from hub.envdiff import service, tasks
from hub.envdiff.repository import REFRESH_LOCK
from hub.envdiff.schemas import EnvironmentDiff
from hub.envdiff.tasks import ENV_DIFF_JOB
from hub.placement import repository as placement_repository
from tests.conftest import hub_settings
from tests.hub.conftest import ServedFleet
from tests.hub.harvest import scenario
from tests.support import FakeClock


async def read(session: AsyncSession, clock: FakeClock) -> EnvironmentDiff:
    return await service.environment_diff(
        session, ["dev", "stage"], DiffOptions(cluster_type="drone"), now=clock.now
    )


def dev_drone(result: EnvironmentDiff) -> tuple[int, list[tuple[str | None, int]]]:
    [row] = result.rows.items
    deployed = row.environments[0].deployed
    assert deployed is not None
    return deployed.clusters, [(item.version, item.clusters) for item in deployed.versions]


async def test_one_replica_refreshes_at_a_time_and_the_diff_reads_the_last_refresh(
    served_fleet: ServedFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A part per cluster id: the two drones are summed up in parts of their own.
    monkeypatch.setattr(placement_repository, "PART_CLUSTERS", 1)
    live = served_fleet
    scenario.build_platform(live.platform, live.app.url)
    heads = scenario.build_app(live.app)
    await live.start([("drone-01", "dev", "drone"), ("drone-02", "dev", "drone")])
    async with live.clusters() as clusters:
        for cluster in clusters.values():
            cluster.run_app("functional-test", heads["dev"])
            await cluster.report()

    async with live.engine.connect() as replica:  # another replica is refreshing
        await replica.execute(text("SELECT pg_advisory_lock(:key)"), {"key": REFRESH_LOCK})
        skipped = await run_round(tasks.ENV_DIFF, live.sessions, hub_settings(), live.clock)
        async with live.sessions() as session:
            before = await read(session, live.clock)
        await replica.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": REFRESH_LOCK})
    await tasks.scheduled_refresh(live.sessions, clock=live.clock)
    async with live.sessions() as session:
        after = await read(session, live.clock)
        parts = await session.scalar(text("SELECT count(DISTINCT part) FROM deployed_part"))

    assert skipped == "skipped"
    assert (before.deployed_at, dev_drone(before)) == (None, (0, []))
    assert after.deployed_at is not None
    assert dev_drone(after) == (2, [("1.0.0", 2)])
    # Added up from two parts: one per drone.
    assert parts == 2


async def test_the_hub_runs_the_refresh_every_interval(database_url: str, clock: FakeClock) -> None:
    app = create_app(hub_settings(env_diff_interval="45"), database_url, clock=clock)

    async with app.router.lifespan_context(app):
        job = app.state.jobs.scheduler.get_job(ENV_DIFF_JOB)

    assert job.trigger.interval == timedelta(seconds=45)
