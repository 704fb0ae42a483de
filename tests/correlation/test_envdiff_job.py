"""The summary of what clusters run (deployed_version) as the hub's background job keeps it:
refreshed every `env_diff_interval`, by one replica at a time; the diff reads what the last
refresh summed up and says when that was."""

from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from hub.app import create_app
from hub.envdiff import service
from hub.envdiff.repository import REFRESH_LOCK
from hub.envdiff.schemas import EnvironmentDiff
from hub.jobs import ENV_DIFF_JOB
from tests.conftest import hub_settings
from tests.correlation.fleet import Fleet
from tests.support import FakeClock


async def read(session: AsyncSession, clock: FakeClock) -> EnvironmentDiff:
    return await service.environment_diff(
        session,
        environments=["dev", "stage"],
        workload=None,
        cluster_type="drone",
        deployment_target=None,
        only_differences=True,
        ignored_keys=[],
        limit=100,
        offset=0,
        now=clock.now,
    )


def dev_drone(result: EnvironmentDiff) -> tuple[int, list[tuple[str | None, int]]]:
    [row] = result.rows.items
    deployed = row.environments[0].deployed
    assert deployed is not None
    return deployed.clusters, [(item.version, item.clusters) for item in deployed.versions]


async def test_one_replica_refreshes_at_a_time_and_the_diff_reads_the_last_refresh(
    fleet: Fleet,
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
    engine: AsyncEngine,
    clock: FakeClock,
) -> None:
    cluster = await fleet.add("drone-01", "drone")
    cluster.run_app("functional-test", fleet.app_heads["dev"])
    await fleet.report()

    async with engine.connect() as replica:  # another replica is refreshing
        await replica.execute(text("SELECT pg_advisory_lock(:key)"), {"key": REFRESH_LOCK})
        await service.scheduled_refresh(sessions)
        before = await read(session, clock)
        await replica.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": REFRESH_LOCK})
    await service.scheduled_refresh(sessions)
    after = await read(session, clock)

    assert (before.deployed_at, dev_drone(before)) == (None, (0, []))
    assert after.deployed_at is not None
    assert dev_drone(after) == (1, [("1.0.0", 1)])


async def test_the_hub_runs_the_refresh_every_interval(database_url: str, clock: FakeClock) -> None:
    app = create_app(hub_settings(env_diff_interval="45"), database_url, clock=clock)

    async with app.router.lifespan_context(app):
        job = app.state.jobs.get_job(ENV_DIFF_JOB)

    assert job.trigger.interval == timedelta(seconds=45)
