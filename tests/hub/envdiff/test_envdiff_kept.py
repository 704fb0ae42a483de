"""The diff of every environment that the environment diff job keeps for dashboards
(environment_diff_cell, environment_diff_config): GET /api/v1/diff's answer for all
environments in promotion order, a row per cell with the reasons about it."""

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.client.schemas.diff import DiffOptions
from hub.envdiff import service, tasks
from hub.models import EnvironmentDiffCell, EnvironmentDiffConfig
from tests.hub.envdiff.test_envdiff_reasons import run_heads
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock


async def keep(session: AsyncSession, clock: FakeClock) -> int:
    """The job's run, inside the test's transaction."""
    assert session.bind is not None
    await tasks.refresh_deployed(
        async_sessionmaker(bind=session.bind, join_transaction_mode="create_savepoint"),
        now=clock.now,
    )
    return await service.keep_diff(session, now=clock.now)


async def cells(session: AsyncSession) -> dict[tuple[str, str], dict[str, Any]]:
    """(cluster type, environment) -> the kept cell of the workload."""
    rows = await session.execute(select(*EnvironmentDiffCell.__table__.c))
    return {(row["cluster_type"], row["environment"]): dict(row) for row in rows.mappings()}


@pytest.fixture
async def released(fleet: Fleet) -> Fleet:
    """dev (drone-01, large-01) has 1.1.0 and runs it on the drone, while the large fails it;
    stage (drone-s1) runs 1.0.0; dev's west-us config differs from stage's."""
    for name, cluster_type, environment in [
        ("drone-01", "drone", "dev"),
        ("large-01", "large", "dev"),
        ("drone-s1", "drone", "stage"),
    ]:
        await fleet.add(name, cluster_type, environment)
    dev_head = fleet.release("1.1.0")
    await fleet.harvest()
    run_heads(fleet, dev=dev_head)
    fleet.clusters["large-01"].run_app(
        "performance-test",
        fleet.app_heads["dev"],
        attempted=dev_head,
        ready=False,
        reason="SyncFailed",
        message="image pull failed",
    )
    await fleet.report()
    return fleet


async def test_the_kept_cells_are_the_diffs(
    released: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    kept = await keep(session, clock)
    answer = await service.environment_diff(
        session, ["dev", "stage"], DiffOptions(only_differences=False), now=clock.now
    )
    found = await cells(session)

    assert kept == answer.rows.total == 2
    for row in answer.rows.items:
        for order, cell in enumerate(row.environments):
            stored = found[(row.cluster_type, cell.environment)]
            about = [d for d in row.differences if d.environment == cell.environment]
            assert (
                stored["workload"],
                stored["environment_order"],
                stored["state"],
                stored["desired_version"],
                stored["reasons"],
                stored["details"],
            ) == (
                row.workload,
                order,
                cell.state.value,
                None if cell.desired is None else cell.desired.version,
                [d.reason.value for d in about],
                [d.detail for d in about],
            )


async def test_a_cell_shows_the_versions_and_the_reason(
    released: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await keep(session, clock)
    found = await cells(session)

    stage = found[("drone", "stage")]
    assert (stage["desired_version"], stage["deployed"], stage["reasons"]) == (
        "1.0.0",
        [{"version": "1.0.0", "commit": None, "clusters": 1}],
        ["awaiting_promotion"],
    )
    assert stage["details"] == ["1.1.0 has yet to reach stage (dev: 1.1.0; stage: 1.0.0)"]
    dev_large = found[("large", "dev")]
    assert (dev_large["state"], dev_large["desired_version"], dev_large["reasons"]) == (
        "failing",
        "1.1.0",
        ["failed"],
    )
    assert dev_large["deployed"] == [{"version": "1.0.0", "commit": None, "clusters": 1}]
    assert (found[("large", "stage")]["state"], found[("large", "stage")]["clusters"]) == (
        "no_clusters",
        0,
    )
    assert found[("drone", "dev")]["reasons"] == []


async def test_the_config_keys_that_differ_are_kept_per_environment(
    released: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await keep(session, clock)
    rows = await session.execute(
        select(
            EnvironmentDiffConfig.key,
            EnvironmentDiffConfig.environment,
            EnvironmentDiffConfig.value,
        )
        .where(
            EnvironmentDiffConfig.cluster_type == "drone",
            EnvironmentDiffConfig.workload == WORKLOAD,
        )
        .order_by(EnvironmentDiffConfig.key, EnvironmentDiffConfig.environment_order)
    )
    config = {(key, environment): value for key, environment, value in rows}

    assert config[("ENVIRONMENT", "dev")] == "Dev"
    assert config[("ENVIRONMENT", "stage")] == "Stage"
