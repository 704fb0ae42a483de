"""`fleetmark simulate` against a hub served on a real port: the fleet registers and reports."""

import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hub.simulation import RECONCILERS
from tests.conftest import DatabaseServer
from tests.served import ServedHub, hub_environment, run, served_hub
from tests.support import bearer

WAIT = 60.0


@pytest.fixture
def hub_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@pytest.fixture
def admin_token_file(tmp_path: Path) -> Path:
    path = tmp_path / "admin-token"
    path.write_text("fma_" + secrets.token_urlsafe(32) + "\n")
    return path


@pytest.fixture
def hub(hub_database: str, tmp_path: Path, admin_token_file: Path) -> Iterator[ServedHub]:
    environment = hub_environment(
        hub_database, tmp_path, FLEETMARK_ADMIN_TOKEN_FILE=str(admin_token_file)
    )
    with served_hub(environment, tmp_path / "hub.log") as served:
        yield served


def fleet(hub: ServedHub, token: str) -> dict[str, Any]:
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


def wait_for(hub: ServedHub, token: str, expected: dict[str, int]) -> dict[str, Any]:
    """The fleet once it shows the expected clusters reporting (or the wait is over)."""
    deadline = time.monotonic() + WAIT
    state = fleet(hub, token)
    while objects_of(state) != expected and time.monotonic() < deadline:
        time.sleep(0.3)
        state = fleet(hub, token)
    return state


@pytest.mark.parametrize("stop_with", [signal.SIGTERM, signal.SIGINT])
def test_simulate_registers_a_fleet_that_reports(
    hub: ServedHub, admin_token_file: Path, tmp_path: Path, stop_with: signal.Signals
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
