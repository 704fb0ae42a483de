"""`fleetmark harvest`: harvest the GitOps repositories now. The hub runs it (202, polled until
done); on the hub's host, with `--data-dir`/`--database-url`, it runs here with a progress bar
per branch for long backfills."""

import asyncio
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from hub.cli.common import open_database
from hub.cli.output import (
    Output,
    OutputOption,
    Rows,
    console,
    errors,
    fail,
    rows_table,
    short_sha,
    show,
)
from hub.cli.target import IntervalOption, Remote, Target, administers, answered, follow
from hub.client.schemas.runs import BranchOutcome, HarvestReport, RepositoryOutcome
from hub.database import create_engine, create_sessionmaker
from hub.errors import FleetmarkError
from hub.harvest import schemas as harvested
from hub.harvest import tasks
from hub.settings import HubSettings


class _Bar:
    """The harvest's progress as one rich bar per branch with new commits."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task: TaskID | None = None

    def branch(self, repository: str, branch: str, commits: int) -> None:
        if commits:
            name = repository.rsplit("/", 1)[-1]
            self._task = self._progress.add_task(f"{name} {branch}", total=commits)

    def advance(self, commits: int) -> None:
        if self._task is not None:
            self._progress.advance(self._task, commits)


async def _harvest(
    url: str, settings: HubSettings, repo: str | None, backfill: bool, progress: _Bar
) -> harvested.HarvestReport:
    engine = create_engine(url, settings)
    try:
        return await tasks.harvest(
            create_sessionmaker(engine),
            settings,
            clock=lambda: datetime.now(UTC),
            only=repo,
            backfill=backfill,
            progress=progress,
        )
    finally:
        await engine.dispose()


def harvest(
    repo: Annotated[
        str | None, typer.Option("--repo", help="Harvest only the repository with this URL.")
    ] = None,
    backfill: Annotated[
        bool,
        typer.Option(
            "--backfill", help="Read every branch again from its first commit (ranges rebuilt)."
        ),
    ] = False,
    output: OutputOption = Output.table,
    interval: IntervalOption = 2.0,
    *,
    where: Target,
) -> None:
    """Harvest the configured and discovered GitOps repositories now."""
    if isinstance(where, Remote):
        run = where.ask(
            lambda client: follow(
                client, client.start_harvest(repository=repo, backfill=backfill), interval
            )
        )
        report = run.harvest
        assert report is not None
    else:
        report = _harvest_here(where, repo, backfill, output)
    show(report, output, _rows, _show)


def _harvest_here(
    settings: HubSettings, repo: str | None, backfill: bool, output: Output
) -> HarvestReport:
    url = open_database(settings, upgrade=False)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("commits"),
        TimeElapsedColumn(),
        console=errors,
        transient=output is not Output.table,
    )
    try:
        with progress:
            done = asyncio.run(_harvest(url, settings, repo, backfill, _Bar(progress)))
    except FleetmarkError as exc:
        raise fail(exc.detail) from exc
    return answered(HarvestReport, done)


def _rows(report: HarvestReport) -> Rows:
    """A row per branch (one for a repository without any), each naming its repository."""
    return Rows(
        ("repository", "role", "branch", "new commits", "head", "errors"),
        [
            (
                outcome.url,
                outcome.role,
                None if branch is None else branch.name,
                None if branch is None else branch.new_commits,
                None if branch is None else _head(branch),
                Text(str(outcome.errors), style="red" if outcome.errors else ""),
            )
            for outcome in report.repositories
            for branch in _branches(outcome)
        ],
    )


def _head(branch: BranchOutcome) -> Text | None:
    """The branch's head commit, and whether its history was rewritten (a force-push)."""
    if branch.head_sha is None:
        return None
    head = Text(short_sha(branch.head_sha))
    return head.append(" (rewritten)", style="yellow") if branch.rewritten else head


def _branches(outcome: RepositoryOutcome) -> list[BranchOutcome | None]:
    return [*outcome.branches] or [None]


def _show(report: HarvestReport) -> None:
    console.print(rows_table(_rows(report)))
    console.print(
        f"{len(report.repositories)} repositories in {report.seconds:.1f} s; "
        "errors are listed by GET /api/v1/repositories",
        style="dim",
    )


def register(app: typer.Typer) -> None:
    app.command()(administers(harvest))
