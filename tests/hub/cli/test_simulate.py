"""`fleetmark simulate` against a hub served on a real port: the fleet registers and reports,
taking over no cluster it did not register."""

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from hub.app import utc_now
from hub.cli import app as cli
from hub.cli.simulate import register_fleet
from hub.simulation import RECONCILERS, Simulation
from tests.agent.conftest import LiveHub
from tests.conftest import TOKEN_SECRET
from tests.served import hub_environment, run
from tests.support import bearer

WAIT = 60.0


@pytest.fixture
def admin_token_file(migrated_database: str, tmp_path: Path) -> Path:
    """An admin token of the hub's, in a file, made as the operator makes one on its host."""
    settings = {
        "FLEETMARK_MODE": "development",
        "FLEETMARK_TOKEN_SECRET": TOKEN_SECRET,
        "FLEETMARK_DATA_DIR": str(tmp_path),
    }
    args = ["tokens", "create", "ops", "--scope", "admin", "--database-url", migrated_database]
    made = CliRunner().invoke(cli, args, env=settings)
    token = re.search(r"fma_[\w-]{43}", made.stdout)
    assert token is not None, made.output
    path = tmp_path / "admin-token"
    path.write_text(f"{token[0]}\n")
    return path


@pytest.fixture
def hub(migrated_database: str, tmp_path: Path) -> Iterator[LiveHub]:
    """The hub served by uvicorn in a thread, on a real port."""
    served = LiveHub(migrated_database, utc_now, data_dir=tmp_path)
    served.start()
    try:
        yield served
    finally:
        served.stop()


def fleet(hub: LiveHub, token: str) -> dict[str, Any]:
    response = httpx.get(
        f"{hub.url}/api/v1/fleet", headers=bearer(token), params={"limit": 1000}, timeout=10.0
    )
    assert response.status_code == 200, response.text
    state: dict[str, Any] = response.json()
    return state


def objects_of(state: dict[str, Any]) -> dict[str, int]:
    """Reporting clusters and their live objects."""
    return {
        cluster["name"]: cluster["objects"]["total"]
        for cluster in state["clusters"]["items"]
        if cluster["last_seen_at"] is not None
    }


def wait_for(hub: LiveHub, token: str, expected: dict[str, int]) -> dict[str, Any]:
    """The fleet once it shows the expected clusters reporting (or the wait is over)."""
    deadline = time.monotonic() + WAIT
    state = fleet(hub, token)
    while objects_of(state) != expected and time.monotonic() < deadline:
        time.sleep(0.3)
        state = fleet(hub, token)
    return state


@pytest.mark.parametrize("stop_with", [signal.SIGTERM, signal.SIGINT])
def test_simulate_registers_a_fleet_that_reports(
    hub: LiveHub, admin_token_file: Path, tmp_path: Path, stop_with: signal.Signals
) -> None:
    token = admin_token_file.read_text().strip()
    args = [
        "simulate",
        "--hub",
        hub.url,
        "--token-file",
        str(admin_token_file),
        "--clusters-per-type",
        "1",
        "--interval",
        "0.2",
    ]
    # A root reconciler and two targets each: Flux reports 2 objects for one, Argo CD 1.
    expected = {
        f"{cluster_type}-{environment}-1": 3 * (2 if reconciler == "flux" else 1)
        for environment in ("dev", "stage")
        for cluster_type, reconciler in RECONCILERS.items()
    }
    environment = hub_environment("", tmp_path)
    with run(args, environment, tmp_path / "simulate.log") as simulate:
        state = wait_for(hub, token, expected)
        simulate.process.send_signal(stop_with)
        status = simulate.process.wait(timeout=WAIT)
        output = simulate.output()

    assert objects_of(state) == expected
    assert {
        (cluster["name"], cluster["environment"], cluster["cluster_type"])
        for cluster in state["clusters"]["items"]
    } == {(name, name.split("-")[-2], name.rsplit("-", 2)[0]) for name in expected}
    assert [e["name"] for e in state["environments"]] == ["dev", "stage"]
    assert status == 0, output
    assert "simulating 8 clusters" in output
    assert "stopped after" in output
    assert "Traceback" not in output


# --- what simulate never takes over --------------------------------------------------------------


