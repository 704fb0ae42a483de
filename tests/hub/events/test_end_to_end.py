"""Events end to end, as a subscriber sees them: `fleetmark serve` as a process of its own, a
subscription made through its API to a receiver on loopback, and a fleet whose agents report
over HTTP. A cluster goes silent and reports again, a promotion waits for a suspended cluster,
and each gate passes once its clusters have soaked: every event arrives signed, a CloudEvent
of this hub, and each subject's in the order the hub judged them."""

from pathlib import Path

from tests.hub.conftest import ScenarioRemotes
from tests.hub.events.live import (
    SUBSCRIPTION,
    LiveHub,
    arrived,
    by_subject,
    check_order,
    checked,
    delivered,
    reporting_fleet,
    harvest,
    heads,
    in_published_order,
    member,
    prepare,
    wait_for,
)
from tests.hub.events.receiver import receiving

DRIFT = "environments/dev/drift"
STAGE_CLUSTERS = "environments/stage/clusters"
CLUSTERS = {"drone-dev-1": "dev", "drone-dev-2": "dev", "drone-stage-1": "stage"}


def test_a_subscriber_gets_each_change_signed_and_in_order(
    migrated_database: str, scenario_remotes: ScenarioRemotes, tmp_path: Path
) -> None:
    remotes = scenario_remotes
    live = LiveHub.create(migrated_database, tmp_path)
    first = remotes.platform_heads["dev"]
    with receiving() as receiver, live.served() as hub, live.client(hub) as client:
        secret = prepare(client, remotes, receiver.url)
        with reporting_fleet(hub, live.admin, remotes, CLUSTERS) as running:
            received = receiver.received
            wait_for(
                "passed gate",
                lambda: arrived(received, "fleetmark.gate.passed", f"gates/dev/{first}"),
            )

            # A promotion to dev that drone-dev-2, suspended, does not follow; drone-stage-1
            # falls silent meanwhile.
            second = remotes.platform.commit(
                "Promote dev: west-us", {"large/README.md": "west-us\n"}
            )
            harvest(client)
            with running.lock:
                member(running, "drone-dev-2").suspended = True
                member(running, "drone-stage-1").silent = True
                running.simulation.heads["dev"] = heads(remotes, "dev")
            wait_for("drift", lambda: arrived(received, "fleetmark.drift.started", DRIFT))
            wait_for(
                "stale cluster",
                lambda: arrived(received, "fleetmark.cluster.stale", STAGE_CLUSTERS),
            )

            with running.lock:
                member(running, "drone-dev-2").suspended = False
                member(running, "drone-stage-1").silent = False
            wait_for("drift resolved", lambda: arrived(received, "fleetmark.drift.resolved", DRIFT))
            wait_for(
                "recovery", lambda: arrived(received, "fleetmark.cluster.recovered", STAGE_CLUSTERS)
            )
            wait_for(
                "promotion's gate",
                lambda: arrived(received, "fleetmark.gate.passed", f"gates/dev/{second}"),
            )
        requests, deliveries = delivered(client, lambda: receiver.received)

    events = checked(requests, secret)
    check_order(events)
    in_published_order(events, deliveries)
    subjects = by_subject(events)
    print(
        {subject: [event["type"] for event in sequence] for subject, sequence in subjects.items()}
    )
