"""Drift per cluster and object: the drift job's verdicts on a simulated fleet whose agents
report over the API as simulated time goes by, read as GET /api/v1/drift reads them."""

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from hub.background import pacing
from hub.drift.schemas import Reason
from hub.placement import repository as placement_repository
from hub.simulation import ARGO_ROOT, ROOT
from tests.hub.drifting import committed_at, drift, evaluate, reasons, rows
from tests.hub.harvest import scenario
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock

FUNCTIONAL = scenario.target_name("functional-test")
PERFORMANCE = scenario.target_name("performance-test")


@pytest.fixture
async def dev(fleet: Fleet) -> Fleet:
    """Two drones (Flux), a large (Argo CD) and a small (Flux, nothing assigned) in dev, each
    running the head of the platform branch, and of app-gitops where it has an assignment."""
    for name, cluster_type in [
        ("drone-01", "drone"),
        ("drone-02", "drone"),
        ("large-01", "large"),
        ("small-01", "small"),
    ]:
        cluster = await fleet.add(name, cluster_type)
        cluster.run_platform(fleet.platform_heads["dev"])
    for name in ("drone-01", "drone-02"):
        fleet.clusters[name].run_app("functional-test", fleet.app_heads["dev"])
    fleet.clusters["large-01"].run_app("performance-test", fleet.app_heads["dev"])
    return fleet


def run_everywhere(fleet: Fleet, sha: str) -> None:
    for cluster in fleet.clusters.values():
        cluster.run_platform(sha)