@pytest.fixture
def signals() -> Iterator[None]:
    """simulate in this process installs its SIGINT and SIGTERM handlers: put pytest's back."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in handlers.items():
        signal.signal(number, handler)


def simulate_here(hub: LiveHub, admin_token_file: Path) -> Result:
    """`fleetmark simulate` in this process, for a run that ends before its first round; one
    that goes on reporting is stopped (SIGTERM) after WAIT seconds."""
    args = ["simulate", "--hub", hub.url, "--token-file", str(admin_token_file)]
    stop = threading.Timer(WAIT, os.kill, (os.getpid(), signal.SIGTERM))
    stop.start()
    try:
        return CliRunner().invoke(cli, [*args, "--clusters-per-type", "1"])
    finally:
        stop.cancel()


def cluster(hub: LiveHub, token: str, name: str) -> dict[str, Any]:
    response = httpx.get(f"{hub.url}/api/v1/clusters/{name}", headers=bearer(token), timeout=10.0)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def report_as(hub: LiveHub, name: str, cluster_token: str) -> httpx.Response:
    """A full snapshot from the cluster of that name of simulate's fleet, with its token."""
    simulation = Simulation.made_up(1)
    (simulated,) = (c for c in simulation.clusters if c.name == name)
    body = simulation.report(simulated, datetime.now(UTC))
    return httpx.post(
        f"{hub.url}/api/v1/reports", json=body, headers=bearer(cluster_token), timeout=10.0
    )


def test_a_cluster_it_did_not_register_is_refused_and_keeps_its_token(
    hub: LiveHub, admin_token_file: Path, signals: None
) -> None:
    token = admin_token_file.read_text().strip()
    registered = httpx.post(
        f"{hub.url}/api/v1/clusters",
        json={"name": "drone-dev-1", "environment": "dev", "cluster_type": "drone"},
        headers=bearer(token),
        timeout=10.0,
    )
    assert registered.status_code == 201, registered.text

    result = simulate_here(hub, admin_token_file)
    reported = report_as(hub, "drone-dev-1", registered.json()["token"])

    assert result.exit_code == 2
    assert (
        "error: cluster drone-dev-1 is registered already and is not simulated (no "
        "fleetmark.io/simulated=true label): simulate never takes over a cluster it did not "
        "register; run it against a hub without such a cluster"
    ) in " ".join(result.stderr.split())
    # The real agent's token still works: simulate asked for no new one.
    assert reported.status_code == 200, reported.text


def test_a_decommissioned_simulated_cluster_stays_out_of_service(
    hub: LiveHub, admin_token_file: Path, signals: None
) -> None:
    token = admin_token_file.read_text().strip()
    with httpx.Client(base_url=hub.url, timeout=10.0) as client:
        register_fleet(client, token, Simulation.made_up(1))
        left = client.post("/api/v1/clusters/small-stage-1/decommission", headers=bearer(token))
    assert left.status_code == 200, left.text

    result = simulate_here(hub, admin_token_file)

    assert result.exit_code == 2
    assert (
        "error: cluster small-stage-1 was simulated but is decommissioned: simulate never brings "
        "a cluster back into service"
    ) in " ".join(result.stderr.split())
    after = cluster(hub, token, "small-stage-1")
    assert after["decommissioned_at"] == left.json()["decommissioned_at"]
    assert after["token_active"] is False


def test_a_simulated_cluster_of_an_earlier_run_is_taken_over(
    hub: LiveHub, admin_token_file: Path
) -> None:
    token = admin_token_file.read_text().strip()
    with httpx.Client(base_url=hub.url, timeout=10.0) as client:
        first = register_fleet(client, token, Simulation.made_up(1))
        again = register_fleet(client, token, Simulation.made_up(1))

    assert first.keys() == again.keys()
    assert all(first[name] != again[name] for name in first)
    assert cluster(hub, token, "drone-dev-1")["labels"] == {
        "region": "east-us",
        "fleetmark.io/simulated": "true",
    }
    assert report_as(hub, "drone-dev-1", again["drone-dev-1"]).status_code == 200
    assert report_as(hub, "drone-dev-1", first["drone-dev-1"]).status_code == 401
