"""The gate for a platform commit: facts gathered from a harvested platform repository and from
agent reports sent over the API as simulated time goes by."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.gate import GateQuery
from hub.client.text import format_duration
from hub.gate import service
from hub.gate.policy import ClusterState, Verdict
from hub.gate.schemas import GateCluster, GateResult
from hub.models import Cluster
from hub.revisions import UNKNOWN_FORM
from hub.simulation import ROOT
from hub.text import format_time
from tests.hub.drifting import drift, evaluate, rows
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock

SOAK = timedelta(minutes=10)
STALE_AFTER = timedelta(minutes=10)


async def gate(session: AsyncSession, clock: FakeClock, commit: str, **options: Any) -> GateResult:
    query = GateQuery(**({"environment": "dev", "commit": commit, "soak": SOAK} | options))
    return await service.promotion_gate(session, query, now=clock.now, stale_after=STALE_AFTER)


def by_name(result: GateResult) -> dict[str, GateCluster]:
    return {cluster.name: cluster for cluster in result.clusters.items}


def states(result: GateResult) -> dict[str, ClusterState]:
    return {cluster.name: cluster.state for cluster in result.clusters.items}


@pytest.fixture
async def dev(fleet: Fleet) -> Fleet:
    """Two drones (Flux), a large (Argo CD) and a small (Flux, nothing assigned) in dev."""
    for name, cluster_type in [
        ("drone-01", "drone"),
        ("drone-02", "drone"),
        ("large-01", "large"),
        ("small-01", "small"),
    ]:
        await fleet.add(name, cluster_type)
    return fleet


def run_everywhere(fleet: Fleet, sha: str) -> None:
    for cluster in fleet.clusters.values():
        cluster.run_platform(sha)


async def test_pending_while_soaking_then_passed_exactly_when_the_soak_has_elapsed(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    run_everywhere(dev, head)
    applied_at = clock.now
    await dev.report()
    clock.advance(minutes=5)
    # The same state again: the clusters stay fresh, their soak runs on.
    await dev.report()

    halfway = await gate(session, clock, head)

    assert halfway.verdict is Verdict.PENDING
    assert halfway.earliest_pass_at == applied_at + SOAK
    assert set(states(halfway).values()) == {ClusterState.SOAKING}
    assert {c.soak_remaining_seconds for c in halfway.clusters.items} == {300.0}
    assert {c.ready_since for c in halfway.clusters.items} == {applied_at}
    assert halfway.counts.model_dump() == {
        "expected": 4,
        "reporting": 4,
        "stale": 0,
        "never_reported": 0,
        "compliant": 0,
        "by_state": {state: 4 if state is ClusterState.SOAKING else 0 for state in ClusterState},
    }
    clock.now = applied_at + SOAK - timedelta(seconds=1)
    assert (await gate(session, clock, head)).verdict is Verdict.PENDING
    clock.now = applied_at + SOAK
    passed = await gate(session, clock, head)
    assert passed.verdict is Verdict.PASSED
    assert passed.reasons == [
        f"all 4 expected cluster(s) in dev run platform commit {head[:12]} "
        "and have been Ready for at least 10m"
    ]
    assert passed.counts.compliant == 4
    assert passed.target.commit == head
    assert passed.freshness.oldest_report_at == applied_at + timedelta(minutes=5)


async def test_the_soak_starts_with_the_current_ready_period(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    run_everywhere(dev, head)
    start = clock.now
    await dev.report()
    drone = dev.clusters["drone-01"]
    clock.advance(minutes=2)
    drone.run_platform(head, ready=None, reason="Progressing", message="health checks running")
    await drone.report()
    clock.advance(minutes=1)
    drone.run_platform(head)
    await drone.report()
    clock.advance(minutes=1)
    # Still Ready, only the message changed: the Ready period goes on.
    drone.run_platform(head, message="reconciled again")
    await dev.report()

    result = await gate(session, clock, head)

    soaking = by_name(result)["drone-01"]
    assert soaking.ready_since == start + timedelta(minutes=3)
    assert soaking.soak_ends_at == start + timedelta(minutes=13)
    assert by_name(result)["drone-02"].soak_ends_at == start + SOAK
    assert result.earliest_pass_at == start + timedelta(minutes=13)


async def test_a_failing_cluster_fails_the_gate_at_once(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    first = dev.platform_heads["dev"]
    second = dev.promote("Promote dev: platform config", {"large/README.md": "west-us\n"})
    await dev.harvest()
    run_everywhere(dev, second)
    # Argo CD tried the new commit and the sync failed; the previous one still runs.
    dev.clusters["large-01"].run_platform(
        first,
        attempted=second,
        ready=False,
        reason="SyncFailed",
        message="one or more objects failed to apply",
    )
    await dev.report()

    failed = await gate(session, clock, second)

    assert failed.verdict is Verdict.FAILED
    assert failed.reasons == [
        f"large-01: reconciling platform commit {second[:12]} failed "
        "(SyncFailed: one or more objects failed to apply)"
    ]
    assert by_name(failed)["large-01"].message == "one or more objects failed to apply"
    assert failed.earliest_pass_at is None
    # The older commit did not fail: it still runs there, just not Ready.
    older = await gate(session, clock, first)
    assert older.verdict is Verdict.PENDING
    assert by_name(older)["large-01"].state is ClusterState.NOT_READY


async def test_a_stale_cluster_keeps_the_gate_pending_with_that_reason(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    run_everywhere(dev, head)
    await dev.report()
    clock.advance(minutes=11)
    await dev.report("drone-01", "large-01", "small-01")

    result = await gate(session, clock, head)

    assert result.verdict is Verdict.PENDING
    assert result.reasons == ["drone-02: no report for 11m (stale after 10m)"]
    assert by_name(result)["drone-02"].state is ClusterState.STALE
    assert (result.counts.reporting, result.counts.stale) == (3, 1)
    assert result.freshness.oldest_report_at == clock.now - timedelta(minutes=11)
    allowed = await gate(session, clock, head, allow_stale=True)
    assert allowed.verdict is Verdict.PASSED


async def test_a_cluster_at_a_descendant_commit_counts(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    first = dev.platform_heads["dev"]
    second = dev.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await dev.harvest()
    run_everywhere(dev, first)
    dev.clusters["drone-01"].run_platform(second)
    await dev.report()
    clock.advance(minutes=10)
    await dev.report()

    result = await gate(session, clock, first)

    assert result.verdict is Verdict.PASSED
    assert by_name(result)["drone-01"].applied_revision == f"dev@sha1:{second}"
    newer = await gate(session, clock, second)
    assert newer.verdict is Verdict.PENDING
    behind = by_name(newer)["large-01"]
    assert behind.state is ClusterState.NOT_APPLIED
    assert behind.explanation == (
        f"applied {first}, which does not contain platform commit {second[:12]}"
    )


async def test_a_commit_the_harvester_has_not_read_yet_is_unknown_until_it_has(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    first = dev.platform_heads["dev"]
    second = dev.promote("Promote dev: small config", {"small/README.md": "west-us\n"})
    run_everywhere(dev, first)
    dev.clusters["small-01"].run_platform(second)
    await dev.report()

    before = await gate(session, clock, first)

    assert by_name(before)["small-01"].state is ClusterState.UNKNOWN_REVISION
    assert by_name(before)["small-01"].explanation == (
        f"applied dev@sha1:{second}, which is not in the harvested history yet"
    )
    await dev.harvest()
    after = await gate(session, clock, first)
    assert by_name(after)["small-01"].state is ClusterState.SOAKING


async def test_a_commit_no_cluster_applies_fails_past_its_time_from_its_commit(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    run_everywhere(dev, dev.platform_heads["dev"])
    await dev.report()
    second = dev.promote("Promote dev: small config", {"small/README.md": "west-us\n"})
    await dev.harvest()
    # Nobody picks the commit up: no rollout of it, so the time counts from its harvested commit.
    committed_at = datetime.fromisoformat(dev.platform.git("log", "-1", "--format=%cI", second))
    elapsed = clock.now - committed_at

    within = await gate(session, clock, second, max_time_to_converge=elapsed)
    late = await gate(session, clock, second, max_time_to_converge=elapsed - SOAK)

    assert within.verdict is Verdict.PENDING
    assert late.verdict is Verdict.FAILED
    assert late.reasons[0] == (
        f"platform commit {second[:12]} has not converged in dev within "
        f"{format_duration(elapsed - SOAK)} (max_time_to_converge) of its commit at "
        f"{format_time(committed_at)}: 0 of 4 expected cluster(s) run it, Ready; 4 required"
    )


async def test_an_expected_cluster_that_never_reported_blocks_until_decommissioned(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    run_everywhere(dev, head)
    await dev.report("drone-01", "drone-02", "large-01")
    clock.advance(minutes=10)
    await dev.report("drone-01", "drone-02", "large-01")

    blocked = await gate(session, clock, head)

    assert blocked.verdict is Verdict.PENDING
    assert blocked.reasons == ["small-01: registered, but its agent never reported"]
    assert blocked.counts.never_reported == 1
    await session.execute(
        update(Cluster).where(Cluster.name == "small-01").values(decommissioned_at=clock.now)
    )
    passed = await gate(session, clock, head)
    assert passed.verdict is Verdict.PASSED
    assert [cluster.name for cluster in passed.clusters.items] == [
        "drone-01",
        "drone-02",
        "large-01",
    ]


async def test_clusters_are_judged_by_the_objects_that_follow_the_platform_branch(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    app_head = dev.app_heads["dev"]
    drone, other, large = (dev.clusters[name] for name in ("drone-01", "drone-02", "large-01"))
    drone.run_platform(head)
    drone.run_app("functional-test", app_head)
    # Following the platform repository, but the stage branch: not what dev's gate is about.
    drone.objects["stage-preview"] = [
        {
            "reconciler": "flux",
            "kind": "Kustomization",
            "namespace": "flux-system",
            "name": "stage-preview",
            "source": {"url": dev.platform.url, "ref": "stage", "path": "./drone"},
            "attempted_revision": f"stage@sha1:{dev.platform_heads['stage']}",
            "ready": False,
            "reason": "BuildFailed",
        }
    ]
    # Only an app reconciler: nothing in this cluster follows the platform repository.
    other.run_app("functional-test", app_head)
    large.run_platform(head)
    await dev.report("drone-01", "drone-02", "large-01")

    result = await gate(session, clock, head)

    clusters = by_name(result)
    assert clusters["drone-01"].object == "flux/Kustomization/flux-system/flux-system"
    assert clusters["drone-01"].applied_revision == f"dev@sha1:{head}"
    assert clusters["drone-01"].state is ClusterState.SOAKING
    assert clusters["large-01"].object == "argocd/Application/argocd/platform"
    assert clusters["large-01"].state is ClusterState.SOAKING
    assert clusters["drone-02"].object is None
    assert (clusters["drone-02"].state, clusters["drone-02"].explanation) == (
        ClusterState.NOT_APPLIED,
        "has applied nothing yet",
    )


async def test_a_cluster_with_several_platform_objects_is_judged_by_the_furthest(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    drone = dev.clusters["drone-01"]
    drone.run_platform(head)
    # A second Kustomization on the same GitRepository, still reconciling.
    drone.objects["infrastructure"] = [
        {
            "reconciler": "flux",
            "kind": "Kustomization",
            "namespace": "flux-system",
            "name": "infrastructure",
            "source": {
                "url": drone.platform_url,
                "ref": "GitRepository/flux-system/flux-system",
                "path": "./infrastructure",
                "url_ref": "dev",
            },
            "applied_revision": f"dev@sha1:{head}",
            "attempted_revision": f"dev@sha1:{head}",
            "ready": None,
            "reason": "Progressing",
            "message": "waiting for cert-manager",
        }
    ]
    await drone.report()

    result = await gate(session, clock, head)

    judged = by_name(result)["drone-01"]
    assert judged.object == "flux/Kustomization/flux-system/infrastructure"
    assert judged.state is ClusterState.NOT_READY
    assert judged.explanation == (
        f"runs platform commit {head[:12]}, readiness unknown "
        "(Progressing: waiting for cert-manager)"
    )


async def test_one_cluster_in_every_state_counted_and_listed_furthest_first(
    fleet: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    # The store judges every expected cluster and lists a page of them; the counts cover them
    # all, each cluster in the state the policy's rules give it.
    before = fleet.platform_heads["dev"]
    target = fleet.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await fleet.harvest()
    names = {
        ClusterState.FAILED: "a-failed",
        ClusterState.NEVER_REPORTED: "b-never",
        ClusterState.STALE: "c-stale",
        ClusterState.UNKNOWN_REVISION: "d-unknown",
        ClusterState.NOT_APPLIED: "e-behind",
        ClusterState.NOT_READY: "f-not-ready",
        ClusterState.SOAKING: "g-soaking",
        ClusterState.COMPLIANT: "h-compliant",
    }
    for name in names.values():
        await fleet.add(name, "drone")
    clusters = fleet.clusters
    clusters["c-stale"].run_platform(target)
    clusters["h-compliant"].run_platform(target)
    await fleet.report("c-stale", "h-compliant")
    clock.advance(minutes=11)
    clusters["a-failed"].run_platform(before, attempted=target, ready=False, reason="BuildFailed")
    clusters["d-unknown"].run_platform("0123456789abcdef0123456789abcdef01234567")
    clusters["e-behind"].run_platform(before)
    clusters["f-not-ready"].run_platform(target, ready=None, reason="Progressing")
    clusters["g-soaking"].run_platform(target)
    await fleet.report(
        "a-failed", "d-unknown", "e-behind", "f-not-ready", "g-soaking", "h-compliant"
    )

    everything = await gate(session, clock, target)
    page = await gate(session, clock, target, limit=3, offset=2)
    allowed = await gate(session, clock, target, allow_stale=True)

    assert states(everything) == {name: state for state, name in names.items()}
    assert [cluster.name for cluster in everything.clusters.items] == list(names.values())
    assert everything.counts.by_state == {state: 1 for state in ClusterState}
    assert (everything.counts.stale, everything.counts.never_reported) == (1, 1)
    assert everything.verdict is Verdict.FAILED
    assert everything.reasons == [
        f"a-failed: reconciling platform commit {target[:12]} failed (BuildFailed)"
    ]
    assert [cluster.name for cluster in page.clusters.items] == ["c-stale", "d-unknown", "e-behind"]
    assert (page.clusters.total, page.counts) == (8, everything.counts)
    assert states(allowed)["c-stale"] is ClusterState.COMPLIANT
    assert by_name(allowed)["c-stale"].explanation.endswith("judged on its last report, 11m old")
    assert allowed.counts.by_state[ClusterState.COMPLIANT] == 2


async def test_a_commit_rewritten_away_keeps_its_ancestry_and_agrees_with_drift(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    first = dev.platform_heads["dev"]
    rewritten = dev.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await dev.harvest()
    dev.platform.checkout("dev")
    dev.platform.reset(first)
    replacement = dev.promote("Promote dev: drone config, again", {"drone/README.md": "core\n"})
    await dev.harvest()
    run_everywhere(dev, first)
    dev.clusters["drone-01"].run_platform(rewritten)
    await dev.report()
    clock.advance(minutes=10)
    await dev.report()

    # The rewritten commit is no branch's any more, but it still descends from the first.
    older = await gate(session, clock, first)
    newer = await gate(session, clock, replacement)
    await evaluate(session, clock)
    report = await drift(session, clock)

    assert older.verdict is Verdict.PASSED
    assert by_name(older)["drone-01"].state is ClusterState.COMPLIANT
    on_it = by_name(newer)["drone-01"]
    assert on_it.state is ClusterState.NOT_APPLIED
    assert on_it.explanation == (
        f"applied dev@sha1:{rewritten}, which was rewritten away (a force-push left no branch "
        f"holding it) and does not contain platform commit {replacement[:12]}"
    )
    assert newer.counts.by_state[ClusterState.UNKNOWN_REVISION] == 0
    assert rows(report)[("drone-01", f"Kustomization/{ROOT}")].revision == "diverged"
    assert all(item.revision != "unknown_revision" for item in report.items)


async def test_a_commit_rewritten_away_from_above_the_head_is_ahead_for_drift_too(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    first = dev.platform_heads["dev"]
    rewritten = dev.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await dev.harvest()
    dev.platform.checkout("dev")
    dev.platform.reset(first)
    await dev.harvest()
    run_everywhere(dev, first)
    dev.clusters["drone-01"].run_platform(rewritten)
    await dev.report()
    clock.advance(minutes=10)
    await dev.report()

    result = await gate(session, clock, first)
    await evaluate(session, clock)
    report = await drift(session, clock, include_in_sync=True)

    assert by_name(result)["drone-01"].state is ClusterState.COMPLIANT
    assert rows(report)[("drone-01", f"Kustomization/{ROOT}")].revision == "ahead"


async def test_the_soak_runs_on_through_descendants_and_restarts_after_a_break(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    first = dev.platform_heads["dev"]
    before = dev.platform.head(f"{first}~1")
    second = dev.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    third = dev.promote("Promote dev: drone config again", {"drone/README.md": "core\n"})
    await dev.harvest()
    drone = dev.clusters["drone-01"]
    run_everywhere(dev, first)
    applied_at = clock.now
    await dev.report()
    for sha in (second, third):
        clock.advance(minutes=3)
        drone.run_platform(sha)
        await dev.report()
    clock.now = applied_at + SOAK

    # Moving on to later descendants did not restart the soak of the first commit.
    passed = await gate(session, clock, first)
    assert passed.verdict is Verdict.PASSED
    assert by_name(passed)["drone-01"].soak_ends_at == applied_at + SOAK
    # The soak of the second began when the drone applied it.
    assert by_name(await gate(session, clock, second))["drone-01"].soak_ends_at == (
        applied_at + timedelta(minutes=3) + SOAK
    )

    # Back to a commit without the first one, then forward again: the soak starts anew.
    clock.advance(minutes=1)
    drone.run_platform(before)
    await dev.report()
    clock.advance(minutes=1)
    drone.run_platform(third)
    await dev.report()
    restarted = await gate(session, clock, first)
    assert restarted.verdict is Verdict.PENDING
    assert by_name(restarted)["drone-01"].state is ClusterState.SOAKING
    assert restarted.earliest_pass_at == clock.now + SOAK


async def test_a_long_soak_gives_its_end_and_names_the_clusters_that_must_report_again(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    run_everywhere(dev, head)
    applied_at = clock.now
    await dev.report()
    clock.advance(minutes=5)
    await dev.report("drone-01")

    result = await gate(session, clock, head, soak=timedelta(minutes=30))

    assert result.verdict is Verdict.PENDING
    assert result.earliest_pass_at == applied_at + timedelta(minutes=30)
    # Oldest report first: each goes stale (10 minutes) before the soak ends.
    assert result.reports_needed == ["drone-02", "large-01", "small-01", "drone-01"]
    assert result.reports_needed_count == 4


async def test_a_revision_of_no_known_form_is_unknown_to_the_gate_and_drift_saying_why(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    run_everywhere(dev, head)
    # A shortened sha: no known revision form.
    dev.clusters["drone-01"].run_platform(head[:7])
    await dev.report()

    result = await gate(session, clock, head)
    await evaluate(session, clock)
    report = await drift(session, clock)

    said = f"applied 'dev@sha1:{head[:7]}', which {UNKNOWN_FORM}"
    on_it = by_name(result)["drone-01"]
    assert (on_it.state, on_it.explanation) == (ClusterState.UNKNOWN_REVISION, said)
    row = rows(report)[("drone-01", f"Kustomization/{ROOT}")]
    assert row.revision == "unknown_revision"
    assert [(reason.reason.value, reason.detail) for reason in row.reasons] == [
        ("unknown_revision", said)
    ]
