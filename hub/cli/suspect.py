"""`fleetmark suspect`: the commits and versions applied in an environment, ranked by how much
more often clusters regressed after them than clusters that had not, asked of a running hub
(GET /api/v1/suspects) with a read token.

A table for people, a CSV row per change, or the hub's answer as JSON.
"""

from datetime import UTC, datetime
from typing import Annotated

import typer

from hub.cli.output import Output, OutputOption, Rows, console, rows_table, show, when
from hub.cli.remote import (
    HubOption,
    TokenFileOption,
    TokenOption,
    UntilOption,
    api_token,
    ask,
    moment,
)
from hub.client import DEFAULT_HUB
from hub.client.schemas.suspects import SuspectsAnswer


def suspect_rows(answer: SuspectsAnswer) -> Rows:
    """A row per change applied in the period, suspects first: what `--output csv` writes."""
    return Rows(
        ("verdict", "change", "score", "p", "exposed", "control", "reasons", "clusters"),
        [
            (
                item.verdict.value,
                item.description,
                f"{item.score:.1f}",
                f"{item.p_value:.2g}",
                f"{item.counts.exposed_regressed} of {item.counts.exposed}",
                f"{item.counts.control_regressed} of {item.counts.control}",
                ", ".join(f"{r.reason} ({r.clusters})" for r in item.reasons),
                ", ".join(c.cluster for c in item.clusters),
            )
            for item in answer.items
        ],
    )


def render_suspects(answer: SuspectsAnswer) -> None:
    console.print(
        f"{answer.environment}, {when(answer.since)} to {when(answer.until)}: "
        f"[bold]{answer.verdict.value}[/]",
        highlight=False,
    )
    console.print(rows_table(suspect_rows(answer)))


def suspect(
    environment: Annotated[
        str,
        typer.Option("--environment", "-e", help="The environment the changes were applied in."),
    ],
    workload: Annotated[
        str | None,
        typer.Option("--workload", "-w", help="Only this workload's versions."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="From this time on: 2026-11-22T12:00:00Z or 2h ago (default: 2h)."),
    ] = None,
    until: UntilOption = None,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """Suspects: the commits and versions applied in an environment, ranked by how much more
    often clusters regressed after them than clusters that had not."""
    token = api_token(token, token_file)
    now = datetime.now(UTC)
    start, end = moment("--since", since, now), moment("--until", until, now)
    answer = ask(
        hub,
        token,
        lambda client: client.suspects(environment, workload=workload, since=start, until=end),
    )
    show(answer, output, suspect_rows, render_suspects)


def register(app: typer.Typer) -> None:
    app.command()(suspect)
