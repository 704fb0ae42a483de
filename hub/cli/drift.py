"""`fleetmark drift`: what is drifted in the fleet and why, or with `--history` how long each
cluster (or object) was drifted, asked of a running hub (GET /api/v1/drift, /drift/history).

A table with short evidence per row ("2 commits behind for 3h") and a summary line; CSV or the
hub's JSON for scripts. `--exit-code` exits 1 when something is drifted, as `git diff` does.
"""

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.text import Text

from hub.cli.exits import ExitCode
from hub.cli.output import Output, OutputOption, Rows, console, fail, rows_table, show
from hub.cli.remote import (
    ClusterTypeFilter,
    EnvironmentFilter,
    HubOption,
    LimitOption,
    OffsetOption,
    TokenFileOption,
    TokenOption,
    ago,
    ago_cell,
    api_token,
    ask,
    moment,
    print_page_footer,
)
from hub.client import DEFAULT_HUB
from hub.client.schemas.drift import (
    DriftHistory,
    DriftItem,
    DriftPeriod,
    DriftReason,
    DriftReport,
    Reason,
)
from hub.client.text import format_duration

# The query parameters given by an option of another name.
_OPTIONS = {"include_in_sync": "--all", "level": "--objects"}

_REASON_STYLES = {
    Reason.FAILING: "bold red",
    Reason.STALE: "yellow",
    Reason.DIVERGED: "red",
    Reason.UNKNOWN_REVISION: "magenta",
}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _for(seconds: float | None) -> str:
    return "" if seconds is None else f" for {format_duration(timedelta(seconds=seconds))}"


def evidence(reason: DriftReason) -> str:
    """A reason in a few words, for a table cell."""
    match reason.reason:
        case Reason.BEHIND:
            return f"{_plural(reason.commits or 0, 'commit')} behind{_for(reason.seconds)}"
        case Reason.FAILING:
            return f"failing: {reason.reconciler_reason or reason.message or 'not Ready'}"
        case Reason.STALE:
            return "never reported" if reason.since is None else f"stale{_for(reason.seconds)}"
        case Reason.CONFIG_MISMATCH:
            changed = sorted({key for item in reason.config or () for key in item.keys})
            return f"config differs ({', '.join(changed) or 'hash'})"
        case Reason.NOT_APPLIED:
            return "nothing applied"
        case Reason.UNKNOWN_REVISION:
            return "unknown revision"
        case _:
            return reason.reason.replace("_", " ")


def _reasons(item: DriftItem) -> Text:
    if not item.reasons:
        return Text("in sync", style="green")
    text = Text()
    for index, reason in enumerate(item.reasons):
        if index:
            text.append("; ")
        text.append(evidence(reason), style=_REASON_STYLES.get(reason.reason, "yellow"))
    return text


def _object(item: DriftItem) -> str | None:
    found = item.object
    return None if found is None else f"{found.kind}/{found.namespace}/{found.name}"


def _placed(environment: str | None, cluster_type: str | None) -> str:
    return f"{environment or '-'}/{cluster_type or '-'}"


def summary_line(report: DriftReport) -> str:
    """`5 drifted objects in 3 clusters · behind 2, failing 1, stale 2 · judged 20s ago`."""
    summary = report.summary
    counts = ", ".join(
        f"{reason.value.replace('_', ' ')} {count:,}"
        for reason, count in summary.reasons.items()
        if count
    )
    parts = [
        f"{_plural(summary.drifted_objects, 'drifted object')} in "
        f"{_plural(summary.drifted_clusters, 'cluster')}",
    ]
    if counts:
        parts.append(counts)
    if summary.untracked:
        parts.append(f"{summary.untracked:,} following no harvested branch")
    parts.append(
        "not judged yet: the hub's drift job has not run"
        if report.evaluated_at is None
        else f"judged {ago(report.now, report.evaluated_at)}"
    )
    return " · ".join(parts)


def drift_rows(report: DriftReport) -> Rows:
    return Rows(
        ("cluster", "env/type", "object", "reasons", "drifted since"),
        [
            (
                item.cluster,
                _placed(item.environment, item.cluster_type),
                _object(item),
                _reasons(item),
                ago_cell(report.now, item.drifted_since),
            )
            for item in report.items
        ],
    )


def render_drift(report: DriftReport) -> None:
    if report.items:
        console.print(rows_table(drift_rows(report)))
        print_page_footer("rows", report, total=report.total)
    console.print(summary_line(report), highlight=False)


