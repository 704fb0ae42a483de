"""`fleetmark gate wait`: poll the hub's promotion gate until it passes, fails or time runs out.

It asks a running hub over HTTP (GET /api/v1/gates/promotion with a read token); progress goes
to stderr, the answer to stdout. A commit not harvested yet, or a busy or unreachable hub, may
change by waiting, so it keeps polling until the timeout (exit codes in docs/concepts.md).
"""

import asyncio
import getpass
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from types import TracebackType
from typing import Annotated

import httpx
import typer
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from hub.cli.exits import ExitCode
from hub.cli.output import (
    Output,
    OutputOption,
    Rows,
    console,
    errors,
    fail,
    on_terminal,
    plain_rule,
    print_csv,
    print_json,
    rows_table,
)
from hub.cli.remote import (
    HubOption,
    TokenFileOption,
    TokenOption,
    api_token,
    hub_url,
    refusal,
    short_revision,
)
from hub.cli.remote import (
    ask as remote_ask,
)
from hub.client import DEFAULT_HUB, HubRefused, UnexpectedAnswer
from hub.client.client import TIMEOUT, bearer, read_answer
from hub.client.operations import PROMOTION_GATE, Query, asked
from hub.client.schemas.gate import ClusterState, GateQuery, GateResult, Verdict
from hub.client.text import Duration, format_duration

# Hub errors that may go away by waiting: the harvester has not read the commit or version yet.
_WAIT_ON = {"unknown_commit", "unknown_version"}
_DURATION = TypeAdapter(Duration)
_STATE_STYLES = {
    ClusterState.COMPLIANT: "green",
    ClusterState.SOAKING: "cyan",
    ClusterState.FAILED: "bold red",
    ClusterState.NEVER_REPORTED: "red",
}
_VERDICT_STYLES = {
    Verdict.PASSED: "bold green",
    Verdict.PENDING: "bold yellow",
    Verdict.FAILED: "bold red",
}


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"


EXIT_CODES = {
    Outcome.PASSED: ExitCode.ANSWER,
    Outcome.FAILED: ExitCode.NO,
    Outcome.TIMED_OUT: ExitCode.PENDING,
}


class GateUnusable(Exception):
    """The hub refused the question; asking again will not change its answer."""


@dataclass(frozen=True, slots=True)
class Poll:
    """One look at the gate: its answer, or why there was none this time."""

    elapsed: float
    result: GateResult | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Waited:
    outcome: Outcome
    last: Poll


async def _poll(client: httpx.AsyncClient, params: Query, elapsed: float) -> Poll:
    try:
        response = await client.get(PROMOTION_GATE.path, params=_sent(params))
    except httpx.HTTPError as exc:
        return Poll(elapsed, problem=f"the hub is unreachable: {exc or type(exc).__name__}")
    try:
        return Poll(elapsed, result=read_answer(response, GateResult))
    except HubRefused as exc:
        if exc.status >= 500 or exc.error in _WAIT_ON:
            return Poll(elapsed, problem=str(exc))
        raise GateUnusable(refusal(exc)) from None
    except UnexpectedAnswer as exc:
        raise GateUnusable(str(exc)) from None


def _sent(params: Query) -> dict[str, str | Sequence[str]]:
    return {name: value for name, value in params.items() if value is not None}


def _next_look(poll: Poll, interval: float) -> float:
    """The interval, or less when the gate says it opens sooner."""
    result = poll.result
    if result is None or result.earliest_pass_at is None:
        return interval
    opens_in = (result.earliest_pass_at - result.evaluated_at).total_seconds()
    return min(interval, opens_in) if opens_in > 0 else interval


