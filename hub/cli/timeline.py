"""`fleetmark timeline`: what happened to the fleet, newest first, asked of a running hub
(GET /api/v1/timeline) with a read token.

A table for people, ending with the option that asks for the next page; CSV or the hub's
answer as JSON for scripts.
"""

from datetime import UTC, datetime
from typing import Annotated

import typer

from hub.cli.output import Output, OutputOption, Rows, console, rows_table, show
from hub.cli.remote import (
    ClusterTypeFilter,
    EnvironmentFilter,
    HubOption,
    LimitOption,
    SinceOption,
    TokenFileOption,
    TokenOption,
    UntilOption,
    api_token,
    ask,
    moment,
)
from hub.client import DEFAULT_HUB
from hub.client.schemas.timeline import TimelinePage


def timeline_rows(page: TimelinePage) -> Rows:
    """A row per event of the page: what `timeline --output csv` writes."""
    return Rows(
        ("at", "kind", "environment", "clusters", "summary"),
        [
            (row.at, row.kind.value, row.environment, row.clusters, row.summary)
            for row in page.items
        ],
    )


def render_timeline(page: TimelinePage) -> None:
    if page.items:
        console.print(rows_table(timeline_rows(page)))
    more = "last page" if page.next is None else f"next: --cursor {page.next}"
    console.print(f"{len(page.items)} rows · {more}", highlight=False)


def timeline(
    environment: EnvironmentFilter = None,
    workload: Annotated[
        str | None, typer.Option("--workload", "-w", help="Only this workload's rows.")
    ] = None,
    cluster_type: ClusterTypeFilter = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", "-c", help="Only rows about this cluster.")
    ] = None,
    selector: Annotated[
        str | None,
        typer.Option(
            "--selector", "-l", help="Only rows about clusters whose labels it selects (as -l)."
        ),
    ] = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: LimitOption = 100,
    cursor: Annotated[
        str | None, typer.Option(help="Where a page ends: the `next` the page before gave.")
    ] = None,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """What happened to the fleet, newest first: commits, scheduling runs, rollouts, health
    regressions, drift, silences, decommissions and harvest failures.

    The range is the 24 hours up to now unless --since or --until says otherwise."""
    token = api_token(token, token_file)
    now = datetime.now(UTC)
    start, end = moment("--since", since, now), moment("--until", until, now)
    page = ask(
        hub,
        token,
        lambda client: client.timeline(
            environment=environment,
            workload=workload,
            cluster_type=cluster_type,
            cluster=cluster,
            selector=selector,
            since=start,
            until=end,
            limit=limit,
            cursor=cursor,
        ),
    )
    show(page, output, timeline_rows, render_timeline)


def register(app: typer.Typer) -> None:
    app.command()(timeline)