def history_rows(history: DriftHistory) -> Rows:
    span = "all history" if history.since is None else f"since {history.since:%Y-%m-%d %H:%M:%S}"
    return Rows(
        ("cluster", "env/type", "object", "drifted", "periods", "now", "last period"),
        [
            (
                item.cluster,
                _placed(item.environment, item.cluster_type),
                None if item.object is None else f"{item.object.kind}/{item.object.name}",
                format_duration(timedelta(seconds=item.drifted_seconds)),
                len(item.periods),
                Text("drifted", style="yellow") if item.open else Text("in sync"),
                _period(item.periods[0]) if item.periods else None,
            )
            for item in history.items
        ],
        title=f"drift history, {span} until {history.until:%Y-%m-%d %H:%M:%S}",
    )


def render_history(history: DriftHistory) -> None:
    if history.items:
        console.print(rows_table(history_rows(history)))
    print_page_footer(
        "clusters" if history.level == "cluster" else "objects", history, total=history.total
    )


def _period(period: DriftPeriod) -> str:
    end = "open" if period.ended_at is None else f"{period.ended_at:%Y-%m-%d %H:%M:%S}"
    reasons = ", ".join(reason.value.replace("_", " ") for reason in period.reasons)
    return (
        f"{period.started_at:%Y-%m-%d %H:%M:%S} to {end} "
        f"({format_duration(timedelta(seconds=period.seconds))}: {reasons})"
    )


def drift(
    environment: EnvironmentFilter = None,
    cluster_type: ClusterTypeFilter = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", "-c", help="Only this cluster.")
    ] = None,
    reason: Annotated[
        list[Reason] | None,
        typer.Option("--reason", "-r", help="Only rows with this reason (repeatable)."),
    ] = None,
    include_in_sync: Annotated[
        bool, typer.Option("--all", help="Also the objects that are in sync.")
    ] = False,
    history: Annotated[
        bool,
        typer.Option("--history", help="How long each cluster was drifted, period by period."),
    ] = False,
    objects: Annotated[
        bool, typer.Option("--objects", help="With --history: each object, not each cluster.")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            help="With --history: from this time on, 2026-11-22T12:00:00Z or a duration back "
            "from now (7d, 90m)."
        ),
    ] = None,
    open_only: Annotated[
        bool, typer.Option("--open", help="With --history: only what is drifted now.")
    ] = False,
    exit_code: Annotated[
        bool,
        typer.Option(
            "--exit-code",
            help="Exit 1 when anything asked about is drifted (for scripts and CI), 0 when "
            "nothing is.",
        ),
    ] = False,
    limit: LimitOption = 100,
    offset: OffsetOption = 0,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """Drifted reconciler objects and why: behind the harvested head (by how many commits, for
    how long), diverged, failing, stale agent, config mismatch, live drift."""
    token = api_token(token, token_file)
    misplaced = (
        ["--reason", "--all", "--exit-code"] if history else ["--objects", "--since", "--open"]
    )
    given = {
        "--reason": bool(reason),
        "--all": include_in_sync,
        "--exit-code": exit_code,
        "--objects": objects,
        "--since": since is not None,
        "--open": open_only,
    }
    for option in misplaced:
        if given[option]:
            mode = "with --history" if history else "without --history"
            raise fail(f"{option} does not apply {mode}")
    if history:
        start = moment("--since", since, datetime.now(UTC))
        found = ask(
            hub,
            token,
            lambda client: client.drift_history(
                environment=environment,
                cluster_type=cluster_type,
                cluster=cluster,
                level="object" if objects else "cluster",
                since=start,
                open_only=open_only,
                limit=limit,
                offset=offset,
            ),
            options=_OPTIONS,
        )
        show(found, output, history_rows, render_history)
        return
    report = ask(
        hub,
        token,
        lambda client: client.drift(
            environment=environment,
            cluster_type=cluster_type,
            cluster=cluster,
            reasons=reason or (),
            include_in_sync=include_in_sync,
            limit=limit,
            offset=offset,
        ),
        options=_OPTIONS,
    )
    show(report, output, drift_rows, render_drift)
    if exit_code and report.summary.drifted_objects:
        raise typer.Exit(ExitCode.NO)


def register(app: typer.Typer) -> None:
    app.command()(drift)
