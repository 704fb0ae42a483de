"""The gate for a workload version: the cluster types its assignments name, the app-gitops
folder each follows, and the version the harvested manifests carry at the applied commit."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.gate import GateQuery
from hub.client.text import format_duration
from hub.gate import service
from hub.gate.policy import ClusterState, Verdict
from hub.gate.schemas import GateCluster, GateResult
from hub.git.urls import normalise_repository_url
from hub.text import format_time
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock

SOAK = timedelta(minutes=10)


async def gate(session: AsyncSession, clock: FakeClock, version: str, **options: Any) -> GateResult:
    query = GateQuery(
        **({"environment": "dev", "workload": WORKLOAD, "version": version, "soak": SOAK} | options)
    )
    return await service.promotion_gate(
        session, query, now=clock.now, stale_after=timedelta(minutes=10)
    )


def by_name(result: GateResult) -> dict[str, GateCluster]:
    return {cluster.name: cluster for cluster in result.clusters.items}


@pytest.fixture
async def dev(fleet: Fleet) -> Fleet:
    """dev as onboarded: functional-test on drone (Flux), performance-test on large (Argo CD);
    small and command-center carry nothing. Every cluster runs the platform head and the
    app-gitops head (1.0.0) of what its cluster type is assigned."""
    for name, cluster_type in [
        ("drone-01", "drone"),
        ("large-01", "large"),
        ("small-01", "small"),
        ("command-center-01", "command-center"),
    ]:
        cluster = await fleet.add(name, cluster_type)
        cluster.run_platform(fleet.platform_heads["dev"])
    fleet.clusters["drone-01"].run_app("functional-test", fleet.app_heads["dev"])
    fleet.clusters["large-01"].run_app("performance-test", fleet.app_heads["dev"])
    return fleet


async def test_only_the_cluster_types_with_an_assignment_are_expected(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    started = clock.now
    await dev.report()
    clock.advance(minutes=10)
    await dev.report()

    result = await gate(session, clock, "1.0.0")

    assert result.verdict is Verdict.PASSED
    assert [(c.name, c.cluster_type) for c in result.clusters.items] == [
        ("drone-01", "drone"),
        ("large-01", "large"),
    ]
    app = normalise_repository_url(dev.app.url)
    assert [a.model_dump() for a in result.target.assignments] == [
        {
            "cluster_type": "drone",
            "deployment_target": "hello-world-app-functional-test",
            "repository": app,
            "branch": "dev",
            "path": "functional-test",
        },
        {
            "cluster_type": "large",
            "deployment_target": "hello-world-app-performance-test",
            "repository": app,
            "branch": "dev",
            "path": "performance-test",
        },
    ]
    clusters = by_name(result)
    assert clusters["drone-01"].object == (
        "flux/Kustomization/flux-system/hello-world-app-functional-test"
    )
    assert (
        clusters["large-01"].object == "argocd/Application/argocd/hello-world-app-performance-test"
    )
    assert clusters["large-01"].ready_since == started
    assert [(h.repository, h.branch) for h in result.freshness.harvested] == [
        (normalise_repository_url(dev.platform.url), "dev"),
        (app, "dev"),
    ]


async def test_a_new_version_waits_for_its_commit_and_fails_with_a_failed_attempt(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    old = dev.app_heads["dev"]
    new = dev.release("1.1.0")
    await dev.harvest()
    await dev.report()

    waiting = await gate(session, clock, "1.1.0")
    # No cluster applied it: past its time from the app commit that carried it, it fails.
    committed_at = datetime.fromisoformat(dev.app.git("log", "-1", "--format=%cI", new))
    late = await gate(session, clock, "1.1.0", max_time_to_converge=clock.now - committed_at - SOAK)

    assert waiting.verdict is Verdict.PENDING
    assert late.verdict is Verdict.FAILED
    assert late.reasons[0].startswith(
        f"{WORKLOAD} 1.1.0 has not converged in dev within "
        f"{format_duration(clock.now - committed_at - SOAK)} (max_time_to_converge) of its "
        f"commit at {format_time(committed_at)}: 0 of "
    )
    assert by_name(waiting)["drone-01"].explanation == (
        f"applied dev@sha1:{old}, which does not contain {WORKLOAD} 1.1.0"
    )
    dev.clusters["drone-01"].run_app("functional-test", new)
    dev.clusters["large-01"].run_app(
        "performance-test", old, attempted=new, ready=False, reason="SyncFailed", message="boom"
    )
    await dev.report()
    failed = await gate(session, clock, "1.1.0")
    assert failed.verdict is Verdict.FAILED
    assert failed.reasons == [f"large-01: reconciling {WORKLOAD} 1.1.0 failed (SyncFailed: boom)"]
    # The failed attempt was not at 1.0.0, which still runs there.
    older = await gate(session, clock, "1.0.0")
    assert older.verdict is Verdict.PENDING
    assert by_name(older)["large-01"].state is ClusterState.NOT_READY


async def test_a_commit_after_the_one_that_introduced_the_version_counts(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    dev.release("1.1.0")
    # A commit that leaves the folders as they were, then the next version.
    readme = dev.commit(dev.app, "dev", "docs", {"README.md": "hello-world-app manifests\n"})
    newer = dev.release("1.2.0")
    await dev.harvest()
    dev.clusters["drone-01"].run_app("functional-test", readme)
    dev.clusters["large-01"].run_app("performance-test", newer)
    await dev.report()
    clock.advance(minutes=10)
    await dev.report()

    result = await gate(session, clock, "1.1.0")

    assert result.verdict is Verdict.PASSED
    assert by_name(result)["large-01"].applied_revision == newer
    newest = await gate(session, clock, "1.2.0")
    assert by_name(newest)["drone-01"].state is ClusterState.NOT_APPLIED


async def test_an_app_commit_not_harvested_yet_is_unknown(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    dev.release("1.1.0")
    await dev.harvest()
    unharvested = dev.release("1.2.0")
    dev.clusters["drone-01"].run_app("functional-test", unharvested)
    await dev.report()

    result = await gate(session, clock, "1.1.0")

    assert by_name(result)["drone-01"].state is ClusterState.UNKNOWN_REVISION
    await dev.harvest()
    known = await gate(session, clock, "1.1.0")
    assert by_name(known)["drone-01"].state is ClusterState.SOAKING


async def test_an_expected_cluster_without_the_assignments_object_has_applied_nothing(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    spare = await dev.add("large-02", "large")
    spare.run_platform(dev.platform_heads["dev"])
    await dev.report()

    result = await gate(session, clock, "1.0.0")

    assert result.verdict is Verdict.PENDING
    assert "large-02: has applied nothing yet" in result.reasons
    assert by_name(result)["large-02"].state is ClusterState.NOT_APPLIED
    assert by_name(result)["large-02"].object is None
