"""`fleetmark simulate`: a small simulated fleet registered with a hub and reporting to it.

It goes through the hub's API as real clusters do: registration with an admin token
(`POST /api/v1/clusters`, labelled as simulated; a simulated cluster registered by an earlier
run gets a new token, any other cluster of a name it uses stops it), then a
full snapshot from each cluster every interval on `POST /api/v1/reports`, until stopped
(Ctrl-C or SIGTERM). A hub that does not answer a round is said so and tried again the next.
"""

import signal
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Annotated

import httpx
import typer

from hub.cli.output import console, errors, fail
from hub.cli.remote import DEFAULT_HUB, HubOption, bearer, error_of, refusal
from hub.cli.secret_files import read_secret_file
from hub.simulation import SIMULATED_LABEL, SimulatedCluster, Simulation

TIMEOUT = 10.0


def simulate(
    token_file: Annotated[
        Path, typer.Option(help="A file holding an API token with admin scope.", show_default=False)
    ],
    hub: HubOption = DEFAULT_HUB,
    clusters_per_type: Annotated[
        int, typer.Option(min=1, max=100, help="Clusters of each cluster type per environment.")
    ] = 2,
    interval: Annotated[
        float, typer.Option(min=0.1, help="Seconds between two reports of a cluster.")
    ] = 30.0,
) -> None:
    """Register a small simulated fleet and keep it reporting until stopped."""
    admin_token = read_secret_file(token_file, "--token-file")
    simulation = Simulation.made_up(clusters_per_type)
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with httpx.Client(base_url=hub, timeout=TIMEOUT) as client:
        tokens = register_fleet(client, admin_token, simulation)
        console.print(
            f"simulating {len(tokens)} clusters at {hub}, reporting every {interval:g} s",
            highlight=False,
            soft_wrap=True,
        )
        while not stopping.is_set():
            report_round(client, simulation, tokens)
            stopping.wait(interval)
            simulation.step()
    console.print(f"stopped after {simulation.rounds} rounds", highlight=False)


def register_fleet(
    client: httpx.Client, admin_token: str, simulation: Simulation
) -> dict[str, str]:
    """Each cluster's token, by name."""
    return {
        cluster.name: _register(client, admin_token, cluster) for cluster in simulation.clusters
    }


def _register(client: httpx.Client, admin_token: str, cluster: SimulatedCluster) -> str:
    """The cluster's token: registered now, or a new one for a simulated cluster an earlier run
    registered. Any other cluster of that name is refused: a new token would cut its agent
    off, or bring it back into service when it was decommissioned."""
    headers = bearer(admin_token)
    try:
        response = client.post("/api/v1/clusters", json=cluster.registration(), headers=headers)
        if response.status_code == 409:
            _check_taken_over(client.get(f"/api/v1/clusters/{cluster.name}", headers=headers))
            response = client.post(f"/api/v1/clusters/{cluster.name}/token", headers=headers)
    except httpx.HTTPError as exc:
        raise fail(f"the hub at {client.base_url} is unreachable: {exc}") from None
    if response.status_code not in (200, 201):
        raise fail(f"registering cluster {cluster.name}: {refusal(response)}")
    token: str = response.json()["token"]
    return token


def _check_taken_over(detail: httpx.Response) -> None:
    """Fails unless the registered cluster `detail` describes is one simulate may take over: a
    simulated one (SIMULATED_LABEL) in service."""
    if not detail.is_success:
        raise fail(f"looking up a registered cluster: {refusal(detail)}")
    found = detail.json()
    name = found["name"]
    key, value = SIMULATED_LABEL
    if found["labels"].get(key) != value:
        raise fail(
            f"cluster {name} is registered already and is not simulated (no {key}={value} "
            "label): simulate never takes over a cluster it did not register; run it against "
            "a hub without such a cluster"
        )
    if found["decommissioned_at"] is not None:
        raise fail(
            f"cluster {name} was simulated but is decommissioned: simulate never brings a "
            "cluster back into service; run it against a hub without such a cluster"
        )


def report_round(client: httpx.Client, simulation: Simulation, tokens: dict[str, str]) -> None:
    """A full snapshot from each cluster whose agent reports."""
    for cluster in simulation.reporting():
        body = simulation.report(cluster, datetime.now(UTC))
        try:
            response = client.post(
                "/api/v1/reports", json=body, headers=bearer(tokens[cluster.name])
            )
        except httpx.HTTPError as exc:
            errors.print(
                f"the hub at {client.base_url} is unreachable ({exc}); trying again next round",
                highlight=False,
                soft_wrap=True,
            )
            return
        if response.status_code in (401, 403):
            _, detail = error_of(response)
            raise fail(f"cluster {cluster.name}'s report was refused: {detail}")
        if response.status_code != 200:
            errors.print(
                f"cluster {cluster.name}'s report: {refusal(response)}",
                highlight=False,
                soft_wrap=True,
            )


def register(app: typer.Typer) -> None:
    app.command()(simulate)
