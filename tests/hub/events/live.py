"""Events end to end: `fleetmark serve` as a process of its own (tests/served.py) on a database
of the test's, a subscription made through its API to a receiver on loopback, and a simulated
fleet whose agents report over HTTP what the scenario's harvested repositories ask of them.

What a careful receiver checks of each request is here too: the signature over the raw body,
the CloudEvent, the id, and the order of each subject's events.
"""

import hashlib
import hmac
import json
import secrets
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from hub.cli.demo import Fleet
from hub.client import HubClient
from hub.client.schemas.subscriptions import DeliveryInfo
from hub.simulation import ROOT, Followed, SimulatedCluster, Simulation, folder
from tests.hub.conftest import ScenarioRemotes
from tests.hub.events.receiver import Received
from tests.hub.harvest.scenario import target_name
from tests.served import ServedHub, hub_environment, served_hub

SOURCE = "https://fleetmark.test"
SUBSCRIPTION = "proof"
# The hub's jobs at a pace that shows each event within a second or two: clusters stale after
# 2 s of silence, drift announced after 1 s, the gate's soak 2 s.
PACED = {
    "FLEETMARK_PUBLIC_URL": SOURCE,
    "FLEETMARK_WEBHOOK_ALLOW_PRIVATE": "true",
    "FLEETMARK_HARVEST_ENABLED": "false",
    "FLEETMARK_STALE_AFTER_SECONDS": "2",
    "FLEETMARK_DRIFT_INTERVAL": "0.5",
    "FLEETMARK_DRIFT_GRACE": "1",
    "FLEETMARK_GATE_ANSWERS_INTERVAL": "0.5",
    "FLEETMARK_GATE_ANSWERS_SOAK": "2",
    "FLEETMARK_EVENT_DELIVERY_INTERVAL": "0.2",
    "FLEETMARK_ENV_DIFF_INTERVAL": "3600",
    "FLEETMARK_DORA_INTERVAL": "3600",
}
# Seconds between two reports of each cluster.
REPORT_EVERY = 0.3
WAIT = 30.0
# Each opening type and the type that closes it.
CLOSING = {
    "fleetmark.cluster.stale": "fleetmark.cluster.recovered",
    "fleetmark.drift.started": "fleetmark.drift.resolved",
    "fleetmark.harvest.failing": "fleetmark.harvest.recovered",
    "fleetmark.schedule.failed": "fleetmark.schedule.recovered",
}
# The app target each (environment, cluster type) runs in the scenario.
TARGETS = {("dev", "drone"): "functional-test", ("stage", "drone"): "uat-test"}


@dataclass
class LiveHub:
    """The served hub's database, data folder and admin token, to serve it (again)."""

    database_url: str
    folder: Path
    admin: str
    variables: dict[str, str]

    @classmethod
    def create(cls, database_url: str, folder: Path, **variables: str) -> "LiveHub":
        admin = "fma_" + secrets.token_urlsafe(32)
        (folder / "admin.token").write_text(admin + "\n")
        return cls(database_url, folder, admin, variables)

    @contextmanager
    def served(self, log: str = "hub.log", port: int | None = None) -> Iterator[ServedHub]:
        environment = hub_environment(
            self.database_url,
            self.folder / "data",
            FLEETMARK_ADMIN_TOKEN_FILE=str(self.folder / "admin.token"),
            **PACED,
            **self.variables,
        )
        with served_hub(environment, self.folder / log, port) as hub:
            yield hub

    def client(self, hub: ServedHub) -> HubClient:
        """A client of the served hub with the admin token, to use in a `with` block."""
        return HubClient(hub.url, token=self.admin)


def prepare(client: HubClient, remotes: ScenarioRemotes, receiver_url: str) -> str:
    """The platform repository harvested and the subscription made; its secret."""
    client.add_repository(remotes.platform.url, role="platform", branches=["dev", "stage"])
    harvest(client)
    return client.create_subscription(SUBSCRIPTION, receiver_url).secret


def harvest(client: HubClient) -> None:
    run = client.wait_for_run(client.start_harvest(), interval=0.1)
    assert run.outcome == "succeeded", run


def cluster(remotes: ScenarioRemotes, name: str, environment: str) -> SimulatedCluster:
    """A drone of `environment` following the scenario's platform folder and app target."""
    target = TARGETS[environment, "drone"]
    return SimulatedCluster(
        name=name,
        environment=environment,
        cluster_type="drone",
        labels={},
        reconciler="flux",
        followed=(
            Followed(ROOT, remotes.platform.url, folder("flux", "drone"), app=False),
            Followed(target_name(target), remotes.app.url, f"./{target}", app=True),
        ),
        applied=heads(remotes, environment),
    )


def heads(remotes: ScenarioRemotes, environment: str) -> tuple[str, str]:
    return remotes.platform.head(environment), remotes.app.head(environment)


def reporting_fleet(
    hub: ServedHub, admin: str, remotes: ScenarioRemotes, clusters: dict[str, str]
) -> Fleet:
    """The clusters (name: environment) on their environments' heads, reporting every
    REPORT_EVERY seconds once entered."""
    simulation = Simulation(
        clusters=[cluster(remotes, name, environment) for name, environment in clusters.items()],
        heads={environment: heads(remotes, environment) for environment in ("dev", "stage")},
    )
    return Fleet(hub.url, admin, simulation, REPORT_EVERY)


