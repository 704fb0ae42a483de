"""Where an administration command does its work: the hub's API, or the database directly.

The API is the normal path (`--hub`, FLEETMARK_HUB_URL, with an admin token); the database is
the operator's escape hatch on the hub's host, taken only when `--data-dir` or
`--database-url` (or their FLEETMARK_ variables) is given and `--hub` is not. Either way the
command calls the same service behind the same wire shapes and prints them with the same code:
`act` takes the request the API is sent and the service call the database path makes.

A harvest or a scheduling run asked through the API answers 202 with the run; `follow` polls
it until it is done, with a line of progress on stderr at each poll.
"""

import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from hub.cli.common import DataDirOption, load_settings, run_in_session
from hub.cli.output import errors, fail
from hub.cli.remote import DEFAULT_HUB, HubOption, TokenFileOption, TokenOption, api_token, call
from hub.monitoring.schemas import RequestedRun
from hub.settings import HubSettings

T = TypeVar("T")

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

    def call(
        self,
        method: str,
        path: str,
        shape: Any,
        *,
        body: BaseModel | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        return call(self.url, self.token, method, path, shape, body=body, params=params)


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
    remote: Callable[[Remote], T],
    direct: Callable[[HubSettings, AsyncSession], Awaitable[T]],
) -> T:
    """The command's work on the hub (`remote`) or on its database (`direct`)."""
    if isinstance(where, Remote):
        return remote(where)
    return run_in_session(where, lambda session: direct(where, session))


def follow(hub: Remote, run: RequestedRun, interval: float) -> RequestedRun:
    """Poll a run the hub started until it is done; a line of progress on stderr each poll."""
    started = time.monotonic()
    while run.outcome == "running":
        waited = time.monotonic() - started
        errors.print(f"{run.job} run {run.id}: running for {waited:.0f} s", highlight=False)
        time.sleep(interval)
        run = hub.call("GET", f"/api/v1/runs/{run.id}", RequestedRun)
    errors.print(f"{run.job} run {run.id}: {run.outcome}", highlight=False)
    if run.outcome == "failed":
        raise fail(f"the {run.job} failed: {run.error}")
    return run