async def test_a_fleet_at_the_heads_is_not_drifted(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await dev.report()

    evaluation = await evaluate(session, clock)
    drifted = await drift(session, clock)
    everything = await drift(session, clock, include_in_sync=True)

    assert (evaluation.objects, evaluation.drifted) == (7, 0)
    assert drifted.items == []
    assert (drifted.total, drifted.summary.drifted_objects) == (0, 0)
    assert drifted.evaluated_at == clock.now
    assert everything.total == 7
    assert (everything.summary.objects, everything.summary.clusters) == (7, 4)
    assert {item.revision for item in everything.items} == {"at_head"}
    assert not any(item.drifted or item.reasons for item in everything.items)
    # Flux source objects fetch and never apply: the Kustomization that names one is judged.
    assert set(rows(everything)) == {
        ("drone-01", f"Kustomization/{ROOT}"),
        ("drone-01", f"Kustomization/{FUNCTIONAL}"),
        ("drone-02", f"Kustomization/{ROOT}"),
        ("drone-02", f"Kustomization/{FUNCTIONAL}"),
        ("large-01", f"Application/{ARGO_ROOT}"),
        ("large-01", f"Application/{PERFORMANCE}"),
        ("small-01", f"Kustomization/{ROOT}"),
    }
    root = rows(everything)[("large-01", f"Application/{ARGO_ROOT}")]
    assert root.desired is not None
    assert root.desired.branch == "dev"
    assert root.desired.head_sha == dev.platform_heads["dev"]
    assert root.desired.repository == dev.platform.url.rstrip("/")


async def test_judged_a_cluster_at_a_time_the_fleet_adds_up(
    dev: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A part per cluster id: every cluster is judged by a statement of its own.
    monkeypatch.setattr(placement_repository, "PART_CLUSTERS", 1)
    monkeypatch.setattr(pacing, "PART_PACE", 0)
    dev.clusters["drone-02"].run_platform(dev.platform_heads["dev"], ready=False)
    await dev.report()
    first = await evaluate(session, clock)
    del dev.clusters["drone-01"].objects[FUNCTIONAL]
    clock.advance(minutes=1)
    await dev.report("drone-01")

    second = await evaluate(session, clock)
    report = await drift(session, clock, include_in_sync=True)

    assert (first.objects, first.drifted, first.changed) == (7, 1, 7)
    # The object drone-01 no longer runs leaves the verdicts; nothing else changed.
    assert (second.objects, second.drifted, second.changed) == (6, 1, 1)
    assert {row: why for row, why in reasons(report).items() if why} == {
        ("drone-02", f"Kustomization/{ROOT}"): ["failing"]
    }
    assert report.total == 6


async def test_a_cluster_two_commits_behind_since_the_first_commit_it_missed(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    first = dev.platform_heads["dev"]
    second = dev.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    third = dev.promote("Promote dev: large config", {"large/README.md": "west-us\n"})
    await dev.harvest()
    run_everywhere(dev, third)
    dev.clusters["drone-01"].run_platform(first)
    await dev.report()

    await evaluate(session, clock)
    report = await drift(session, clock)

    assert reasons(report) == {("drone-01", f"Kustomization/{ROOT}"): ["behind"]}
    [item] = report.items
    [behind] = item.reasons
    missed_since = committed_at(dev.platform, second)
    assert (behind.commits, behind.since) == (2, missed_since)
    assert behind.seconds == (clock.now - missed_since).total_seconds()
    assert item.revision == "behind"
    assert item.applied_sha == first
    assert item.desired is not None
    assert item.desired.head_sha == third
    assert behind.detail.startswith(f"applied {first[:12]}, 2 commits behind dev at {third[:12]}")
    assert report.summary.reasons[Reason.BEHIND] == 1
    assert (report.summary.drifted_objects, report.summary.drifted_clusters) == (1, 1)


async def test_a_cluster_at_a_descendant_of_the_head_is_not_behind(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    # app-gitops stage branched off dev: its head descends from dev's head.
    dev.clusters["drone-01"].run_app("functional-test", dev.app_heads["stage"])
    # The platform stage head shares no history with dev's head since the initial commit.
    dev.clusters["drone-02"].run_platform(dev.platform_heads["stage"])
    await dev.report()

    await evaluate(session, clock)
    report = await drift(session, clock, include_in_sync=True)

    ahead = rows(report)[("drone-01", f"Kustomization/{FUNCTIONAL}")]
    assert (ahead.revision, ahead.drifted, ahead.reasons) == ("ahead", False, [])
    diverged = rows(report)[("drone-02", f"Kustomization/{ROOT}")]
    assert diverged.revision == "diverged"
    assert [reason.reason for reason in diverged.reasons] == [Reason.DIVERGED]
    assert report.summary.drifted_objects == 1


async def test_a_commit_not_harvested_yet_is_an_unknown_revision_until_it_is(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    newer = dev.promote("Promote dev: small config", {"small/README.md": "west-us\n"})
    dev.clusters["small-01"].run_platform(newer)
    await dev.report()

    await evaluate(session, clock)
    before = await drift(session, clock)
    await dev.harvest()
    run_everywhere(dev, newer)
    await dev.report()
    await evaluate(session, clock)
    after = await drift(session, clock)

    assert reasons(before) == {("small-01", f"Kustomization/{ROOT}"): ["unknown_revision"]}
    [reason] = before.items[0].reasons
    assert reason.detail == (
        f"applied {newer[:12]}, which is not in the harvested history of "
        f"{dev.platform.url.rstrip('/')} (yet)"
    )
    assert after.items == []


async def test_failing_reconciliation_with_its_reason_and_message(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    dev.clusters["large-01"].run_platform(
        head, ready=False, reason="SyncFailed", message="one or more objects failed to apply"
    )
    # A first reconciliation that failed: nothing applied yet.
    dev.clusters["drone-02"].run_platform(
        None, attempted=head, ready=False, reason="BuildFailed", message="kustomize build failed"
    )
    await dev.report()

    await evaluate(session, clock)
    report = await drift(session, clock)

    assert reasons(report) == {
        ("drone-02", f"Kustomization/{ROOT}"): ["not_applied", "failing"],
        ("large-01", f"Application/{ARGO_ROOT}"): ["failing"],
    }
    failing = rows(report)[("large-01", f"Application/{ARGO_ROOT}")].reasons[0]
    assert (failing.reconciler_reason, failing.message) == (
        "SyncFailed",
        "one or more objects failed to apply",
    )
    assert failing.detail == "Ready is False (SyncFailed: one or more objects failed to apply)"
    assert report.summary.reasons[Reason.FAILING] == 2


async def test_stale_agents_by_the_hubs_clock_and_clusters_that_never_reported(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await dev.report()
    await evaluate(session, clock)
    await dev.add("drone-03", "drone")
    last_report = clock.now
    clock.advance(minutes=10)
    await dev.report("drone-02")

    at_threshold = await drift(session, clock)
    clock.advance(seconds=1)
    # No new evaluation: staleness is judged when asked, with the hub's clock.
    report = await drift(session, clock)

    assert set(rows(at_threshold)) == {("drone-03", None)}
    assert set(rows(report)) == {
        ("drone-01", f"Kustomization/{ROOT}"),
        ("drone-01", f"Kustomization/{FUNCTIONAL}"),
        ("drone-03", None),
        ("large-01", f"Application/{ARGO_ROOT}"),
        ("large-01", f"Application/{PERFORMANCE}"),
        ("small-01", f"Kustomization/{ROOT}"),
    }
    assert set(map(tuple, reasons(report).values())) == {("stale",)}
    silent = rows(report)[("large-01", f"Application/{ARGO_ROOT}")]
    [stale] = silent.reasons
    assert (silent.agent, stale.since) == ("stale", last_report)
    assert stale.seconds == 601.0
    assert stale.detail == "its agent has been silent for 10m1s"
    never = rows(report)[("drone-03", None)]
    assert (never.agent, never.object, never.last_seen_at) == ("never_reported", None, None)
    assert never.reasons[0].detail == "registered, but its agent never reported"
    assert report.summary.reasons[Reason.STALE] == 6
    assert report.summary.drifted_clusters == 4


async def test_live_drift_from_flux_drifted_and_argo_cd_out_of_sync(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    # The agent maps Flux's Drifted condition and Argo CD's OutOfSync to `drifted`.
    dev.clusters["drone-01"].objects[FUNCTIONAL][-1]["drifted"] = True
    dev.clusters["large-01"].objects[ARGO_ROOT][-1]["drifted"] = True
    await dev.report()

    await evaluate(session, clock)
    report = await drift(session, clock)

    assert reasons(report) == {
        ("drone-01", f"Kustomization/{FUNCTIONAL}"): ["live_drift"],
        ("large-01", f"Application/{ARGO_ROOT}"): ["live_drift"],
    }
    details = {key: item.reasons[0].detail for key, item in rows(report).items()}
    assert details[("large-01", f"Application/{ARGO_ROOT}")] == (
        "Argo CD reports the application OutOfSync"
    )
    assert details[("drone-01", f"Kustomization/{FUNCTIONAL}")].startswith("Flux reports Drifted")


async def test_a_config_mismatch_when_the_promoted_commit_changed_an_assignments_config(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    config = scenario.CONFIG[("dev", "drone")] | {"REGION": "West Europe", "REPLICAS": "3"}
    namespace = scenario.namespace_of("dev", "drone", "functional-test")
    second = dev.promote(
        "Promote dev: drone in West Europe",
        {f"drone/{FUNCTIONAL}/platform-config.yaml": scenario.config_yaml(namespace, config)},
    )
    await dev.harvest()
    await dev.report()

    await evaluate(session, clock)
    report = await drift(session, clock)

    assert reasons(report) == {
        ("drone-01", f"Kustomization/{ROOT}"): ["behind", "config_mismatch"],
        ("drone-02", f"Kustomization/{ROOT}"): ["behind", "config_mismatch"],
        # Its cluster type's assignments did not change: only behind.
        ("large-01", f"Application/{ARGO_ROOT}"): ["behind"],
        ("small-01", f"Kustomization/{ROOT}"): ["behind"],
    }
    mismatch = rows(report)[("drone-01", f"Kustomization/{ROOT}")].reasons[1]
    assert mismatch.config is not None
    [changed] = mismatch.config
    assert changed.deployment_target == FUNCTIONAL
    assert changed.keys == ["REGION", "REPLICAS"]
    assert changed.applied_config_hash != changed.desired_config_hash
    assert mismatch.detail == (
        f"platform config at the applied commit differs from dev at {second[:12]} for "
        f"{FUNCTIONAL} (REGION, REPLICAS)"
    )
    run_everywhere(dev, second)
    await dev.report()
    await evaluate(session, clock)
    assert (await drift(session, clock)).items == []


async def test_objects_following_no_harvested_branch_are_listed_not_judged(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    helm = {
        "reconciler": "flux",
        "kind": "HelmRelease",
        "namespace": "monitoring",
        "name": "prometheus",
        "source": {
            "url": "https://prometheus-community.github.io/helm-charts",
            "ref": "HelmRepository/flux-system/prometheus",
        },
        "applied_revision": "58.2.1",
        "ready": False,
        "reason": "UpgradeFailed",
    }
    other = {
        "reconciler": "argocd",
        "kind": "Application",
        "namespace": "argocd",
        "name": "tooling",
        "source": {"url": "https://github.com/contoso/tooling.git", "ref": "main", "path": "."},
        "applied_revision": "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
        "ready": True,
    }
    dev.clusters["drone-01"].objects["extra"] = [helm, other]
    await dev.report()

    await evaluate(session, clock)
    report = await drift(session, clock)
    everything = await drift(session, clock, include_in_sync=True)

    assert reasons(report) == {("drone-01", "HelmRelease/prometheus"): ["failing"]}
    assert report.items[0].desired is None
    assert report.items[0].revision == "untracked"
    # Counted whether drifted or not: how much of the fleet drift cannot judge behind.
    assert report.summary.untracked == 2
    tooling = rows(everything)[("drone-01", "Application/tooling")]
    assert (tooling.revision, tooling.drifted, tooling.desired) == ("untracked", False, None)
    assert everything.summary.untracked == 2


async def test_the_verdict_is_the_last_evaluations_and_says_when_that_was(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await dev.report()
    await evaluate(session, clock)
    judged_at = clock.now
    clock.advance(seconds=20)
    dev.clusters["drone-01"].run_platform(None, ready=False, reason="BuildFailed")
    await dev.report("drone-01")

    stale_verdict = await drift(session, clock)
    await evaluate(session, clock)
    fresh_verdict = await drift(session, clock)

    assert (stale_verdict.evaluated_at, stale_verdict.items) == (judged_at, [])
    assert fresh_verdict.evaluated_at == judged_at + timedelta(seconds=20)
    assert reasons(fresh_verdict) == {
        ("drone-01", f"Kustomization/{ROOT}"): ["not_applied", "failing"]
    }


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, 4),
        ({"include_in_sync": True}, 8),
        ({"reasons": [Reason.STALE]}, 4),
        ({"reasons": [Reason.FAILING, Reason.LIVE_DRIFT]}, 1),
    ],
)
async def test_pages_of_any_size_add_up_to_the_whole_listing(
    dev: Fleet, session: AsyncSession, clock: FakeClock, options: dict[str, Any], expected: int
) -> None:
    dev.clusters["drone-02"].run_app("functional-test", None, ready=False, reason="BuildFailed")
    await dev.report()
    await dev.add("drone-03", "drone")
    await evaluate(session, clock)
    clock.advance(minutes=11)
    # drone-01 and large-01 go on reporting; drone-02 and small-01 fall silent.
    await dev.report("drone-01", "large-01")

    whole = await drift(session, clock, **options)

    assert whole.total == whole.summary.objects == len(whole.items) == expected
    for limit in (1, 2, 3, 5):
        pages = [
            await drift(session, clock, limit=limit, offset=offset, **options)
            for offset in range(0, expected + limit, limit)
        ]
        assert [item for page in pages for item in page.items] == whole.items
        assert {page.total for page in pages} == {expected}


async def test_rows_come_in_promotion_order_then_by_cluster_and_object(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    stage = await dev.add("drone-s1", "drone", "stage")
    stage.run_platform(dev.platform_heads["stage"])
    await dev.report()
    await dev.add("drone-03", "drone")
    await evaluate(session, clock)

    report = await drift(session, clock, include_in_sync=True)

    assert list(rows(report)) == [
        ("drone-01", f"Kustomization/{ROOT}"),
        ("drone-01", f"Kustomization/{FUNCTIONAL}"),
        ("drone-02", f"Kustomization/{ROOT}"),
        ("drone-02", f"Kustomization/{FUNCTIONAL}"),
        ("drone-03", None),
        ("large-01", f"Application/{PERFORMANCE}"),
        ("large-01", f"Application/{ARGO_ROOT}"),
        ("small-01", f"Kustomization/{ROOT}"),
        ("drone-s1", f"Kustomization/{ROOT}"),
    ]
