"""Events through faults: the receiver stops answering while the hub sends, the hub is killed
(SIGKILL) with events pending, and the receiver's address refuses connections while both are
down; then the receiver and the hub (on the same database) return. Every event arrives, an
event arrives twice only under its one id, and each subject's events in order.

FLEETMARK_TEST_OUTAGE_SECONDS sets how long both are down (default 1). The agents' reports
fail meanwhile: after more than the 2 s of silence that makes a cluster stale, the restarted
hub may announce its clusters stale and recovered too.
"""

import os
import time
from contextlib import ExitStack
from pathlib import Path

from tests.hub.conftest import ScenarioRemotes
from tests.hub.events.live import (
    LiveHub,
    by_subject,
    check_order,
    checked,
    delivered,
    in_published_order,
    member,
    pending,
    prepare,
    reporting_fleet,
    wait_for,
    wait_for_event,
)
from tests.hub.events.receiver import receiving
from tests.served import free_port

OUTAGE = float(os.environ.get("FLEETMARK_TEST_OUTAGE_SECONDS", "1"))
DEV_CLUSTERS = "environments/dev/clusters"
STAGE_CLUSTERS = "environments/stage/clusters"
CLUSTERS = {"drone-dev-1": "dev", "drone-stage-1": "stage"}


def test_every_event_arrives_after_the_receiver_and_the_hub_were_down(
    migrated_database: str, pristine_remotes: ScenarioRemotes, tmp_path: Path
) -> None:
    # The receiver's silence outlasts the hub: its request is cut by the kill, not a timeout.
    live = LiveHub.create(migrated_database, tmp_path, FLEETMARK_WEBHOOK_TIMEOUT="600")
    receiver_port, hub_port = free_port(), free_port()
    head = pristine_remotes.platform_heads["dev"]
    with ExitStack() as agents:
        with (
            receiving(port=receiver_port) as receiver,
            live.served("first.log", hub_port) as hub,
            live.client(hub) as client,
        ):
            secret = prepare(client, pristine_remotes, receiver.url)
            running = agents.enter_context(
                reporting_fleet(hub, live.admin, pristine_remotes, CLUSTERS)
            )
            wait_for_event(receiver.received, "fleetmark.gate.passed", f"gates/dev/{head}")

            # The receiver takes the next requests and never answers them.
            receiver.hold()
            held = len(receiver.received)
            with running.lock:
                member(running, "drone-dev-1").silent = True
            wait_for(
                "events pending",
                lambda: ("fleetmark.cluster.stale", DEV_CLUSTERS) in pending(client),
            )
            wait_for("a request held", lambda: len(receiver.received) > held)
            with running.lock:
                member(running, "drone-dev-1").silent = False
                member(running, "drone-stage-1").silent = True
            wait_for(
                "events pending",
                lambda: (
                    pending(client)
                    >= {
                        ("fleetmark.cluster.recovered", DEV_CLUSTERS),
                        ("fleetmark.cluster.stale", STAGE_CLUSTERS),
                    }
                ),
            )
            hub.process.kill()
            hub.process.wait()
            before = list(receiver.received)
        with running.lock:
            member(running, "drone-stage-1").silent = False
        # Both down: the receiver's address refuses connections, no hub runs.
        time.sleep(OUTAGE)

        with (
            receiving(port=receiver_port) as receiver,
            live.served("second.log", hub_port) as hub,
            live.client(hub) as client,
        ):
            wait_for_event(receiver.received, "fleetmark.cluster.recovered", STAGE_CLUSTERS)
            requests, deliveries = delivered(client, lambda: before + receiver.received)

    events = checked(requests, secret)
    check_order(events)
    in_published_order(events, deliveries)
    # The requests the hub was killed waiting on came again after the restart, with their ids.
    ids = [request.document["id"] for request in requests]
    assert all(ids.count(request.document["id"]) >= 2 for request in before[held:])
    subjects = by_subject(events)
    for subject in (DEV_CLUSTERS, STAGE_CLUSTERS):
        assert subjects[subject][-1]["type"] == "fleetmark.cluster.recovered", subject
