"""The Environment diff dashboard on the seeded fleet, run as Grafana runs it as the read-only
role, after dev got version 1.1.0: each cell's desired and deployed versions and the reason for
each difference, from the diff the environment diff job keeps."""

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.envdiff import service, tasks
from hub.harvest.schemas import RepositoriesFile
from hub.harvest.service import sync_repositories_file
from tests.dashboards.conftest import ReadOnly, Seeded
from tests.dashboards.test_panels import PANELS
from tests.hub.harvest.scenario import WORKLOAD


async def show(
    readonly: ReadOnly, seeded: Seeded, title: str, **chosen: list[str]
) -> list[dict[str, Any]]:
    query = PANELS[f"fleetmark-envdiff: {title}"]
    variables = await readonly.variables(query.dashboard, chosen)
    return await readonly.panel(
        query, variables, seeded.now - timedelta(days=1), seeded.now, readonly.timescaledb
    )


@pytest.fixture
async def released(seeded: Seeded, session: AsyncSession) -> Seeded:
    """dev's app branch carries 1.1.0 while its clusters still run 1.0.0; the promotion order
    dev → stage is declared; the job ran."""
    seeded.fleet.release("1.1.0")
    await seeded.fleet.harvest()
    await sync_repositories_file(session, RepositoriesFile(environments=["dev", "stage"]))
    assert session.bind is not None
    await tasks.refresh_deployed(
        async_sessionmaker(bind=session.bind, join_transaction_mode="create_savepoint"),
        now=seeded.now,
    )
    await service.keep_diff(session, now=seeded.now)
    return seeded


async def test_a_cell_shows_the_versions_side_by_side_and_the_reason(
    released: Seeded, readonly: ReadOnly
) -> None:
    cells = await show(readonly, released, "Versions by environment")

    drone, large = f"{WORKLOAD} on drone", f"{WORKLOAD} on large"
    # Environments in promotion order, then the rows.
    assert [(row["Workload"], row["Environment"], row["Cell"]) for row in cells] == [
        (drone, "dev", "1.1.0 → 1.0.0 on 2 (drifted)"),
        (large, "dev", "1.1.0 → 1.0.0 on 1 (failed)"),
        (drone, "stage", "1.0.0 → 1.0.0 on 1 (awaiting_promotion)"),
        (large, "stage", "1.0.0 → nothing reported (awaiting_promotion)"),
    ]


async def test_the_differences_say_why(released: Seeded, readonly: ReadOnly) -> None:
    rows = await show(readonly, released, "Differences and why", cluster_type=["large"])
    stage_only = await show(readonly, released, "Differences and why", environment=["stage"])

    assert [(row["Environment"], row["State"], row["Reasons"]) for row in rows] == [
        ("dev", "failing", "failed"),
        ("stage", "not_reporting", "awaiting_promotion"),
    ]
    assert rows[0]["Why"] == ("1 of 1 cluster in dev failing: Deployment/hello-world not ready")
    assert {row["Environment"] for row in stage_only} == {"stage"}


async def test_the_config_keys_that_differ(released: Seeded, readonly: ReadOnly) -> None:
    config = await show(readonly, released, "Config keys that differ", cluster_type=["drone"])

    environment = {
        row["Environment"]: row["Value"]
        for row in config
        if row["Config key"] == f"{WORKLOAD} on drone: ENVIRONMENT"
    }
    assert environment == {"dev": "Dev", "stage": "Stage"}


async def test_the_differences_most_severe_first_and_counted(
    released: Seeded, readonly: ReadOnly
) -> None:
    rows = await show(readonly, released, "Differences and why")
    [counted] = await show(readonly, released, "Differing cells")

    # Failing, then those that need a look (drifted, not reporting: the latest environment
    # first), then the others.
    assert [(row["Environment"], row["Cluster type"], row["State"]) for row in rows] == [
        ("dev", "large", "failing"),
        ("stage", "large", "not_reporting"),
        ("dev", "drone", "drifted"),
        ("stage", "drone", "in_sync"),
    ]
    assert counted["Differences"] == len(rows)


async def test_the_versions_each_environment_runs(released: Seeded, readonly: ReadOnly) -> None:
    versions = await show(readonly, released, "Versions by environment and workload")
    large = await show(
        readonly, released, "Versions by environment and workload", cluster_type=["large"]
    )

    # dev's two drones and its large run 1.0.0, as does stage's drone; 1.1.0 nowhere yet.
    assert [(row["Version"], row["Environment"], row["Clusters"]) for row in versions] == [
        (f"{WORKLOAD} 1.0.0", "dev", 3),
        (f"{WORKLOAD} 1.0.0", "stage", 1),
    ]
    assert [(row["Environment"], row["Clusters"]) for row in large] == [("dev", 1)]
