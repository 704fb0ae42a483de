"""Commands that ask a running hub over HTTP with an API token (the gate, the fleet queries).

A CI pipeline or a platform engineer's laptop has the hub's URL and a read token, not its
database; these commands are for them, so they go through the same API as everyone else.
"""

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import httpx
import typer
from pydantic import BaseModel, TypeAdapter, ValidationError

from hub.cli.output import Cell, console, fail, invalid, option_name, short_sha
from hub.cli.secret_files import read_secret_file
from hub.gate.policy import format_duration

M = TypeVar("M", bound=BaseModel)

DEFAULT_HUB = "http://127.0.0.1:8080"

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

Params = Mapping[str, str | Sequence[str] | None]


def api_token(token: str | None, token_file: Path | None) -> str | None:
    """The token to send: from --token-file when given (it wins over FLEETMARK_TOKEN), else
    --token / FLEETMARK_TOKEN."""
    return token if token_file is None else read_secret_file(token_file, "--token-file")


def bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


def error_of(response: httpx.Response) -> tuple[str | None, str]:
    """The hub's error code and detail, or what little an unexpected answer says."""
    try:
        body = response.json()
        return body["error"], body["detail"]
    except (ValueError, KeyError, TypeError):
        return None, response.text[:200] or response.reason_phrase


def refusal(response: httpx.Response, options: Mapping[str, str] | None = None) -> str:
    """Why the hub refused, in its words; each rule a 422 names in plain words, a query
    parameter by the option it came from: `--environment: must be at most 63 characters`."""
    problems = _problems(response) if response.status_code == 422 else []
    if problems:
        return invalid(
            (option_name(field, options) if location == "query" else field or "the request", rule)
            for location, field, rule in problems
        )
    _, detail = error_of(response)
    return f"{detail} (HTTP {response.status_code})"


def _problems(response: httpx.Response) -> list[tuple[str, str, str]]:
    """The (location, field, message) of each rule a 422 answer names (hub.errors.Problem)."""
    try:
        return [
            (str(item["location"]), str(item["field"]), str(item["message"]))
            for item in response.json()["problems"]
        ]
    except (ValueError, KeyError, TypeError):
        return []


def unexpected(exc: ValidationError) -> str:
    """An answer this client cannot read, as its first problem: a hub of another version."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "the document"
    return f"{field}: {error['msg']} (is the hub another version of fleetmark?)"


def fetch(
    hub: str,
    token: str | None,
    path: str,
    params: Params,
    model: type[M],
    *,
    timeout: float = 30.0,
    options: Mapping[str, str] | None = None,
) -> M:
    """GET one document from the hub; an unreachable hub or a refusal ends the command.
    `options` names the command's option for each query parameter not named as it is."""
    query = {name: value for name, value in params.items() if value is not None}
    answer: M = call(hub, token, "GET", path, model, params=query, timeout=timeout, options=options)
    return answer


def call(
    hub: str,
    token: str | None,
    method: str,
    path: str,
    shape: Any,
    *,
    body: BaseModel | None = None,
    params: Params | None = None,
    timeout: float = 30.0,
    options: Mapping[str, str] | None = None,
) -> Any:
    """One request to the hub; its answer validated as `shape` (None: no body is read). An
    unreachable hub or a refusal ends the command with the hub's words (and, refused for want
    of a token, how to give one)."""
    headers = bearer(token)
    content = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        content = body.model_dump_json(exclude_none=True)
    try:
        with httpx.Client(base_url=hub, headers=headers, timeout=timeout) as client:
            response = client.request(method, path, params=params, content=content)
    except httpx.HTTPError as exc:
        raise fail(f"the hub at {hub} is unreachable: {exc or type(exc).__name__}") from None
    if not response.is_success:
        hint = ""
        if response.status_code == 401 and token is None:
            hint = "; give an API token with --token, --token-file or FLEETMARK_TOKEN"
        raise fail(refusal(response, options) + hint)
    if shape is None:
        return None
    try:
        return TypeAdapter(shape).validate_json(response.content)
    except ValidationError as exc:
        raise fail(f"the hub at {hub} answered {path} unexpectedly: {unexpected(exc)}") from None


# --- what the query commands share: options, tables, pages, JSON ------------------------------

EnvironmentFilter = Annotated[
    str | None, typer.Option("--environment", "-e", help="Only this environment.")
]
ClusterTypeFilter = Annotated[
    str | None, typer.Option("--cluster-type", "-t", help="Only this cluster type.")
]
# The API's bounds, so a bad value is refused before anything is asked.
LimitOption = Annotated[int, typer.Option(min=1, max=1000, help="Rows per page (1 to 1000).")]
OffsetOption = Annotated[int, typer.Option(min=0, help="Rows to skip: where the page starts.")]

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