async def wait_for_gate(
    client: httpx.AsyncClient,
    params: Query,
    *,
    time_limit: float,
    interval: float,
    show: Callable[[Poll], None],
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Waited:
    """Ask the gate every `interval` seconds until it passes or fails, or `time_limit`
    seconds have gone by; GateUnusable when the hub refuses the question."""
    started = monotonic()
    while True:
        poll = await _poll(client, params, monotonic() - started)
        show(poll)
        if poll.result is not None and poll.result.verdict is Verdict.PASSED:
            return Waited(Outcome.PASSED, poll)
        if poll.result is not None and poll.result.verdict is Verdict.FAILED:
            return Waited(Outcome.FAILED, poll)
        remaining = time_limit - (monotonic() - started)
        if remaining <= 0:
            return Waited(Outcome.TIMED_OUT, poll)
        await sleep(min(_next_look(poll, interval), remaining))


# --- showing it -------------------------------------------------------------------------------


def summary(result: GateResult) -> str:
    counts = result.counts
    style = _VERDICT_STYLES[result.verdict]
    parts = [
        f"[{style}]{result.verdict}[/]",
        f"{result.target.description} in {result.target.environment}",
        f"{counts.compliant}/{counts.expected} compliant",
        f"{counts.reporting} reporting",
    ]
    if counts.stale:
        parts.append(f"{counts.stale} stale")
    if counts.never_reported:
        parts.append(f"{counts.never_reported} never reported")
    if result.verdict is Verdict.PENDING and result.earliest_pass_at is not None:
        parts.append(f"opens in {format_duration(result.earliest_pass_at - result.evaluated_at)}")
    return " · ".join(parts)


_CLUSTER_HEADERS = ("cluster", "type", "state", "applied", "ready since", "soak left", "why")


def cluster_rows(result: GateResult) -> Rows:
    page = result.clusters
    return Rows(
        _CLUSTER_HEADERS,
        [
            (
                cluster.name,
                cluster.cluster_type,
                Text(cluster.state, style=_STATE_STYLES.get(cluster.state, "yellow")),
                short_revision(cluster.applied_revision),
                cluster.ready_since,
                None
                if cluster.soak_remaining_seconds is None
                else format_duration(timedelta(seconds=cluster.soak_remaining_seconds)),
                cluster.explanation,
            )
            for cluster in page.items
        ],
        title=None
        if page.total <= len(page.items)
        else f"the {len(page.items)} furthest from compliance of {page.total} expected clusters",
    )


def _elapsed(seconds: float) -> str:
    """Time waited so far, in whole seconds: a first look a few milliseconds in reads 0s."""
    return format_duration(timedelta(seconds=math.floor(seconds)))


def _line(poll: Poll) -> str:
    elapsed = _elapsed(poll.elapsed)
    if poll.result is None:
        return f"[dim]{elapsed}[/] waiting: {poll.problem}"
    return f"[dim]{elapsed}[/] {summary(poll.result)}"


class _Progress:
    """Each poll on stderr: a live table on a terminal; in a log a line per poll (the time
    waited, the verdict and counts, or why there was no answer), and the gate's reasons
    whenever its answer changes (the soak countdown alone is not a change)."""

    def __init__(self, screen: Console) -> None:
        self._screen = screen
        self._live = Live(console=screen, auto_refresh=False, transient=True)
        self._last: tuple[object, ...] | None = None

    def __enter__(self) -> "_Progress":
        if on_terminal(self._screen.file):
            self._live.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._live.stop()

    def __call__(self, poll: Poll) -> None:
        if on_terminal(self._screen.file):
            shown = (
                _line(poll)
                if poll.result is None
                else Group(_line(poll), rows_table(cluster_rows(poll.result)))
            )
            self._live.update(shown, refresh=True)
            return
        result = poll.result
        state = (
            (poll.problem,)
            if result is None
            else (
                result.verdict,
                result.counts,
                tuple((c.name, c.state) for c in result.clusters.items),
            )
        )
        self._screen.print(_line(poll), highlight=False)
        if state != self._last:
            for reason in () if result is None else result.reasons:
                self._screen.print(f"  {reason}", highlight=False)
            self._last = state


class WaitOutcome(BaseModel):
    """What `gate wait --output json` prints."""

    outcome: Outcome
    waited_seconds: float
    problem: str | None = Field(description="Why the last poll got no answer, if it did not.")
    gate: GateResult | None = Field(description="The last answer of the gate.")


def _report(waited: Waited, output: Output, timeout: float) -> None:
    last = waited.last
    if output is Output.json:
        print_json(
            WaitOutcome(
                outcome=waited.outcome,
                waited_seconds=last.elapsed,
                problem=last.problem,
                gate=last.result,
            )
        )
        return
    if output is Output.csv:
        print_csv(cluster_rows(last.result) if last.result else Rows(_CLUSTER_HEADERS, []))
        return
    if last.result is not None:
        console.print(rows_table(cluster_rows(last.result)))
        console.print(summary(last.result), highlight=False)
        for reason in last.result.reasons:
            console.print(f"  {reason}", highlight=False)
    elapsed = _elapsed(last.elapsed)
    if waited.outcome is Outcome.TIMED_OUT:
        still = "still pending" if last.result is not None else f"last: {last.problem}"
        console.print(
            f"[bold yellow]timed out[/] after {format_duration(timedelta(seconds=timeout))}, "
            f"{still}",
            highlight=False,
        )
    else:
        console.print(f"gate {waited.outcome} after {elapsed}", highlight=False)


# --- the command ------------------------------------------------------------------------------


def _seconds(option: str, value: str) -> float:
    try:
        duration: timedelta = _DURATION.validate_python(value)
    except ValidationError as exc:
        raise fail(f"{option}: {plain_rule(exc.errors()[0]['msg'])}") from None
    if duration < timedelta(0):
        raise fail(f"{option}: must not be negative, got {value!r}")
    return duration.total_seconds()


gate = typer.Typer(help="The promotion gate, for CI pipelines.", no_args_is_help=True)


@gate.command("wait")
def wait(
    environment: Annotated[
        str, typer.Option("--environment", "-e", help="The environment the target is in.")
    ],
    commit: Annotated[
        str | None,
        typer.Option(help="Platform GitOps commit: full sha or a prefix of 7 or more."),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option("--workload", "-w", help="A workload (with --version) instead of a commit."),
    ] = None,
    version: Annotated[str | None, typer.Option(help="The workload's version.")] = None,
    soak: Annotated[
        str,
        typer.Option(help="How long every cluster must run it, Ready (seconds, 10m, PT10M)."),
    ] = "10m",
    allow_stale: Annotated[
        bool, typer.Option(help="Judge silent clusters on their last report.")
    ] = False,
    min_clusters: Annotated[
        int, typer.Option(help="Pending unless at least this many clusters are expected.")
    ] = 1,
    min_converged_ratio: Annotated[
        float | None,
        typer.Option(
            min=0,
            max=1,
            help="Pass once this share of the clusters is compliant (0.9), not all of them.",
        ),
    ] = None,
    max_time_to_converge: Annotated[
        str | None,
        typer.Option(
            help="Fail when this long after the commit too few clusters run it, Ready (2h)."
        ),
    ] = None,
    cluster_type: Annotated[
        list[str] | None,
        typer.Option(
            "--cluster-type",
            "-t",
            help="Only the clusters of this cluster type; repeatable (any of them).",
        ),
    ] = None,
    selector: Annotated[
        str | None,
        typer.Option(
            "--selector",
            "-l",
            help="Only the clusters whose labels it selects, as kubectl's -l "
            "(key=value,key!=value,key in (a,b),key notin (a),key,!key).",
        ),
    ] = None,
    timeout: Annotated[str, typer.Option(help="Give up after this long (exit 3).")] = "30m",
    interval: Annotated[str, typer.Option(help="Time between two looks at the gate.")] = "10s",
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """Wait for the promotion gate: exit 0 passed, 1 failed, 3 still pending at --timeout."""
    token = api_token(token, token_file)
    params = asked(
        GateQuery,
        environment=environment,
        commit=commit,
        workload=workload,
        version=version,
        soak=_seconds("--soak", soak),
        allow_stale=allow_stale,
        min_clusters=min_clusters,
        min_converged_ratio=min_converged_ratio,
        max_time_to_converge=None
        if max_time_to_converge is None
        else _seconds("--max-time-to-converge", max_time_to_converge),
        cluster_types=cluster_type or (),
        selector=selector,
    )
    timeout_seconds = _seconds("--timeout", timeout)
    interval_seconds = _seconds("--interval", interval)
    if interval_seconds == 0:
        raise fail(f"--interval: must be more than nothing, got {interval!r}")
    url = hub_url(hub)

    async def run(show: _Progress) -> Waited:
        async with httpx.AsyncClient(
            base_url=url, headers=bearer(token), timeout=TIMEOUT
        ) as client:
            return await wait_for_gate(
                client, params, time_limit=timeout_seconds, interval=interval_seconds, show=show
            )

    try:
        with _Progress(errors) as progress:
            waited = asyncio.run(run(progress))
    except GateUnusable as exc:
        raise fail(str(exc)) from None
    _report(waited, output, timeout_seconds)
    raise typer.Exit(code=EXIT_CODES[waited.outcome])


@gate.command("clear-halt")
def clear_halt(
    halt_id: Annotated[int, typer.Argument(help="The halt's id (GET /api/v1/recommendations).")],
    reason: Annotated[str, typer.Option(help="Why the change may be promoted after all.")],
    by: Annotated[str | None, typer.Option(help="Who clears it (default: the local user).")] = None,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """End a halt: its change may leave the environment again (admin)."""
    token = api_token(token, token_file)
    who = by or getpass.getuser()
    halt = remote_ask(hub, token, lambda client: client.clear_halt(halt_id, by=who, reason=reason))
    if output is Output.json:
        print_json(halt)
        return
    console.print(
        f"halt {halt.id} of {halt.description} in {halt.environment} cleared by {halt.cleared_by}",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(gate, name="gate")
