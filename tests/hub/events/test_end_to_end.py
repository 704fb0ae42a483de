"""Events end to end, as a subscriber sees them: `fleetmark serve` as a process of its own, a
subscription made through its API to a receiver on loopback, and a fleet whose agents report
over HTTP. A cluster goes silent and reports again, a promotion waits for a suspended cluster,
and each gate passes once its clusters have soaked: every event arrives signed, a CloudEvent
of this hub, and each subject's in the order the hub judged them."""

from pathlib import Path

from tests.hub.conftest import ScenarioRemotes
from tests.hub.events.live import (
    LiveHub,
    by_subject,
    check_order,
    checked,
    delivered,
    harvest,
    heads,
    in_published_order,
    member,
    prepare,
    reporting_fleet,
    wait_for_event,
)
from tests.hub.events.receiver import receiving

DRIFT = "environments/dev/drift"
STAGE_CLUSTERS = "environments/stage/clusters"
PASSED = "fleetmark.gate.passed"
CLUSTERS = {"drone-dev-1": "dev", "drone-dev-2": "dev", "drone-stage-1": "stage"}


def test_a_subscriber_gets_each_change_signed_and_in_order(
    migrated_database: str, pristine_remotes: ScenarioRemotes, tmp_path: Path
) -> None:
    remotes = pristine_remotes
    live = LiveHub.create(migrated_database, tmp_path)
    first, stage = remotes.platform_heads["dev"], remotes.platform_heads["stage"]
    with receiving() as receiver, live.served() as hub, live.client(hub) as client:
        secret = prepare(client, remotes, receiver.url)
        with reporting_fleet(hub, live.admin, remotes, CLUSTERS) as running:
            received = receiver.received
            wait_for_event(received, PASSED, f"gates/dev/{first}")
            wait_for_event(received, PASSED, f"gates/stage/{stage}")

            # A promotion to dev that drone-dev-2, suspended, does not follow; drone-stage-1
            # falls silent meanwhile.
            second = remotes.platform.commit("Promote dev: west-us", {"large/README.md": "-\n"})
            harvest(client)
            with running.lock:
                member(running, "drone-dev-2").suspended = True
                member(running, "drone-stage-1").silent = True
                running.simulation.heads["dev"] = heads(remotes, "dev")
            wait_for_event(received, "fleetmark.drift.started", DRIFT)
            wait_for_event(received, "fleetmark.cluster.stale", STAGE_CLUSTERS)
            wait_for_event(received, "fleetmark.gate.pending", f"gates/stage/{stage}")

            with running.lock:
                member(running, "drone-dev-2").suspended = False
                member(running, "drone-stage-1").silent = False
            wait_for_event(received, "fleetmark.drift.resolved", DRIFT)
            wait_for_event(received, "fleetmark.cluster.recovered", STAGE_CLUSTERS)
            wait_for_event(received, PASSED, f"gates/dev/{second}")
            wait_for_event(received, PASSED, f"gates/stage/{stage}", times=2)
        requests, deliveries = delivered(client, lambda: receiver.received)

    events = checked(requests, secret)
    check_order(events)
    in_published_order(events, deliveries)
    subjects = by_subject(events)
    started, resolved = subjects[DRIFT]
    assert started["type"] == "fleetmark.drift.started"
    assert "drone-dev-2" in started["data"]["clusters"]
    assert (resolved["type"], resolved["data"]["clusters"]) == ("fleetmark.drift.resolved", [])
    assert [(e["type"], e["data"]["clusters"]) for e in subjects[STAGE_CLUSTERS]] == [
        ("fleetmark.cluster.stale", ["drone-stage-1"]),
        ("fleetmark.cluster.recovered", ["drone-stage-1"]),
    ]
    # stage's gate held while its cluster was silent, and passed again once it had soaked.
    assert [e["type"] for e in subjects[f"gates/stage/{stage}"]] == [
        PASSED,
        "fleetmark.gate.pending",
        PASSED,
    ]
    # The promotion's gate, pending from the start, passed once drone-dev-2 had followed.
    assert [
        (e["type"], e["data"]["previous_verdict"]) for e in subjects[f"gates/dev/{second}"]
    ] == [(PASSED, "pending")]
