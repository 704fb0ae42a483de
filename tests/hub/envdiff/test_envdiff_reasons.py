"""The environment diff over the simulated fleet: the reference scenario's platform-gitops and
app-gitops harvested, clusters reporting what they run, the summary refreshed as the hub's job
does, then dev, stage (and a prod made in the test) compared with the reason for each
difference."""

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.client.schemas.diff import DiffOptions
from hub.envdiff import service, tasks
from hub.envdiff.schemas import DiffRow, EnvironmentCell, EnvironmentDiff
from hub.errors import UnknownWorkload
from hub.git.urls import normalise_repository_url
from hub.harvest import tasks as harvest_tasks
from tests.conftest import hub_settings
from tests.hub.harvest import scenario
from tests.hub.simulated_fleet import Fleet, prod_layout
from tests.support import FakeClock

WORKLOAD = scenario.WORKLOAD


async def diff(
    session: AsyncSession, clock: FakeClock, *environments: str, **options: Any
) -> EnvironmentDiff:
    """What GET /api/v1/diff answers once the hub's job has summed up the reports."""
    assert session.bind is not None
    await tasks.refresh_deployed(
        async_sessionmaker(bind=session.bind, join_transaction_mode="create_savepoint"),
        now=clock.now,
    )
    return await service.environment_diff(
        session, environments, DiffOptions(**options), now=clock.now
    )


def row(result: EnvironmentDiff, cluster_type: str) -> DiffRow:
    [found] = [item for item in result.rows.items if item.cluster_type == cluster_type]
    return found


def cell(found: DiffRow, environment: str) -> EnvironmentCell:
    [wanted] = [item for item in found.environments if item.environment == environment]
    return wanted


def reasons(found: DiffRow) -> list[tuple[str, str | None]]:
    """Every difference but config keys: (reason, environment)."""
    return [
        (item.reason.value, item.environment)
        for item in found.differences
        if item.kind.value != "config"
    ]


def deployed(found: EnvironmentCell) -> list[tuple[str | None, int]]:
    assert found.deployed is not None
    return [(item.version, item.clusters) for item in found.deployed.versions]


@pytest.fixture
async def staged(fleet: Fleet) -> Fleet:
    """dev: drone-01 (Flux) and large-01 (Argo CD); stage: drone-s1, drone-s2 and large-s1.
    Every cluster runs the app-gitops head of its environment: 1.0.0 everywhere."""
    for name, cluster_type, environment in [
        ("drone-01", "drone", "dev"),
        ("large-01", "large", "dev"),
        ("drone-s1", "drone", "stage"),
        ("drone-s2", "drone", "stage"),
        ("large-s1", "large", "stage"),
    ]:
        await fleet.add(name, cluster_type, environment)
    run_heads(fleet)
    return fleet


def run_heads(fleet: Fleet, **heads: str) -> None:
    """Every cluster applies its environment's app head (or the commit given for it)."""
    targets = {("dev", "drone"): "functional-test", ("dev", "large"): "performance-test"}
    for cluster in fleet.clusters.values():
        target = targets.get((cluster.environment, cluster.cluster_type), "uat-test")
        commit = heads.get(cluster.environment, fleet.app_heads[cluster.environment])
        cluster.run_app(target, commit)


