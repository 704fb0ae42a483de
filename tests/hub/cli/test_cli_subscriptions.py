"""`fleetmark subscriptions …` against a hub served on a real port, whose delivery task sends to
a receiver on loopback: add (the secret printed once), test, deliveries, list, remove, and a
refusal in words."""

import json
import re
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.conftest import DatabaseServer
from tests.hub.cli.conftest import Hub, Served, serving, words
from tests.hub.events.receiver import Receiver, receiving


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def hub(database_server: DatabaseServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    with serving(
        database_server,
        tmp_path_factory,
        webhook_allow_private=True,
        event_delivery_interval=timedelta(seconds=0.2),
    ) as hub:
        yield hub


def test_a_subscription_through_the_command_line(served: Served, receiver: Receiver) -> None:
    added = served.admin(
        "subscriptions", "add", "ops", receiver.url, "--type", "fleetmark.gate.passed",
        "-e", "prod", "-e", "stage",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert "Subscription ops sends to" in words(added.stdout)
    assert re.search(r"fmw_[\w-]{43}", added.stdout) is not None

    tested = served.admin("subscriptions", "test", "ops")
    assert tested.exit_code == 0, tested.output
    assert "Queued test event" in tested.stdout

    deadline = time.monotonic() + 15
    while not receiver.received and time.monotonic() < deadline:
        time.sleep(0.05)
    [received] = receiver.received
    assert received.document["type"] == "fleetmark.test"
    while time.monotonic() < deadline:
        listed = served.admin("subscriptions", "deliveries", "ops", "-o", "json")
        [delivery] = json.loads(listed.stdout)
        if delivery["state"] == "delivered":
            break
        time.sleep(0.05)
    assert (delivery["state"], delivery["last_status_code"]) == ("delivered", 200)
    assert delivery["event_id"] == received.document["id"]
    table = served.admin("subscriptions", "deliveries", "ops")
    assert "fleetmark.test" in table.stdout
    assert "delivered" in table.stdout

    retried = served.admin("subscriptions", "deliveries", "ops", "--retry", str(delivery["id"]))
    assert retried.exit_code != 0
    assert f"delivery {delivery['id']} is delivered; only a dead delivery is retried" in words(
        retried.output
    )

    listed = served.admin("subscriptions", "list")
    assert "ops" in listed.stdout
    assert "prod, stage" in listed.stdout
    assert "fmw_" not in listed.stdout

    removed = served.admin("subscriptions", "remove", "ops")
    assert removed.exit_code == 0, removed.output
    assert "Removed subscription ops." in removed.stdout
    gone = served.admin("subscriptions", "remove", "ops")
    assert gone.exit_code != 0
    assert "no subscription named 'ops'" in gone.output


def test_a_refused_url_is_named(served: Served) -> None:
    refused = served.admin("subscriptions", "add", "bad", "ftp://hooks.example.com/")
    assert refused.exit_code != 0
    assert "url: 'ftp://hooks.example.com/' is not an http(s) URL with a host" in words(
        refused.output
    )
