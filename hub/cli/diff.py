"""`fleetmark diff dev stage [prod ...]`: how environments differ, asked of a running hub
(GET /api/v1/diff) with a read token.

A table for people (docs/concepts.md, "Environment diff"); `--output csv` writes the rows, each
environment's cell on two lines, quoted; `--output json` the hub's answer as it came.
"""

from typing import Annotated

import typer
from rich.text import Text

from hub.cli.output import (
    Output,
    OutputOption,
    Rows,
    console,
    rows_table,
    short_sha,
    show,
    when,
)
from hub.cli.remote import (
    ClusterTypeFilter,
    HubOption,
    LimitOption,
    OffsetOption,
    TokenFileOption,
    TokenOption,
    api_token,
    ask,
    print_page_footer,
)
from hub.client import DEFAULT_HUB
from hub.client.schemas.diff import (
    CellState,
    DeployedVersion,
    DifferenceKind,
    DiffRow,
    EnvironmentCell,
    EnvironmentDiff,
    Reason,
)

_STATE_STYLES = {
    CellState.IN_SYNC: "green",
    CellState.NOT_REPORTING: "yellow",
    CellState.DRIFTED: "yellow",
    CellState.FAILING: "bold red",
    CellState.NO_CLUSTERS: "dim",
    CellState.NOT_ASSIGNED: "dim",
}
_REASON_WORDS = {
    Reason.NOT_ASSIGNED: "not assigned in {environment}",
    Reason.AWAITING_PROMOTION: "awaiting promotion to {environment}",
    Reason.PINNED: "pinned in {environment}",
    Reason.DIVERGED: "{environment} diverged from {compared_with}",
    Reason.FAILED: "failed in {environment}",
    Reason.DRIFTED: "drifted in {environment}",
}


def _target(row: DiffRow, cell: EnvironmentCell) -> str:
    """The target's name within its workload: `functional-test`."""
    name = cell.deployment_target or "-"
    return name.removeprefix(f"{row.workload}-")


def _desired(cell: EnvironmentCell) -> str:
    if cell.app is not None and cell.app.pinned_ref is not None:
        return f"pinned {cell.app.pinned_ref}"
    if cell.desired is None or cell.desired.version is None:
        return "?"
    return cell.desired.version


def _ran(item: DeployedVersion) -> str:
    if item.version is not None:
        return item.version
    return "nothing" if item.commit is None else short_sha(item.commit)


def _deployed(cell: EnvironmentCell) -> str:
    deployed = cell.deployed
    if deployed is None or deployed.clusters == 0:
        return "no clusters"
    runs = ", ".join(f"{_ran(item)} on {item.clusters}" for item in deployed.versions)
    parts = [runs] if runs else []
    if deployed.not_reporting:
        parts.append(f"{deployed.not_reporting} not reporting")
    return ", ".join(parts)


def _cell(row: DiffRow, cell: EnvironmentCell) -> Text:
    style = _STATE_STYLES[cell.state]
    if not cell.assigned:
        return Text("not assigned", style=style)
    text = Text(_target(row, cell), style="bold")
    text.append(f"\n{_desired(cell)} → {_deployed(cell)}", style=style)
    if cell.state in {CellState.FAILING, CellState.DRIFTED}:
        text.append(f" ({cell.state.value})", style=style)
    return text


def _config_value(values: dict[str, str | None], environment: str) -> str:
    """The key's value in one environment: `-` where it is missing, `n/a` where the workload is
    not assigned, so the values line up with the environment columns."""
    if environment not in values:
        return "n/a"
    value = values[environment]
    return "-" if value is None else value


def _config(row: DiffRow, environments: list[str]) -> Text:
    lines = []
    for difference in row.differences:
        if difference.kind is not DifferenceKind.CONFIG or difference.values is None:
            continue
        values = " | ".join(_config_value(difference.values, name) for name in environments)
        lines.append(f"{difference.key}: {values}")
    return Text("\n".join(lines)) if lines else Text("-", style="dim")


def _reasons(row: DiffRow) -> Text:
    said: list[str] = []
    for difference in row.differences:
        if difference.reason is Reason.CONFIG:
            words = "config differs"
        else:
            words = _REASON_WORDS[difference.reason].format(
                environment=difference.environment, compared_with=difference.compared_with
            )
        if words not in said:
            said.append(words)
    if not said:
        return Text("same", style="green")
    return Text("\n".join(said))


def diff_rows(diff: EnvironmentDiff) -> Rows:
    return Rows(
        ("workload", "cluster type", *diff.environments, "config differences", "why"),
        [
            (
                row.workload,
                row.cluster_type
                + ("" if row.deployment_target is None else f" ({row.deployment_target})"),
                *(_cell(row, cell) for cell in row.environments),
                _config(row, diff.environments),
                _reasons(row),
            )
            for row in diff.rows.items
        ],
        title=f"{' → '.join(diff.promotion_order)}: desired → deployed "
        f"(clusters as of {when(diff.deployed_at)})",
    )


def render_diff(diff: EnvironmentDiff) -> None:
    page = diff.rows
    if page.items:
        console.print(rows_table(diff_rows(diff)))
    noun = "differing rows" if diff.filters.only_differences else "rows"
    print_page_footer(noun, page, total=page.total)


def diff(
    environments: Annotated[
        list[str],
        typer.Argument(
            help="Two or more environments, in promotion order unless the hub knows theirs.",
            show_default=False,
        ),
    ],
    workload: Annotated[
        str | None, typer.Option("--workload", "-w", help="Only this workload.")
    ] = None,
    cluster_type: ClusterTypeFilter = None,
    target: Annotated[
        str | None,
        typer.Option("--target", help="Only rows where this deployment target is assigned."),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also the rows that do not differ.")
    ] = False,
    ignore_key: Annotated[
        list[str] | None,
        typer.Option("--ignore-key", help="A platform config key not to compare (repeatable)."),
    ] = None,
    limit: LimitOption = 100,
    offset: OffsetOption = 0,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """How environments differ: per workload and cluster type, the desired and deployed
    versions side by side, the config keys that differ, and why."""
    token = api_token(token, token_file)
    answer = ask(
        hub,
        token,
        lambda client: client.diff(
            environments,
            workload=workload,
            cluster_type=cluster_type,
            deployment_target=target,
            only_differences=not show_all,
            ignore_keys=ignore_key or (),
            limit=limit,
            offset=offset,
        ),
        options={
            "environment": "ENVIRONMENTS",
            "deployment_target": "--target",
            "only_differences": "--all",
        },
    )
    show(answer, output, diff_rows, render_diff)


def register(app: typer.Typer) -> None:
    app.command()(diff)
