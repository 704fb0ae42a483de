"""`fleetmark schedule`: schedule an environment from a control plane into the platform GitOps
repository now, and show what changed and what failed. The hub runs it (202, polled until
done); on the hub's host, with `--data-dir`/`--database-url`, it runs here."""

import asyncio
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.text import Text

from hub.cli.common import open_database
from hub.cli.exits import ExitCode
from hub.cli.output import (
    Output,
    OutputOption,
    Rows,
    console,
    fail,
    rows_table,
    show,
    validation_failure,
)
from hub.cli.target import IntervalOption, Remote, Target, administers, answered, follow
from hub.client.schemas.runs import AssignmentChange, EnvironmentOutcome, ScheduleRun
from hub.database import create_engine, create_sessionmaker
from hub.errors import FleetmarkError
from hub.scheduling import schemas as scheduling
from hub.scheduling import tasks
from hub.scheduling.schemas import ScheduleRequest
from hub.settings import HubSettings


class Mode(StrEnum):
    direct = "direct"
    branch = "branch"


async def _schedule(
    url: str, settings: HubSettings, request: ScheduleRequest
) -> scheduling.ScheduleRun:
    engine = create_engine(url, settings)
    try:
        return await tasks.schedule(
            create_sessionmaker(engine), settings, request, clock=lambda: datetime.now(UTC)
        )
    finally:
        await engine.dispose()


def schedule(
    control_plane: Annotated[
        str,
        typer.Option(
            "--control-plane",
            help="Control-plane repository: main and a branch per environment. A URL, or a "
            "local clone (its branches are read, not its uncommitted changes).",
        ),
    ],
    environment: Annotated[str, typer.Option("--environment", "-e", help="Environment.")],
    gitops: Annotated[
        str,
        typer.Option("--gitops", help="Platform GitOps repository (URL or local path)."),
    ],
    mode: Annotated[
        Mode,
        typer.Option(
            "--mode",
            help="direct: commit to the environment branch; "
            "branch: to a new deployment/<timestamp>-<environment> branch for a pull request.",
        ),
    ] = Mode.direct,
    output: OutputOption = Output.table,
    interval: IntervalOption = 2.0,
    *,
    where: Target,
) -> None:
    """Schedule an environment and write one commit to the platform GitOps repository.

    Nothing is committed when nothing changed. Exit 1: some assignments failed (each keeps its
    old output) or documents did not load; 2: nothing could be written (the environment did
    not load, git failed).

    Through the hub, repository paths are those of the hub's host.
    """
    try:
        request = ScheduleRequest.model_validate(
            {
                "control_plane": control_plane,
                "gitops": gitops,
                "environments": [environment],
                "mode": mode.value,
            }
        )
    except ValidationError as exc:
        raise fail(validation_failure(exc, {"environments": "--environment"})) from exc
    if isinstance(where, Remote):
        started = where.ask(
            lambda client: follow(
                client,
                client.start_schedule(
                    control_plane=request.control_plane,
                    gitops=request.gitops,
                    environments=request.environments,
                    mode=request.mode,
                ),
                interval,
            )
        )
        run = started.schedule
        assert run is not None
    else:
        run = _schedule_here(where, request)
    show(run, output, _changes, _show_run)
    if any(outcome.failure is not None for outcome in run.environments):
        raise typer.Exit(code=ExitCode.NO_ANSWER)
    if any(outcome.errors for outcome in run.environments):
        raise typer.Exit(code=ExitCode.NO)


def _schedule_here(settings: HubSettings, request: ScheduleRequest) -> ScheduleRun:
    url = open_database(settings, upgrade=False)
    try:
        done = asyncio.run(_schedule(url, settings, request))
    except FleetmarkError as exc:
        raise fail(exc.detail) from exc
    return answered(ScheduleRun, done)


_CHANGE_HEADERS = ("cluster type", "deployment target", "change", "status")


def _changes(run: ScheduleRun) -> Rows:
    """Every assignment the run changed, by environment: what `--output csv` writes."""
    return Rows(
        ("environment", *_CHANGE_HEADERS),
        [
            (outcome.environment, *_change(change))
            for outcome in run.environments
            for change in outcome.changes
        ],
    )


def _change(change: AssignmentChange) -> tuple[object, ...]:
    status = (
        Text("failed, previous output kept", style="red")
        if change.status == "failed"
        else change.status
    )
    return (change.cluster_type, change.deployment_target, change.change, status)


def _show_run(run: ScheduleRun) -> None:
    for outcome in run.environments:
        _show(outcome)


def _show(outcome: EnvironmentOutcome) -> None:
    where = f"[bold]{outcome.environment}[/] of {outcome.gitops_url}"
    if outcome.failure is not None:
        console.print(f"{where}: [bold red]nothing written[/]: {escape(outcome.failure)}")
    elif outcome.commit is not None:
        promoted = (
            f"; promotes control-plane commit {outcome.promoted_commit}"
            if outcome.promoted_changed
            else ""
        )
        console.print(
            f"{where}: committed [green]{outcome.commit[:12]}[/] to {outcome.branch}{promoted}"
        )
    elif outcome.already_proposed is not None:
        console.print(f"{where}: this change is proposed already on {outcome.already_proposed}")
    else:
        console.print(f"{where}: nothing changed, nothing committed")
    if outcome.changes:
        console.print(
            rows_table(Rows(_CHANGE_HEADERS, [_change(change) for change in outcome.changes]))
        )
    if outcome.failure is None:
        console.print(
            f"{outcome.assignments} assignments, {outcome.failed} failed; "
            f"{len(outcome.written)} files written, {len(outcome.deleted)} deleted "
            f"({outcome.render} render)",
            style="dim",
        )
    if outcome.held:
        console.print(
            f"[yellow]{len(outcome.held)} files kept that this render no longer produces[/]: "
            "the control plane has load errors; fix them to let the scheduler remove them"
        )
    if outcome.errors:
        console.print("errors:", style="bold red")
        for problem in outcome.errors:
            console.print(f"  [red]{problem.kind}[/] {escape(problem.message)}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(administers(schedule))
