"""Commands that ask a running hub over HTTP with an API token (the gate, the fleet queries).

A CI pipeline or a laptop has the hub's URL and a token, not its database, so these go through
the API with hub.client. Shared here: the hub's options, how a refusal is said, and the times,
tables and page footers of the query commands.
"""

import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Protocol, TypeVar

import typer
from pydantic import TypeAdapter, ValidationError
from rich.markup import escape

from hub.cli.output import Cell, console, fail, invalid, option_name, short_sha
from hub.cli.secret_files import read_secret_file
from hub.client import HubClient, HubError, HubRefused
from hub.client.client import check_url
from hub.client.text import Duration, format_duration

T = TypeVar("T")

HubOption = Annotated[str, typer.Option(envvar="FLEETMARK_HUB_URL", help="The hub's URL.")]
TokenOption = Annotated[
    str | None,
    typer.Option(
        envvar="FLEETMARK_TOKEN", help="An API token: read scope for queries, admin to administer."
    ),
]
TokenFileOption = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        help="A file holding the API token (instead of --token: not in the shell's history).",
        show_default=False,
    ),
]


def api_token(token: str | None, token_file: Path | None) -> str | None:
    """The token to send: from --token-file when given (it wins over FLEETMARK_TOKEN), else
    --token / FLEETMARK_TOKEN."""
    return token if token_file is None else read_secret_file(token_file, "--token-file")


def refusal(refused: HubRefused, options: Mapping[str, str] | None = None) -> str:
    """Why the hub refused, in its words; each rule a 422 names in plain words, a query
    parameter by the option it came from: `--environment: must be at most 63 characters`."""
    if refused.status == 422 and refused.problems:
        return invalid(
            (
                option_name(problem.field, options)
                if problem.location == "query"
                else problem.field or "the request",
                problem.message,
            )
            for problem in refused.problems
        )
    return str(refused)


def said(error: HubError, token: str | None, options: Mapping[str, str] | None = None) -> str:
    """What a command says when the hub gave no answer: the hub's words (and, refused for want
    of a token, how to give one)."""
    if not isinstance(error, HubRefused):
        return str(error)
    hint = ""
    if error.status == 401 and token is None:
        hint = "; give an API token with --token, --token-file or FLEETMARK_TOKEN"
    return refusal(error, options) + hint


def hub_url(hub: str) -> str:
    """The hub's address (--hub); one that is not an address ends the command."""
    try:
        return check_url(hub)
    except ValueError as exc:
        raise fail(escape(f"--hub: {exc}")) from None


def ask(
    hub: str,
    token: str | None,
    question: Callable[[HubClient], T],
    *,
    options: Mapping[str, str] | None = None,
) -> T:
    """The hub's answer to `question`; an unreachable hub or a refusal ends the command with
    the hub's words. `options` names the command's option for each query parameter not named
    as it is."""
    with HubClient(hub_url(hub), token=token) as client:
        try:
            return question(client)
        except HubError as exc:
            raise fail(said(exc, token, options)) from None


# --- what the query commands share: options, times, tables, pages -----------------------------

EnvironmentFilter = Annotated[
    str | None, typer.Option("--environment", "-e", help="Only this environment.")
]
ClusterTypeFilter = Annotated[
    str | None, typer.Option("--cluster-type", "-t", help="Only this cluster type.")
]
# A range of history, as `moment` reads its ends.
SinceOption = Annotated[
    str | None,
    typer.Option(
        help="From this time on: 2026-11-22T12:00:00Z (UTC unless it names an offset), "
        "or a duration back from now (7d, 90m)."
    ),
]
UntilOption = Annotated[
    str | None, typer.Option(help="Before this time, as --since takes it (default: now).")
]
# The API's bounds, so a bad value is refused before anything is asked.
LimitOption = Annotated[int, typer.Option(min=1, max=1000, help="Rows per page (1 to 1000).")]
OffsetOption = Annotated[int, typer.Option(min=0, help="Rows to skip: where the page starts.")]

_DURATION = TypeAdapter(Duration)
_SHA = re.compile(r"\b[0-9a-f]{40,64}\b")


def short_revision(revision: str | None) -> Cell | None:
    """A revision with its shas cut to 12 digits on a terminal (`dev@sha1:1f2e3d4c5b6a`); a
    table elsewhere and CSV have it whole."""
    if revision is None:
        return None
    return Cell(_SHA.sub(lambda found: short_sha(found[0]), revision), revision)


def ago(now: datetime, moment: datetime | None) -> str | None:
    """`5m ago`; None when there is no such moment."""
    return None if moment is None else f"{format_duration(now - moment)} ago"


def ago_cell(now: datetime, moment: datetime | None) -> Cell | None:
    """`5m ago` for people, the time itself in CSV."""
    shown = ago(now, moment)
    return None if shown is None else Cell(shown, moment)


def page_footer(
    noun: str,
    *,
    offset: int,
    limit: int,
    shown: int,
    total: int | None = None,
    next_offset: int | None = None,
) -> str:
    """Where this page lies: `page 2 of 4 · clusters 101-200 of 350 · next: --offset 200`.

    Without a total (a list the hub does not count), the page number alone and whether
    another page follows.
    """
    if total is not None and next_offset is None and offset + shown < total:
        next_offset = offset + shown
    if shown == 0:
        if total is not None and total > 0:
            return f"no {noun} from --offset {offset} ({total:,} in all)"
        return f"no {noun}" if offset == 0 else f"no {noun} from --offset {offset}"
    page = offset // limit + 1
    pages = "" if total is None else f" of {max(page, math.ceil(total / limit)):,}"
    rows = f"{noun} {offset + 1:,}-{offset + shown:,}" + ("" if total is None else f" of {total:,}")
    more = "last page" if next_offset is None else f"next: --offset {next_offset}"
    return f"page {page:,}{pages} · {rows} · {more}"


class Page(Protocol):
    """A page of a list the hub answered: where it starts, how long pages are, its rows."""

    @property
    def offset(self) -> int: ...
    @property
    def limit(self) -> int: ...
    @property
    def items(self) -> Sequence[object]: ...


def print_page_footer(
    noun: str, page: Page, *, total: int | None = None, next_offset: int | None = None
) -> None:
    console.print(
        page_footer(
            noun,
            offset=page.offset,
            limit=page.limit,
            shown=len(page.items),
            total=total,
            next_offset=next_offset,
        ),
        highlight=False,
    )


def moment(option: str, value: str | None, now: datetime) -> datetime | None:
    """An ISO 8601 time (UTC unless it names an offset) or a duration back from `now`."""
    if value is None:
        return None
    try:
        found = datetime.fromisoformat(value)
    except ValueError:
        found = now - _back(option, value)
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def _back(option: str, value: str) -> timedelta:
    try:
        ago: timedelta = _DURATION.validate_python(value)
    except ValidationError:
        raise fail(
            f"{option}: {value!r} is neither a time (2026-11-22, 2026-11-22T12:00:00Z) "
            "nor a duration back from now (90m, 7d, PT2H)"
        ) from None
    if ago < timedelta(0):
        raise fail(f"{option}: a duration back from now must not be negative, got {value!r}")
    return ago
