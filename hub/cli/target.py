"""Where an administration command does its work: the hub's API, or the database directly.

The API is the normal path; `--data-dir` or `--database-url` without `--hub` is the operator's
escape hatch. `act` takes the client call and the service call, and either answer is read as
the client's model; `follow` polls a 202 run, printing progress on stderr.
"""

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from sqlalchemy.ext.asyncio import AsyncSession

from hub.cli.common import DataDirOption, load_settings, run_in_session
from hub.cli.output import errors, fail
from hub.cli.remote import HubOption, TokenFileOption, TokenOption, api_token, ask
from hub.client import DEFAULT_HUB, HubClient
from hub.client.schemas.runs import RequestedRun
from hub.settings import HubSettings

T = TypeVar("T")
A = TypeVar("A", bound=BaseModel)

DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="FLEETMARK_DATABASE_URL",
        help="Work on this database directly (on the hub's host) instead of asking the hub.",
        show_default=False,
    ),
]
IntervalOption = Annotated[
    float,
    typer.Option("--interval", min=0.1, help="Seconds between polls of a run the hub started."),
]


# The parameters `administers` adds: the command's context, then where it works.
_WHERE: tuple[tuple[str, Any, Any], ...] = (
    ("context", typer.Context, inspect.Parameter.empty),
    ("hub", HubOption, DEFAULT_HUB),
    ("token", TokenOption, None),
    ("token_file", TokenFileOption, None),
    ("data_dir", DataDirOption, None),
    ("database_url", DatabaseUrlOption, None),
)


@dataclass(frozen=True, slots=True)
class Remote:
    """The hub's API, with the token to call it."""

    url: str
    token: str | None

    def ask(self, question: Callable[[HubClient], T]) -> T:
        """The hub's answer; an unreachable hub or a refusal ends the command."""
        return ask(self.url, self.token, question)


Target = Remote | HubSettings


def administers(command: Callable[..., None]) -> Callable[..., None]:
    """`command`, which takes `where: Target`, as a command with the options that say where
    (--hub, --token, --token-file, --data-dir, --database-url), declared once for all."""
    signature = inspect.signature(command, eval_str=True)
    kept = [parameter for parameter in signature.parameters.values() if parameter.name != "where"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        for name, kind, default in _WHERE
    ]

    @functools.wraps(command)
    def run(**given: Any) -> None:
        where = target(given.pop("context"), *(given.pop(name) for name, _, _ in _WHERE[1:]))
        command(where=where, **given)

    run.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    run.__annotations__ = {parameter.name: parameter.annotation for parameter in [*kept, *added]}
    return run


def target(
    context: typer.Context,
    hub: str,
    token: str | None,
    token_file: Path | None,
    data_dir: Path | None,
    database_url: str | None,
) -> Target:
    """The hub, unless a database is given (and `--hub` is not): then its settings."""
    given = {name for name in ("hub", "data_dir", "database_url") if _typed(context, name)}
    hub_given = "hub" in given
    if hub_given and len(given) > 1:
        raise fail("give --hub, or --data-dir/--database-url on the hub's host; not both")
    if not hub_given and (data_dir is not None or database_url is not None):
        return load_settings(data_dir, database_url)
    return Remote(hub, api_token(token, token_file))


def _typed(context: typer.Context, parameter: str) -> bool:
    """Whether the parameter was given on the command line (not from a variable, a default)."""
    source = context.get_parameter_source(parameter)
    return source is not None and source.name == "COMMANDLINE"


def act(
    where: Target,
    remote: Callable[[HubClient], A],
    direct: Callable[[HubSettings, AsyncSession], Awaitable[object]],
    answer: type[A],
) -> A:
    """The command's work on the hub (`remote`) or on its database (`direct`), its answer
    read as `answer` either way."""
    if isinstance(where, Remote):
        return where.ask(remote)
    return answered(answer, run_in_session(where, lambda session: direct(where, session)))


def do(
    where: Target,
    remote: Callable[[HubClient], None],
    direct: Callable[[HubSettings, AsyncSession], Awaitable[None]],
) -> None:
    """The command's work, which answers nothing, on the hub or on its database."""
    if isinstance(where, Remote):
        where.ask(remote)
    else:
        run_in_session(where, lambda session: direct(where, session))


def answered(answer: type[A], value: object) -> A:
    """What a service answered on the database path, read as the client's model of the same
    wire document: printed by the same code as the hub's answer."""
    return answer.model_validate(to_jsonable_python(value))


def follow(client: HubClient, run: RequestedRun, interval: float) -> RequestedRun:
    """Poll a run the hub started until it is done; a line of progress on stderr each poll."""

    def progress(run: RequestedRun, waited: float) -> None:
        errors.print(f"{run.job} run {run.id}: running for {waited:.0f} s", highlight=False)

    run = client.wait_for_run(run, interval=interval, progress=progress)
    errors.print(f"{run.job} run {run.id}: {run.outcome}", highlight=False)
    if run.outcome == "failed":
        raise fail(f"the {run.job} failed: {run.error}")
    return run