async def test_dev_at_a_newer_version_than_stage_is_awaiting_promotion(
    staged: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    dev_head = staged.release("1.1.0")
    await staged.harvest()
    run_heads(staged, dev=dev_head)
    await staged.report()

    result = await diff(session, clock, "dev", "stage")

    assert [(item.workload, item.cluster_type) for item in result.rows.items] == [
        (WORKLOAD, "drone"),
        (WORKLOAD, "large"),
    ]
    drone = row(result, "drone")
    assert reasons(drone) == [("awaiting_promotion", "stage")]
    [promotion] = [item for item in drone.differences if item.kind.value == "version"]
    assert promotion.compared_with == "dev"
    assert promotion.detail == "1.1.0 has yet to reach stage (dev: 1.1.0; stage: 1.0.0)"
    dev, stage = drone.environments
    assert (dev.environment, dev.deployment_target, dev.namespace) == (
        "dev",
        f"{WORKLOAD}-functional-test",
        scenario.namespace_of("dev", "drone", "functional-test"),
    )
    assert dev.desired is not None
    assert stage.desired is not None
    assert (dev.desired.version, stage.desired.version) == ("1.1.0", "1.0.0")
    assert dev.desired.images == [
        "docker.io/envoyproxy/envoy:v1.31.0",
        "ghcr.io/contoso/hello-world:1.1.0",
        "ghcr.io/contoso/migrations:7",
    ]
    assert dev.desired.manifests_commit == dev_head
    assert dev.app is not None
    assert (dev.app.repository, dev.app.branch, dev.app.path, dev.app.commit) == (
        normalise_repository_url(staged.app.url),
        "dev",
        "functional-test",
        dev_head,
    )
    assert dev.platform_commit == staged.platform_heads["dev"]
    assert (deployed(dev), deployed(stage)) == ([("1.1.0", 1)], [("1.0.0", 2)])
    assert (dev.state.value, stage.state.value) == ("in_sync", "in_sync")
    # The Argo CD cluster of dev counts as well: its Application follows the same folder.
    assert deployed(cell(row(result, "large"), "dev")) == [("1.1.0", 1)]
    assert result.deployed_at is not None


async def test_stage_clusters_failing_the_desired_version_failed(
    staged: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    old = staged.app_heads["stage"]
    new = staged.release("1.1.0", branch="stage")
    await staged.harvest()
    staged.clusters["drone-s1"].run_app(
        "uat-test",
        old,
        attempted=new,
        ready=False,
        reason="BuildFailed",
        message="kustomize build failed",
    )
    staged.clusters["drone-s2"].run_app("uat-test", new)
    await staged.report()

    drone = row(await diff(session, clock, "dev", "stage"), "drone")

    # stage is meant to run 1.1.0 and dev 1.0.0: not a promotion, stage went ahead.
    assert reasons(drone) == [("diverged", "stage"), ("failed", "stage")]
    [failed] = [item for item in drone.differences if item.reason.value == "failed"]
    assert failed.detail == "1 of 2 clusters in stage failing: kustomize build failed"
    stage = cell(drone, "stage")
    assert stage.state.value == "failing"
    assert stage.deployed is not None
    assert (stage.deployed.failing, stage.deployed.in_sync) == (1, 1)
    assert deployed(stage) == [("1.0.0", 1), ("1.1.0", 1)]


async def test_a_stage_cluster_behind_its_desired_version_drifted(
    staged: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    old = staged.app_heads["stage"]
    staged.release("1.1.0")
    new = staged.release("1.1.0", branch="stage")
    await staged.harvest()
    run_heads(staged, dev=staged.app.head("dev"), stage=new)
    staged.clusters["drone-s2"].run_app("uat-test", old)
    await staged.report()

    result = await diff(session, clock, "dev", "stage")

    drone = row(result, "drone")
    assert reasons(drone) == [("drifted", "stage")]
    assert [item.detail for item in drone.differences if item.reason.value == "drifted"] == [
        "1 of 2 clusters in stage drifted (running 1.0.0 instead of 1.1.0)"
    ]
    assert deployed(cell(drone, "stage")) == [("1.0.0", 1), ("1.1.0", 1)]
    assert reasons(row(result, "large")) == []


async def test_config_keys_that_differ_between_dev_and_stage_with_their_values(
    staged: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await staged.report()

    result = await diff(session, clock, "dev", "stage")

    drone = row(result, "drone")
    assert cell(drone, "dev").config == dict(sorted(scenario.CONFIG[("dev", "drone")].items()))
    assert cell(drone, "stage").config == {"ENVIRONMENT": "Stage"}
    assert [(d.key, d.values, d.reason.value) for d in drone.differences] == [
        ("CLUSTER_NAME", {"dev": "Drone", "stage": None}, "config"),
        (
            "DATABASE_URL",
            {"dev": "mysql://restricted-host:3306/mysqlrty123", "stage": None},
            "config",
        ),
        ("ENVIRONMENT", {"dev": "Dev", "stage": "Stage"}, "config"),
        ("REGION", {"dev": "East US", "stage": None}, "config"),
        ("SOME_COMMON_ENVIRONMENT_VARIABLE", {"dev": "false", "stage": None}, "config"),
    ]
    # large: West US on both sides; the keys stage lacks still differ.
    assert [d.key for d in row(result, "large").differences] == [
        "DATABASE_URL",
        "ENVIRONMENT",
        "SOME_COMMON_ENVIRONMENT_VARIABLE",
    ]
    ignoring = await diff(
        session,
        clock,
        "dev",
        "stage",
        ignored_keys=["ENVIRONMENT", "DATABASE_URL", "SOME_COMMON_ENVIRONMENT_VARIABLE"],
    )
    # With those keys ignored, large no longer differs and leaves the list.
    assert [item.cluster_type for item in ignoring.rows.items] == ["drone"]
    assert ignoring.filters.ignored_keys == [
        "DATABASE_URL",
        "ENVIRONMENT",
        "SOME_COMMON_ENVIRONMENT_VARIABLE",
    ]


async def test_a_target_assigned_in_dev_only_is_not_assigned_in_stage(
    staged: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    config = {"ENVIRONMENT": "Dev", "REGION": "West US"}
    staged.promote(
        "Promote dev: functional-test on small",
        staged.assignment("dev", "small", "functional-test", config),
    )
    await staged.harvest()
    small = await staged.add("small-01", "small")
    small.run_app("functional-test", staged.app_heads["dev"])
    await staged.report()

    found = row(await diff(session, clock, "dev", "stage"), "small")

    assert reasons(found) == [("not_assigned", "stage")]
    assert found.differences[0].detail == "not assigned in stage (only in dev)"
    dev, stage = found.environments
    assert (dev.state.value, stage.state.value) == ("in_sync", "not_assigned")
    assert (stage.assigned, stage.deployment_target, stage.deployed) == (False, None, None)


async def test_a_pinned_reconciler_explains_its_difference(
    staged: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    namespace = scenario.namespace_of("stage", "drone", "uat-test")
    reconciler = scenario.flux_reconciler(
        "uat-test", namespace, staged.app.url, "stage", "./uat-test"
    ).replace("    branch: stage", "    tag: v1.0.0")
    staged.promote(
        "Pin stage drone to v1.0.0",
        {f"drone/{WORKLOAD}-uat-test/reconciler.yaml": reconciler},
        branch="stage",
    )
    await staged.harvest()
    for name in ("drone-s1", "drone-s2"):
        staged.clusters[name].run_app("uat-test", staged.app_heads["stage"], ref="refs/tags/v1.0.0")
    await staged.report()

    drone = row(await diff(session, clock, "dev", "stage"), "drone")

    assert reasons(drone) == [("pinned", "stage")]
    stage = cell(drone, "stage")
    assert stage.app is not None
    assert stage.desired is not None
    assert (stage.app.pinned_ref, stage.app.commit, stage.desired.version) == (
        "refs/tags/v1.0.0",
        None,
        None,
    )
    # The clusters follow the tag: counted, with the commit they run (a tag has no version
    # the harvester knows).
    assert stage.deployed is not None
    assert [(v.version, v.commit, v.clusters) for v in stage.deployed.versions] == [
        (None, staged.app_heads["stage"], 2)
    ]
    assert stage.state.value == "in_sync"


async def test_clusters_that_have_not_reported_are_counted(
    staged: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await staged.add("drone-s3", "drone", "stage")
    await staged.report("drone-01", "large-01", "drone-s1", "drone-s2", "large-s1")

    stage = cell(row(await diff(session, clock, "dev", "stage"), "drone"), "stage")

    assert stage.deployed is not None
    assert (stage.deployed.clusters, stage.deployed.in_sync, stage.deployed.not_reporting) == (
        3,
        2,
        1,
    )
    assert stage.state.value == "not_reporting"


async def test_filters_and_pages(staged: Fleet, session: AsyncSession, clock: FakeClock) -> None:
    await staged.report()

    everything = await diff(session, clock, "dev", "stage", only_differences=False)
    second = await diff(session, clock, "dev", "stage", limit=1, offset=1)
    beyond = await diff(session, clock, "dev", "stage", offset=5)
    functional = await diff(session, clock, "dev", "stage", deployment_target="functional-test")
    by_full_name = await diff(
        session, clock, "dev", "stage", deployment_target=f"{WORKLOAD}-uat-test"
    )
    large = await diff(session, clock, "dev", "stage", cluster_type="large")
    with pytest.raises(UnknownWorkload, match="'other-app' is unknown"):
        await diff(session, clock, "dev", "stage", workload="other-app")

    assert [item.cluster_type for item in everything.rows.items] == ["drone", "large"]
    assert (second.rows.total, [item.cluster_type for item in second.rows.items]) == (
        2,
        ["large"],
    )
    assert (beyond.rows.total, beyond.rows.items) == (2, [])
    assert [item.cluster_type for item in functional.rows.items] == ["drone"]
    assert [item.cluster_type for item in by_full_name.rows.items] == ["drone", "large"]
    assert [item.cluster_type for item in large.rows.items] == ["large"]


# --- a third environment ----------------------------------------------------------------------


@pytest.fixture
async def three(unharvested_fleet: Fleet) -> Fleet:
    """dev at 1.1.0, stage at 1.0.0 and a prod at 0.9.0 with stage's config, a drone cluster
    each, running their environment's head."""
    built = unharvested_fleet
    stage_config = {
        cluster_type: scenario.CONFIG[("stage", cluster_type)]
        for cluster_type in ("drone", "large")
    }
    built.open_environment("prod", prod_layout(built, stage_config), version="0.9.0")
    built.app_heads["dev"] = built.release("1.1.0")
    await built.start()
    for environment in ("dev", "stage", "prod"):
        await built.add(f"drone-{environment}", "drone", environment)
    run_heads(built)
    await built.report()
    return built


async def test_three_environments_side_by_side_in_the_order_asked_for(
    three: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    result = await diff(session, clock, "dev", "stage", "prod")

    drone = row(result, "drone")
    assert [item.environment for item in drone.environments] == ["dev", "stage", "prod"]
    assert [item.desired.version if item.desired else None for item in drone.environments] == [
        "1.1.0",
        "1.0.0",
        "0.9.0",
    ]
    assert [
        (d.reason.value, d.environment, d.compared_with)
        for d in drone.differences
        if d.kind.value == "version"
    ] == [
        ("awaiting_promotion", "stage", "dev"),
        ("awaiting_promotion", "prod", "stage"),
    ]
    assert [deployed(item) for item in drone.environments] == [
        [("1.1.0", 1)],
        [("1.0.0", 1)],
        [("0.9.0", 1)],
    ]


async def test_the_order_declared_in_the_repositories_file_holds_whatever_order_is_asked_for(
    three: Fleet,
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    asked_before = await diff(session, clock, "prod", "dev", "stage")
    declared = tmp_path / "repositories.yaml"
    declared.write_text("environments: [dev, stage, prod]\n")
    await harvest_tasks.run_harvest(
        sessions,
        hub_settings(data_dir=tmp_path / "data", repositories_file=declared),
        clock=clock,
    )

    result = await diff(session, clock, "prod", "dev", "stage")

    # Undeclared, the order asked for is the chain.
    assert asked_before.promotion_order == ["prod", "dev", "stage"]
    assert (result.environments, result.promotion_order) == (
        ["dev", "stage", "prod"],
        ["dev", "stage", "prod"],
    )
    drone = row(result, "drone")
    assert [item.environment for item in drone.environments] == ["dev", "stage", "prod"]
    assert [
        (d.reason.value, d.environment) for d in drone.differences if d.kind.value == "version"
    ] == [
        ("awaiting_promotion", "stage"),
        ("awaiting_promotion", "prod"),
    ]
    assert result == await diff(session, clock, "stage", "prod", "dev")


async def test_two_identical_environments_have_no_differences(
    three: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    prod_head = three.release("1.0.0", branch="prod")
    await three.harvest()
    three.clusters["drone-prod"].run_app("uat-test", prod_head)
    await three.report()

    differing = await diff(session, clock, "stage", "prod")
    everything = await diff(session, clock, "stage", "prod", only_differences=False)

    assert (differing.rows.total, differing.rows.items) == (0, [])
    assert [(item.cluster_type, item.differences) for item in everything.rows.items] == [
        ("drone", []),
        ("large", []),
    ]
    drone = row(everything, "drone")
    assert [item.state.value for item in drone.environments] == ["in_sync", "in_sync"]
    # Namespaces and branches are per environment by design: shown, not compared.
    assert [item.namespace for item in drone.environments] == [
        scenario.namespace_of("stage", "drone", "uat-test"),
        scenario.namespace_of("prod", "drone", "uat-test"),
    ]


async def test_without_a_workload_label_the_scheduler_record_or_the_target_name_stands_in(
    staged: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    files = staged.assignment("dev", "small", "functional-test", {"ENVIRONMENT": "Dev"})
    folder = f"small/{WORKLOAD}-functional-test"
    files[f"{folder}/namespace.yaml"] = "kind: Namespace\nmetadata: {name: dev-small-ft}\n"
    staged.promote("Promote dev: an unlabelled namespace", files)
    await staged.harvest()

    unlabelled = await diff(session, clock, "dev", "stage", cluster_type="small")
    await session.execute(
        text(
            "WITH target AS ("
            " INSERT INTO scheduling_target (gitops_url, environment_id)"
            " SELECT :url, id FROM environment WHERE name = 'dev' RETURNING id)"
            " INSERT INTO scheduled_assignment (target_id, cluster_type_name,"
            " deployment_target_name, workload_name, namespace, status, scheduled_at)"
            " SELECT id, 'small', :target, :workload, 'dev-small-ft', 'rendered', now()"
            " FROM target"
        ),
        {
            "url": normalise_repository_url(staged.platform.url),
            "target": f"{WORKLOAD}-functional-test",
            "workload": WORKLOAD,
        },
    )
    scheduled = await diff(session, clock, "dev", "stage", cluster_type="small")

    assert [(item.workload, item.cluster_type) for item in unlabelled.rows.items] == [
        (f"{WORKLOAD}-functional-test", "small")
    ]
    assert [(item.workload, item.cluster_type) for item in scheduled.rows.items] == [
        (WORKLOAD, "small")
    ]
