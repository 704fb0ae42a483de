"""`fleetmark rollouts`: the current rollout per environment and workload as numbers, asked of a
running hub (GET /api/v1/rollouts) with a read token.

A table for people; a CSV row per rollout, or the hub's answer as JSON, for scripts.
"""

from datetime import timedelta
from typing import Annotated

import typer

from hub.cli.output import Output, OutputOption, Rows, short_sha, show
from hub.cli.remote import HubOption, TokenFileOption, TokenOption, api_token, ask
from hub.client import DEFAULT_HUB
from hub.client.schemas.rollouts import RolloutHealth, RolloutHealthList
from hub.client.text import format_duration


def _duration(seconds: float | None) -> str | None:
    return None if seconds is None else format_duration(timedelta(seconds=seconds))


def _row(item: RolloutHealth) -> tuple[object, ...]:
    spread = item.time_to_converge
    longest = _duration(spread.max_seconds)
    if spread.max_open and longest is not None:
        # Not converged: the time so far, and counting.
        longest = f"{longest}+"
    target = short_sha(item.revision) if item.workload is None else item.revision
    return (
        item.environment,
        item.workload or "(platform)",
        target,
        item.state,
        f"{item.converged_clusters}/{item.expected_clusters}",
        item.failed_clusters,
        _duration(spread.p50_seconds),
        _duration(spread.p95_seconds),
        longest,
        item.evaluated_at,
    )


def rollout_rows(answer: RolloutHealthList) -> Rows:
    """A row per current rollout; a max still open ends in `+`."""
    return Rows(
        (
            "environment",
            "workload",
            "revision",
            "state",
            "converged",
            "failed",
            "p50",
            "p95",
            "max",
            "as of",
        ),
        [_row(item) for item in answer.items],
    )


def rollouts(
    environment: Annotated[
        list[str] | None,
        typer.Option(
            "--environment", "-e", help="Only this environment; repeat for several (default: all)."
        ),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option("--workload", "-w", help="Only this workload's, not the platform commits'."),
    ] = None,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """The current rollout per environment and workload: clusters converged, time to converge
    (p50, p95, max) and failures.

    Time to converge runs per cluster from the commit's time to when the cluster ran it Ready;
    a max ending in + is the time so far of a rollout not converged yet.
    """
    token = api_token(token, token_file)
    answer = ask(
        hub,
        token,
        lambda client: client.rollouts(environments=environment or (), workload=workload),
    )
    show(answer, output, rollout_rows)


def register(app: typer.Typer) -> None:
    app.command()(rollouts)
