"""`fleetmark status` and `fleetmark history`: the fleet's state and its deployment history,
asked of a running hub (GET /api/v1/fleet, GET /api/v1/history) with a read token.

A table and a page footer for people; the rows as CSV (status: its clusters) or the hub's
answer as JSON for scripts.
"""

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.text import Text

from hub.cli.output import (
    Output,
    OutputOption,
    Rows,
    abbreviated,
    console,
    rows_table,
    show,
    when,
)
from hub.cli.remote import (
    ClusterTypeFilter,
    EnvironmentFilter,
    HubOption,
    LimitOption,
    OffsetOption,
    SinceOption,
    TokenFileOption,
    TokenOption,
    UntilOption,
    ago_cell,
    api_token,
    ask,
    moment,
    print_page_footer,
    short_revision,
)
from hub.client import DEFAULT_HUB
from hub.client.schemas.fleet import (
    DeploymentPage,
    DriftCounts,
    FleetState,
    GroupState,
    ObjectCounts,
)
from hub.client.text import format_duration

# Objects by state, then drift as `fleetmark drift` counts it (failing: a reason of drift).
_OBJECT_HEADERS = (
    "objects",
    "ready",
    "progressing",
    "suspended",
    "drifted",
    "behind",
    "failing",
    "stale",
    "live drift",
    "other",
)
_AGENT_STYLES = {"reporting": "green", "stale": "yellow", "never_reported": "bold red"}


def _objects(counts: ObjectCounts, drift: DriftCounts) -> tuple[int, ...]:
    return (
        counts.total,
        counts.ready,
        counts.progressing,
        counts.suspended,
        drift.drift_total,
        drift.drift_behind,
        drift.drift_failing,
        drift.drift_stale,
        drift.drift_live,
        drift.drift_other,
    )


def _group(state: GroupState) -> tuple[int, ...]:
    return (
        state.clusters,
        state.reporting,
        state.stale,
        state.never_reported,
        *_objects(state.objects, state),
    )


def render_fleet(fleet: FleetState) -> None:
    groups: list[tuple[object, ...]] = []
    for environment in fleet.environments:
        name = environment.name or "(no environment)"
        groups.append((Text(name, style="bold"), *_group(environment)))
        for cluster_type in environment.cluster_types:
            groups.append((f"  {cluster_type.name or '(no cluster type)'}", *_group(cluster_type)))
    groups.append((Text("all", style="bold"), *_group(fleet.totals)))
    stale_after = format_duration(timedelta(seconds=fleet.stale_after_seconds))
    console.print(
        rows_table(
            Rows(
                (
                    "environment / type",
                    "clusters",
                    "reporting",
                    "stale",
                    "never reported",
                    *_OBJECT_HEADERS,
                ),
                groups,
                title=f"fleet at {when(fleet.evaluated_at)}, stale after {stale_after} of silence",
            )
        )
    )
    page = fleet.clusters
    if page.items:
        console.print()
        console.print(rows_table(cluster_rows(fleet)))
    print_page_footer("clusters", page, total=page.total)


def cluster_rows(fleet: FleetState) -> Rows:
    """The page of clusters: what `status --output csv` writes."""
    return Rows(
        ("cluster", "environment", "type", "agent", "last report", *_OBJECT_HEADERS),
        [
            (
                cluster.name,
                cluster.environment,
                cluster.cluster_type,
                Text(cluster.agent.replace("_", " "), style=_AGENT_STYLES[cluster.agent]),
                ago_cell(fleet.evaluated_at, cluster.last_seen_at),
                *_objects(cluster.objects, cluster),
            )
            for cluster in fleet.clusters.items
        ],
    )


def _ready(ready: bool | None, reason: str | None) -> Text:
    """Readiness with the new revision; why, when it was not Ready."""
    if ready:
        return Text("yes", style="green")
    words = f" ({reason})" if reason else ""
    if ready is None:
        return Text(f"unknown{words}", style="yellow")
    return Text(f"no{words}", style="bold red")


def _revision(sha: str | None, version: str | None, revision: str | None) -> object:
    """The commit (12 digits on a terminal) or version applied; the branch is the object's own."""
    if sha is not None:
        return abbreviated(sha)
    return version or short_revision(revision)


def _placed(environment: str | None, cluster_type: str | None) -> str:
    return f"{environment or '-'}/{cluster_type or '-'}"


def deployment_rows(page: DeploymentPage) -> Rows:
    return Rows(
        ("deployed at", "cluster", "env/type", "object", "applied", "before", "ready"),
        [
            (
                item.deployed_at,
                item.cluster,
                _placed(item.environment, item.cluster_type),
                f"{item.kind}/{item.namespace}/{item.name}",
                _revision(item.applied_sha, item.applied_version, item.applied_revision),
                _revision(item.previous_sha, item.previous_version, item.previous_revision),
                _ready(item.ready, item.reason),
            )
            for item in page.items
        ],
        title="deployments, newest first",
    )


def render_history(page: DeploymentPage) -> None:
    if page.items:
        console.print(rows_table(deployment_rows(page)))
    print_page_footer("deployments", page, next_offset=page.next_offset)


def status(
    environment: EnvironmentFilter = None,
    cluster_type: ClusterTypeFilter = None,
    limit: LimitOption = 100,
    offset: OffsetOption = 0,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """The fleet now: clusters reporting, stale or never heard of, and their reconciler objects
    by state, per environment and cluster type; then a page of clusters."""
    token = api_token(token, token_file)
    fleet = ask(
        hub,
        token,
        lambda client: client.fleet(
            environment=environment, cluster_type=cluster_type, limit=limit, offset=offset
        ),
    )
    show(fleet, output, cluster_rows, render_fleet)


def history(
    environment: EnvironmentFilter = None,
    cluster_type: ClusterTypeFilter = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", "-c", help="Only this cluster.")
    ] = None,
    object_name: Annotated[
        str | None, typer.Option("--object", help="Only reconciler objects of this name.")
    ] = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: LimitOption = 100,
    offset: OffsetOption = 0,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """Every change of the revision a reconciler object applied, newest first."""
    token = api_token(token, token_file)
    now = datetime.now(UTC)
    start, end = moment("--since", since, now), moment("--until", until, now)
    page = ask(
        hub,
        token,
        lambda client: client.history(
            environment=environment,
            cluster_type=cluster_type,
            cluster=cluster,
            object_name=object_name,
            since=start,
            until=end,
            limit=limit,
            offset=offset,
        ),
        options={"object": "--object"},
    )
    show(page, output, deployment_rows, render_history)


def register(app: typer.Typer) -> None:
    app.command()(status)
    app.command()(history)
