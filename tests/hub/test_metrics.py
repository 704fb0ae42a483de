"""/metrics on a hub served on a real port over a committed store seeded by the simulated
fleet: the fleet gauges are the fleet's numbers, every replica exports the same ones, and
per-cluster series only when asked for."""

from collections.abc import Iterable
from datetime import timedelta

import httpx
import pytest

from hub.git.urls import normalise_repository_url
from tests.agent.conftest import LiveHub
from tests.hub.conftest import ServedFleet
from tests.hub.drifting import evaluate
from tests.hub.harvest import scenario
from tests.support import Samples, samples

CLUSTERS = [
    ("drone-dev", "dev", "drone"),
    ("large-dev", "dev", "large"),
    ("small-dev", "dev", "small"),
    ("drone-stage", "stage", "drone"),
]
# What the fleet gauges are: the same on every replica, read from the store.
FLEET_METRICS = (
    "fleetmark_fleet_snapshot_timestamp_seconds",
    "fleetmark_clusters",
    "fleetmark_objects",
    "fleetmark_objects_live_drift",
    "fleetmark_drifted_clusters",
    "fleetmark_drifted_objects",
    "fleetmark_drifted_objects_by_reason",
    "fleetmark_harvest_lag_seconds",
    "fleetmark_harvest_errors",
    "fleetmark_harvest_fetch_failing",
)


async def scrape(hub: LiveHub) -> Samples:
    async with httpx.AsyncClient(base_url=hub.url) as client:
        response = await client.get("/metrics")
    assert response.status_code == 200
    return samples(response.text)


def named(samples: Samples, name: str, *labels: str) -> dict[tuple[str, ...], float]:
    """One metric's samples, by the values of `labels`."""
    return {
        tuple(dict(found)[label] for label in labels): value
        for (metric, found), value in samples.items()
        if metric == name
    }


def nonzero(values: dict[tuple[str, ...], float]) -> dict[tuple[str, ...], float]:
    return {key: value for key, value in values.items() if value}


def fleet(samples: Samples) -> Samples:
    return {key: value for key, value in samples.items() if key[0] in FLEET_METRICS}


