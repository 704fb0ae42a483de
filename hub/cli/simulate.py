"""`fleetmark simulate`: a small simulated fleet registered with a hub and reporting to it.

Through the API, as real clusters: registration with an admin token, then a full snapshot from
each cluster every interval, until Ctrl-C or SIGTERM. A simulated cluster registered earlier
gets a new token; a round the hub misses is said so and tried again the next.
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
from hub.cli.remote import HubOption, hub_url, refusal
from hub.cli.secret_files import read_secret_file
from hub.client import DEFAULT_HUB, HubClient, HubRefused, HubUnreachable
from hub.client.schemas.clusters import ClusterDetail
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
    with httpx.Client(base_url=hub_url(hub), timeout=TIMEOUT) as http:
        tokens = register_fleet(http, admin_token, simulation)
        console.print(
            f"simulating {len(tokens)} clusters at {hub}, reporting every {interval:g} s",
            highlight=False,
            soft_wrap=True,
        )
        while not stopping.is_set():
            report_round(HubClient.over(http), simulation, tokens)
            stopping.wait(interval)
            simulation.step()
    console.print(f"stopped after {simulation.rounds} rounds", highlight=False)


def register_fleet(http: httpx.Client, admin_token: str, simulation: Simulation) -> dict[str, str]:
    """Each cluster's token, by name, registered through the hub `http` sends to."""
    client = HubClient.over(http, token=admin_token)
    return {cluster.name: _register(client, cluster) for cluster in simulation.clusters}


def _register(client: HubClient, cluster: SimulatedCluster) -> str:
    """The cluster's token: registered now, or a new one for a simulated cluster an earlier run
    registered. Any other cluster of that name is refused: a new token would cut its agent
    off, or bring it back into service when it was decommissioned."""
    try:
        try:
            return client.register_cluster(**cluster.registration()).token
        except HubRefused as exc:
            if exc.status != 409:
                raise
        try:
            _check_taken_over(client.cluster(cluster.name))
        except HubRefused as exc:
            raise fail(f"looking up a registered cluster: {refusal(exc)}") from None
        return client.rotate_cluster_token(cluster.name).token
    except HubUnreachable as exc:
        raise fail(str(exc)) from None
    except HubRefused as exc:
        raise fail(f"registering cluster {cluster.name}: {refusal(exc)}") from None


def _check_taken_over(found: ClusterDetail) -> None:
    """Fails unless the registered cluster is one simulate may take over: a simulated one
    (SIMULATED_LABEL) in service."""
    key, value = SIMULATED_LABEL
    if found.labels.get(key) != value:
        raise fail(
            f"cluster {found.name} is registered already and is not simulated (no {key}={value} "
            "label): simulate never takes over a cluster it did not register; run it against "
            "a hub without such a cluster"
        )
    if found.decommissioned_at is not None:
        raise fail(
            f"cluster {found.name} was simulated but is decommissioned: simulate never brings a "
            "cluster back into service; run it against a hub without such a cluster"
        )


def report_round(client: HubClient, simulation: Simulation, tokens: dict[str, str]) -> None:
    """A full snapshot from each cluster whose agent reports."""
    for cluster in simulation.reporting():
        body = simulation.report(cluster, datetime.now(UTC))
        try:
            client.report(body, cluster_token=tokens[cluster.name])
        except HubUnreachable as exc:
            errors.print(f"{exc}; trying again next round", highlight=False, soft_wrap=True)
            return
        except HubRefused as exc:
            if exc.status in (401, 403):
                raise fail(f"cluster {cluster.name}'s report was refused: {exc.detail}") from None
            errors.print(
                f"cluster {cluster.name}'s report: {refusal(exc)}",
                highlight=False,
                soft_wrap=True,
            )


def register(app: typer.Typer) -> None:
    app.command()(simulate)