def member(fleet: Fleet, name: str) -> SimulatedCluster:
    return next(found for found in fleet.simulation.clusters if found.name == name)


def wait_for(what: str, condition: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.1)


def wait_for_event(received: list[Received], type_: str, subject: str, times: int = 1) -> None:
    wait_for(f"{type_} about {subject}", lambda: arrived(received, type_, subject, times))


def arrived(received: list[Received], type_: str, subject: str, times: int = 1) -> bool:
    """Whether `times` events of the type about the subject arrived (each counted once)."""
    ids = {
        request.document["id"]
        for request in list(received)
        if request.document["type"] == type_ and request.document["subject"] == subject
    }
    return len(ids) >= times


def delivered(
    client: HubClient, received: Callable[[], list[Received]]
) -> tuple[list[Received], list[DeliveryInfo]]:
    """The requests received and the subscription's deliveries (oldest first), at a moment
    when every delivery is delivered and every request received is one of them."""
    found: tuple[list[Received], list[DeliveryInfo]] = ([], [])

    def settled() -> bool:
        nonlocal found
        requests = list(received())
        deliveries = client.deliveries(SUBSCRIPTION, limit=500).root
        found = requests, sorted(deliveries, key=lambda delivery: delivery.id)
        ids = {json.loads(request.body)["id"] for request in requests}
        return all(d.state == "delivered" for d in deliveries) and ids == {
            str(d.event_id) for d in deliveries
        }

    wait_for("delivery of every event", settled)
    return found


def pending(client: HubClient) -> set[tuple[str, str]]:
    """The type and subject of each event waiting for delivery."""
    deliveries = client.deliveries(SUBSCRIPTION, limit=500).root
    return {(d.event_type, d.subject) for d in deliveries if d.state == "pending"}


def checked(received: list[Received], secret: str) -> list[dict[str, Any]]:
    """The events of the requests, in the order of their first arrival, once every request
    passed a receiver's checks: the signature over its raw body, a CloudEvent of this hub,
    Idempotency-Key its id, and the same body whenever the same id comes again."""
    events: dict[str, dict[str, Any]] = {}
    bodies: dict[str, bytes] = {}
    for request in received:
        headers = {name.lower(): value for name, value in request.headers.items()}
        parts = dict(part.split("=", 1) for part in headers["x-fleetmark-signature"].split(","))
        signed = parts["t"].encode() + b"." + request.body
        expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(expected, parts["v1"]), request
        assert headers["content-type"] == "application/cloudevents+json"
        event = json.loads(request.body)
        assert event["specversion"] == "1.0"
        assert event["source"] == SOURCE
        assert str(uuid.UUID(event["id"])) == event["id"]
        assert event["type"].startswith("fleetmark."), event
        assert isinstance(event["subject"], str), event
        assert event["subject"], event
        assert datetime.fromisoformat(event["time"]).tzinfo is not None, event
        assert event["datacontenttype"] == "application/json"
        assert isinstance(event["data"], dict), event
        assert headers["idempotency-key"] == event["id"]
        # At least once: a second arrival is the same event, byte for byte.
        assert bodies.setdefault(event["id"], request.body) == request.body
        events.setdefault(event["id"], event)
    return list(events.values())


def by_subject(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    subjects: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        subjects[event["subject"]].append(event)
    return subjects


def check_order(events: list[dict[str, Any]]) -> None:
    """What is opened (an environment's drift, each of its clusters gone stale, a repository
    failing) closes before it opens again, and each gate event names the verdict of the gate
    event before it."""
    open_: dict[str, str] = {}
    for event in events:
        type_, subject = event["type"], event["subject"]
        # Stale and recovered clusters are listed by environment: each cluster pairs its own.
        keys = (
            [f"{subject}:{name}" for name in event["data"]["clusters"]]
            if type_.startswith("fleetmark.cluster.")
            else [subject]
        )
        for key in keys:
            if type_ in CLOSING:
                assert key not in open_, (key, open_[key], type_)
                open_[key] = type_
            elif type_ in CLOSING.values():
                assert CLOSING.get(open_.pop(key, "")) == type_, (key, type_)
    for subject, sequence in by_subject(events).items():
        if subject.startswith("gates/"):
            verdicts = [event["data"]["verdict"] for event in sequence]
            previous = [event["data"]["previous_verdict"] for event in sequence]
            assert previous[1:] == verdicts[:-1], (subject, previous, verdicts)


def in_published_order(events: list[dict[str, Any]], deliveries: list[DeliveryInfo]) -> None:
    """The events are those the hub delivered, each subject's first arrivals in the order
    the hub published them."""
    assert {event["id"] for event in events} == {str(d.event_id) for d in deliveries}
    for subject, sequence in by_subject(events).items():
        published = [str(d.event_id) for d in deliveries if d.subject == subject]
        assert [event["id"] for event in sequence] == published, subject