@pytest.fixture
async def served(served_fleet: ServedFleet) -> ServedFleet:
    """dev: drone-dev a commit behind, large-dev behind and failing to sync the newer commit,
    small-dev never reported; stage: drone-stage at its head, silent for eleven minutes (the
    stale threshold is ten). The drift job judged them a minute ago."""
    live, clock = served_fleet, served_fleet.clock
    live.hub.settings["metrics_refresh_interval"] = 0
    heads = scenario.build_platform(live.platform, live.app.url)
    scenario.build_app(live.app)
    newer = live.platform.commit("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await live.start(CLUSTERS)
    async with live.clusters() as clusters:
        clusters["drone-stage"].run_platform(heads["stage"])
        await clusters["drone-stage"].report()
        clock.advance(minutes=11)
        clusters["drone-dev"].run_platform(heads["dev"])
        clusters["large-dev"].run_platform(
            heads["dev"], attempted=newer, ready=False, reason="SyncFailed"
        )
        for name in ("drone-dev", "large-dev"):
            await clusters[name].report()
    clock.advance(minutes=1)
    async with live.sessions() as session:
        await evaluate(session, clock)
    return live


async def test_the_fleet_gauges_are_the_fleet(served: ServedFleet) -> None:
    samples = await scrape(served.hub)

    clusters = named(samples, "fleetmark_clusters", "environment", "cluster_type", "state")
    assert nonzero(clusters) == {
        ("dev", "drone", "reporting"): 1,
        ("dev", "large", "reporting"): 1,
        ("dev", "small", "never_reported"): 1,
        ("stage", "drone", "stale"): 1,
    }
    # Every state of every group is there, at zero when no cluster is in it.
    assert len(clusters) == 4 * 3
    objects = named(samples, "fleetmark_objects", "environment", "cluster_type", "state")
    # A Flux cluster runs a GitRepository and a Kustomization, an Argo CD one an Application.
    assert nonzero(objects) == {
        ("dev", "drone", "ready"): 2,
        ("dev", "large", "failing"): 1,
        ("stage", "drone", "ready"): 2,
    }

    assert named(samples, "fleetmark_drifted_clusters", "environment") == {
        ("dev",): 3,
        ("stage",): 1,
    }
    # drone-dev's and large-dev's root reconcilers, and small-dev (no objects: one row).
    assert named(samples, "fleetmark_drifted_objects", "environment") == {
        ("dev",): 3,
        ("stage",): 1,
    }
    by_reason = named(samples, "fleetmark_drifted_objects_by_reason", "environment", "reason")
    assert nonzero(by_reason) == {
        ("dev", "behind"): 2,
        ("dev", "failing"): 1,
        ("dev", "stale"): 1,
        ("stage", "stale"): 1,
    }
    assert by_reason[("dev", "config_mismatch")] == 0

    # Harvested when the fleet started, twelve minutes ago by the hub's clock.
    repositories = [(served.platform.url, "platform"), (served.app.url, "app")]
    lag = named(samples, "fleetmark_harvest_lag_seconds", "repository", "role")
    assert {key: lag[key] for key in normalised(repositories)} == dict.fromkeys(
        normalised(repositories), 720.0
    )
    assert named(samples, "fleetmark_harvest_errors", "repository", "role") == dict.fromkeys(
        normalised(repositories), 0
    )
    assert named(samples, "fleetmark_harvest_fetch_failing", "repository", "role") == (
        dict.fromkeys(normalised(repositories), 0)
    )
    assert samples[("fleetmark_fleet_snapshot_timestamp_seconds", frozenset())] == (
        served.clock.now.timestamp()
    )
    # No series per cluster unless asked for.
    assert not [key for key in samples if dict(key[1]).get("cluster")]


def normalised(repositories: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The repositories as the hub names them: normalised URLs."""
    return [(normalise_repository_url(url), role) for url, role in repositories]


async def test_every_replica_exports_the_same_fleet_gauges(served: ServedFleet) -> None:
    replica = LiveHub(served.hub.database_url, served.clock, metrics_refresh_interval=0)
    replica.start()
    try:
        first, second = await scrape(served.hub), await scrape(replica)
    finally:
        replica.stop()

    assert fleet(first) == fleet(second)
    assert named(first, "fleetmark_clusters", "environment", "cluster_type", "state")


async def test_per_cluster_series_when_asked_for(served: ServedFleet) -> None:
    replica = LiveHub(
        served.hub.database_url,
        served.clock,
        metrics_refresh_interval=0,
        metrics_per_cluster=True,
    )
    replica.start()
    try:
        samples = await scrape(replica)
    finally:
        replica.stop()

    labels = ("environment", "cluster_type", "cluster", "state")
    assert named(samples, "fleetmark_cluster_agent", *labels) == {
        ("dev", "drone", "drone-dev", "reporting"): 1,
        ("dev", "large", "large-dev", "reporting"): 1,
        ("dev", "small", "small-dev", "never_reported"): 1,
        ("stage", "drone", "drone-stage", "stale"): 1,
    }
    reported = named(samples, "fleetmark_cluster_last_report_timestamp_seconds", *labels[:3])
    now = served.clock.now
    assert reported == {
        ("dev", "drone", "drone-dev"): (now - timedelta(minutes=1)).timestamp(),
        ("dev", "large", "large-dev"): (now - timedelta(minutes=1)).timestamp(),
        ("stage", "drone", "drone-stage"): (now - timedelta(minutes=12)).timestamp(),
    }
    assert nonzero(named(samples, "fleetmark_cluster_objects", *labels)) == {
        ("dev", "drone", "drone-dev", "ready"): 2,
        ("dev", "large", "large-dev", "failing"): 1,
        ("stage", "drone", "drone-stage", "ready"): 2,
    }
    # The fleet gauges are those of a hub without per-cluster series.
    assert fleet(samples) == fleet(await scrape(served.hub))


async def test_a_snapshot_is_reused_until_it_is_due(served: ServedFleet) -> None:
    replica = LiveHub(
        served.hub.database_url, served.clock, metrics_refresh_interval=timedelta(hours=1)
    )
    replica.start()
    try:
        before = await scrape(replica)
        async with served.clusters() as clusters:
            await clusters["small-dev"].report()
        cached, fresh = await scrape(replica), await scrape(served.hub)
    finally:
        replica.stop()

    key = ("dev", "small", "never_reported")
    assert named(before, "fleetmark_clusters", "environment", "cluster_type", "state")[key] == 1
    assert named(cached, "fleetmark_clusters", "environment", "cluster_type", "state")[key] == 1
    assert named(fresh, "fleetmark_clusters", "environment", "cluster_type", "state")[key] == 0
