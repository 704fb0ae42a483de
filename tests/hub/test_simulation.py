"""The simulated fleet's rounds, as `fleetmark demo` drives it: clusters catch up with the heads
one per environment and round, unless held, and a failing cluster's app reconcilers fail."""

from datetime import UTC, datetime

from hub.simulation import Failure, Simulation

NOW = datetime(2026, 11, 26, tzinfo=UTC)


def fleet() -> Simulation:
    simulation = Simulation.made_up(clusters_per_type=2, seed=7)
    simulation.release_every = None
    return simulation


def settle(simulation: Simulation) -> None:
    for _ in range(len(simulation.clusters) + 1):
        simulation.step()


def kustomizations(simulation: Simulation, name: str) -> dict[str, dict[str, object]]:
    [cluster] = [found for found in simulation.clusters if found.name == name]
    return {
        record["name"]: record
        for record in simulation.report(cluster, NOW)["objects"]
        if record["kind"] == "Kustomization"
    }


def test_clusters_catch_up_with_new_heads_but_a_suspended_one_stays_behind() -> None:
    simulation = fleet()
    old = simulation.heads["dev"]
    held = simulation.clusters[0]
    held.suspended = True
    simulation.heads["dev"] = new = ("a" * 40, "b" * 40)

    settle(simulation)

    dev = [cluster for cluster in simulation.clusters if cluster.environment == "dev"]
    assert held.applied == old
    assert all(cluster.applied == new for cluster in dev if cluster is not held)
    # It says so: its reconcilers report suspended, its source objects still fetch.
    suspended = {
        record["kind"]
        for record in simulation.report(held, NOW)["objects"]
        if record.get("suspended")
    }
    assert suspended == {"Kustomization"}
    assert not any(record.get("suspended") for record in simulation.report(dev[1], NOW)["objects"])


def test_a_failing_cluster_applies_the_platform_and_its_apps_fail() -> None:
    simulation = fleet()
    failing = next(cluster for cluster in simulation.clusters if cluster.reconciler == "flux")
    failing.failure = Failure("HealthCheckFailed", "ImagePullBackOff")
    platform, app = "c" * 40, "d" * 40
    simulation.heads[failing.environment] = (platform, app)

    settle(simulation)

    objects = kustomizations(simulation, failing.name)
    assert objects["flux-system"]["ready"] is True
    assert objects["flux-system"]["applied_revision"].endswith(platform)
    app_objects = [record for name, record in objects.items() if name != "flux-system"]
    assert app_objects
    for record in app_objects:
        assert record["ready"] is False
        assert record["reason"] == "HealthCheckFailed"
        assert record["message"] == "ImagePullBackOff"
        assert record["attempted_revision"].endswith(app)
        assert not record["applied_revision"].endswith(app)


def test_a_silent_cluster_sends_no_report() -> None:
    simulation = fleet()
    simulation.clusters[1].silent = True

    assert simulation.clusters[1] not in simulation.reporting()
    assert len(simulation.reporting()) == len(simulation.clusters) - 1
