"""`fleetmark dora`: the four DORA figures per environment, asked of a running hub
(GET /api/v1/dora) with a read token.

A table per environment for people; a CSV row per environment and figure, or the hub's answer
as JSON, for scripts.
"""

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from hub.cli.output import Output, OutputOption, Rows, console, rows_table, show, when
from hub.cli.remote import (
    HubOption,
    TokenFileOption,
    TokenOption,
    UntilOption,
    ago,
    api_token,
    ask,
    moment,
)
from hub.client import DEFAULT_HUB
from hub.client.schemas.dora import DoraReport, EnvironmentDora, Spread
from hub.client.text import format_duration


def _duration(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(timedelta(seconds=seconds))


def _spread(spread: Spread) -> str:
    return " · ".join(
        f"{name} {_duration(seconds)}"
        for name, seconds in (
            ("median", spread.median_seconds),
            ("p90", spread.p90_seconds),
            ("mean", spread.mean_seconds),
        )
    )


def _rate(figures: EnvironmentDora) -> str:
    if figures.change_failure_rate is None:
        return "- (no rollout started)"
    return (
        f"{figures.change_failure_rate:.0%} "
        f"({figures.rollouts_failed} of {figures.rollouts_started} rollouts failed)"
    )


def _rows(figures: EnvironmentDora) -> list[tuple[str, str]]:
    lead_time = _spread(figures.lead_time) if figures.deployments else "-"
    restore = (
        f"{_spread(figures.time_to_restore)} ({figures.restored} restored)"
        if figures.restored
        else "-"
    )
    if figures.unrestored:
        restore += f", {figures.unrestored} not restored"
    return [
        (
            "deployments",
            f"{figures.deployments} ({figures.deployments_per_day:.2f} per day)",
        ),
        ("lead time", lead_time),
        ("change failure rate", _rate(figures)),
        ("time to restore", restore),
        ("rollouts in progress", str(figures.in_progress)),
    ]


def render_dora(report: DoraReport) -> None:
    subject = "platform commits" if report.workload is None else f"versions of {report.workload}"
    console.print(
        "judged from the transitions now: the hub's DORA job has not rolled them up yet"
        if report.evaluated_at is None
        else f"rolled up {ago(report.now, report.evaluated_at)}"
    )
    for figures in report.environments:
        console.print(
            rows_table(
                Rows(
                    ("figure", "value"),
                    _rows(figures),
                    title=f"{figures.environment}: {subject}, "
                    f"{when(report.since)} to {when(report.until)}",
                )
            )
        )


def dora_rows(report: DoraReport) -> Rows:
    """Every environment's figures, one row each: what `dora --output csv` writes."""
    return Rows(
        ("environment", "figure", "value"),
        [
            (figures.environment, figure, value)
            for figures in report.environments
            for figure, value in _rows(figures)
        ],
    )


def dora(
    environment: Annotated[
        list[str] | None,
        typer.Option(
            "--environment", "-e", help="Only this environment; repeat for several (default: all)."
        ),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload", "-w", help="Figures of this workload's versions, not platform commits."
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="From this time on: 2026-11-22T12:00:00Z (UTC if no offset) or 7d ago "
            "(default: 30 days before --until)."
        ),
    ] = None,
    until: UntilOption = None,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """DORA figures per environment: deployment frequency, lead time (commit to Ready on every
    expected cluster), change failure rate and time to restore."""
    token = api_token(token, token_file)
    now = datetime.now(UTC)
    start, end = moment("--since", since, now), moment("--until", until, now)
    report = ask(
        hub,
        token,
        lambda client: client.dora(
            environments=environment or (), workload=workload, since=start, until=end
        ),
    )
    show(report, output, dora_rows, render_dora)


def register(app: typer.Typer) -> None:
    app.command()(dora)
