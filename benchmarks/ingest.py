"""Ingest benchmark: simulated clusters post report contract v1 to a running hub.

Paced open-loop (or closed with `--find-max`), beside a bare COPY of the same rows, optionally
against another checkout's hub on the same server; the set-up, the figures and how the load
generator keeps off the hub's cores are in docs/benchmarks.md ("Ingest").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import orjson
import psutil
import psycopg
from psycopg import sql

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/fleetmark_bench"
APPLICATION_NAME = "fleetmark-hub"
PROTECTED_DATABASES = {"postgres", "template0", "template1"}
# Distinct states every object cycles through (revision, and every fourth one failing).
VARIANTS = 8
SCRATCH_TABLES = ("bench_copy_status_transition", "bench_copy_object_state")
# --compare-commit-modes: the hub's environment for each run, by label.
COMMIT_MODES = (
    ("durable (default)", {"FLEETMARK_INGEST_SYNCHRONOUS_COMMIT": "true"}),
    ("asynchronous commit", {"FLEETMARK_INGEST_SYNCHRONOUS_COMMIT": "false"}),
)
# Timestamps come from the monotonic clock itself: uvloop's loop.time() has millisecond steps
# and is read once per loop iteration, too coarse for latencies of a few milliseconds.
now = time.monotonic


# ---------------------------------------------------------------------------------------
# Options


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/ingest.py",
        description=(
            "Drive POST /api/v1/reports of a `fleetmark serve` it starts, with many simulated "
            "clusters, and print throughput, latency, errors, hub memory/CPU, PostgreSQL CPU "
            "and a COPY baseline measured in the same run."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    load = parser.add_argument_group("load")
    load.add_argument("--clusters", type=int, default=1000, help="Simulated clusters.")
    load.add_argument("--objects", type=int, default=20, help="Objects in every report.")
    load.add_argument(
        "--changed",
        type=float,
        default=0.05,
        help="Share of a report's objects whose state changed since the cluster's last report "
        "(0.05 = 5 %%; fractions carry over, so 5 %% of 20 is one changed object per report).",
    )
    load.add_argument(
        "--rate",
        type=float,
        default=1000.0,
        help="Target reports per second, open-loop (each cluster reports every "
        "clusters/rate seconds). Ignored with --find-max.",
    )
    load.add_argument("--duration", type=float, default=60.0, help="Measured seconds.")
    load.add_argument(
        "--warmup",
        type=float,
        default=5.0,
        help="Seconds of steady-state load before measuring, after the first full snapshots.",
    )
    load.add_argument(
        "--snapshot-reports",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Send steady-state reports as full snapshots (the hub also checks for objects "
        "that vanished); --no-snapshot-reports sends them as partial reports.",
    )
    load.add_argument(
        "--find-max",
        action="store_true",
        help="Closed loop: keep --concurrency requests in flight for --duration and report the "
        "throughput reached (latency measured from each send).",
    )
    load.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="Requests in flight with --find-max (split across --processes).",
    )
    load.add_argument(
        "--processes",
        type=int,
        default=2,
        help="Load-generator processes; clusters and rate are split evenly between them.",
    )
    load.add_argument(
        "--connections",
        type=int,
        default=0,
        help="Keep-alive connections over all load processes; clusters share them evenly, one "
        "request at a time on each (0: one per cluster, as every agent keeps its own).",
    )
    load.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="Seconds to wait for outstanding responses after the last request is sent.",
    )
    hub = parser.add_argument_group("hub")
    hub.add_argument(
        "--workers",
        type=int,
        default=2,
        help="`fleetmark serve --workers`: one per core lets the hub's Python use both.",
    )
    hub.add_argument("--port", type=int, default=0, help="Hub port (0: a free port).")
    hub.add_argument(
        "--compare-commit-modes",
        action="store_true",
        help="Run twice, each on a fresh database: with the durable default (a report is "
        "answered once its commit is flushed to the WAL) and with asynchronous commit "
        "(FLEETMARK_INGEST_SYNCHRONOUS_COMMIT=false); print both and a side-by-side summary.",
    )
    hub.add_argument(
        "--hub-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Extra environment for the hub process, repeatable "
        "(e.g. FLEETMARK_DATABASE_POOL_SIZE=20).",
    )
    hub.add_argument(
        "--fleetmark",
        default=None,
        help="The fleetmark executable [default: the one next to this Python, else on PATH].",
    )
    hub.add_argument(
        "--baseline-fleetmark",
        type=Path,
        default=None,
        metavar="PATH",
        help="Another checkout of fleetmark, installed in its own PATH/.venv: measure its hub "
        "first, then this one, on the same database server, and print both side by side with "
        "their commits.",
    )
    database = parser.add_argument_group("database")
    where = database.add_mutually_exclusive_group()
    where.add_argument(
        "--database-url",
        default=DEFAULT_DATABASE_URL,
        help="PostgreSQL database to DROP and CREATE afresh for the run (its server's "
        "`postgres` database is used to do so); it is left in place afterwards.",
    )
    where.add_argument(
        "--embedded",
        action="store_true",
        help="Use the hub's embedded PostgreSQL in a temporary --data-dir instead.",
    )
    database.add_argument(
        "--timescaledb",
        action="store_true",
        help="Then run the same load on TimescaleDB (the embedded PostgreSQL with TimescaleDB "
        "preloaded; `bash .ci/timescaledb` installs it) and print both side by side.",
    )
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------------
# Report bodies, assembled from pre-encoded fragments


def _hex(seed: str, width: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:width]


def object_fragments(objects: int) -> list[list[bytes]]:
    """fragments[j][v]: object j in state v, as encoded JSON. Shared by every cluster."""
    stamp = "2026-01-05T10:00:00+00:00"
    fragments = []
    for j in range(objects):
        variants = []
        for v in range(VARIANTS):
            sha = _hex(f"{j}/{v}", 40)
            failed = v % 4 == 3
            if j % 4 == 3:
                version = f"1.{j}.{v}"
                record: dict[str, Any] = {
                    "reconciler": "flux",
                    "kind": "HelmRelease",
                    "namespace": f"team-{j % 5}",
                    "name": f"release-{j}",
                    "source": {
                        "url": f"oci://registry.example.com/charts/app-{j}",
                        "ref": version,
                        "path": None,
                    },
                    "applied_revision": version,
                    "attempted_revision": version,
                    "ready": not failed,
                    "reason": "UpgradeFailed" if failed else "UpgradeSucceeded",
                    "message": f"Helm upgrade {'failed' if failed else 'succeeded'} for release "
                    f"team-{j % 5}/release-{j} with chart app-{j}@{version}",
                    "health": "Healthy",
                    "drifted": False,
                    "suspended": False,
                    "last_transition_at": stamp,
                }
            else:
                revision = f"main@sha1:{sha}"
                record = {
                    "reconciler": "flux",
                    "kind": "Kustomization",
                    "namespace": "flux-system",
                    "name": f"workload-{j}",
                    "source": {
                        "url": f"https://github.com/example/gitops-{j % 3}.git",
                        "ref": f"GitRepository/flux-system/gitops-{j % 3}",
                        "path": f"./dev/drone/workload-{j}",
                        "url_ref": "main",
                    },
                    "applied_revision": revision,
                    "attempted_revision": revision,
                    "ready": not failed,
                    "reason": "BuildFailed" if failed else "ReconciliationSucceeded",
                    "message": f"Applied revision: {revision}",
                    "health": "Degraded" if failed else "Healthy",
                    "drifted": False,
                    "suspended": False,
                    "last_transition_at": stamp,
                }
            variants.append(orjson.dumps(record))
        fragments.append(variants)
    return fragments


@dataclass(slots=True)
class SimulatedCluster:
    """One cluster's agent: identity, sequence and the state of each of its objects."""

    name: str
    head: bytes  # everything of the body up to the sequence number
    headers: bytes  # request line and headers up to the Content-Length value
    states: list[int]
    sequence: int = 0
    next_change: int = 0
    carry: float = 0.0

    def body(
        self, fragments: list[list[bytes]], changed: float, snapshot: bool, now: float
    ) -> bytes:
        self.sequence += 1
        if self.sequence > 1:
            self.carry += changed * len(self.states)
            count = int(self.carry)
            self.carry -= count
            for _ in range(count):
                j = self.next_change
                self.states[j] = (self.states[j] + 1) % VARIANTS
                self.next_change = (j + 1) % len(self.states)
        observed_at = datetime.fromtimestamp(now, UTC).isoformat()
        return b"".join(
            (
                self.head,
                str(self.sequence).encode(),
                b',"observed_at":"',
                observed_at.encode(),
                b'","full_snapshot":',
                b"true" if snapshot or self.sequence == 1 else b"false",
                b',"objects":[',
                b",".join([fragments[j][v] for j, v in enumerate(self.states)]),
                b"]}",
            )
        )

    def request(
        self, fragments: list[list[bytes]], changed: float, snapshot: bool, now: float
    ) -> bytes:
        body = self.body(fragments, changed, snapshot, now)
        return b"%b%d\r\n\r\n%b" % (self.headers, len(body), body)


def cluster_type_of(index: int) -> str:
    return f"drone-{index % 4}"


def simulated_cluster(
    name: str, token: str, host: str, objects: int, boot: str, cluster_type: str = "drone-0"
) -> SimulatedCluster:
    # The agent names its environment and cluster type, as registration does.
    identity = {"name": name, "environment": "dev", "cluster_type": cluster_type}
    head = (
        b'{"schema":"fleetmark.report/v1","cluster":'
        + orjson.dumps(identity)
        + b',"agent":{"version":"0.1.0-bench","boot_id":'
        + orjson.dumps(f"{boot}-{name}")
        + b',"instance":'
        + orjson.dumps(f"{name}-agent-0")
        + b'},"sequence":'
    )
    headers = (
        f"POST /api/v1/reports HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Content-Length: "
    ).encode()
    return SimulatedCluster(name=name, head=head, headers=headers, states=[0] * objects)


# ---------------------------------------------------------------------------------------
# A lean HTTP/1.1 client: one request in flight per connection, responses with Content-Length

_REPLY = re.compile(rb'"accepted":(\d+),"changed":(\d+),"duplicate":(true|false)')


class HubConnectionLost(Exception):
    """The connection closed before a whole response arrived."""


class HttpConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.closed = False
        self.received = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.received = True
        self.buffer += data
        self._complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(HubConnectionLost(str(exc or "closed by the hub")))

    def _complete(self) -> None:
        if self.waiter is None or self.waiter.done():
            return
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).lower()
        start = head.find(b"\r\ncontent-length:")
        length = 0
        if start >= 0:
            stop = head.find(b"\r\n", start + 2)
            length = int(head[start + 17 : stop if stop >= 0 else None])
        total = end + 4 + length
        if len(self.buffer) < total:
            return
        body = bytes(self.buffer[end + 4 : total])
        del self.buffer[:total]
        if b"\r\nconnection: close" in head:
            self.closed = True
        self.waiter.set_result((int(head[9:12]), body))

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self.received = False
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        try:
            return await self.waiter
        finally:
            self.waiter = None


class AgentLink:
    """One keep-alive connection, used by its agent (or a few sharing it) one request at a time.

    A request built while an earlier one is still out waits its turn, as an agent's would.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.connection: HttpConnection | None = None
        self.turn = asyncio.Lock()
        self.connects = 0

    async def exchange(self, build: Callable[[], bytes]) -> tuple[int, bytes]:
        async with self.turn:
            request = build()
            for attempt in (1, 2):
                connection = self.connection
                if connection is None or connection.closed:
                    if connection is not None and connection.transport is not None:
                        connection.transport.close()
                    self.connects += 1
                    _, connection = await asyncio.get_running_loop().create_connection(
                        HttpConnection, self.host, self.port
                    )
                    self.connection = connection
                try:
                    return await connection.exchange(request)
                except HubConnectionLost:
                    # The hub closed an idle keep-alive connection: send again on a new one.
                    connection.closed = True
                    if attempt == 2 or connection.received:
                        raise
            raise AssertionError("unreachable")

    def close(self) -> None:
        if self.connection is not None and self.connection.transport is not None:
            self.connection.transport.close()


def install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


# ---------------------------------------------------------------------------------------
# Load processes


@dataclass
class LoadPlan:
    index: int
    processes: int
    host: str
    port: int
    clusters: list[tuple[str, str, str]]  # name, token, cluster type
    objects: int
    changed: float
    snapshot_reports: bool
    rate: float  # this process's share, reports/s
    find_max: bool
    concurrency: int
    connections: int
    warmup: float
    duration: float
    timeout: float
    boot: str


@dataclass
class LoadResult:
    latencies: bytes = b""  # array('d') of seconds, requests scheduled in the measured window
    statuses: Counter[str] = field(default_factory=Counter)  # by status, measured window
    completed_ok: int = 0  # 2xx responses that completed inside the measured window
    accepted: int = 0  # objects accepted by those
    changed: int = 0  # objects whose state changed, as the hub replied
    duplicates: int = 0
    unfinished: int = 0
    connects: int = 0
    max_lag: float = 0.0  # how late the generator sent a request after its scheduled time
    cpu_seconds: float = 0.0  # this process's CPU during the measured window
    snapshot_errors: Counter[str] = field(default_factory=Counter)
    snapshot_seconds: float = 0.0


class LoadRun:
    def __init__(self, plan: LoadPlan) -> None:
        self.plan = plan
        self.fragments = object_fragments(plan.objects)
        host = f"{plan.host}:{plan.port}"
        self.clusters = [
            simulated_cluster(name, token, host, plan.objects, plan.boot, cluster_type)
            for name, token, cluster_type in plan.clusters
        ]
        count = min(len(self.clusters), plan.connections or len(self.clusters))
        self.links = [AgentLink(plan.host, plan.port) for _ in range(count)]
        self.result = LoadResult()
        self.latencies = array("d")
        self.window = (0.0, 0.0)

    async def _exchange(self, index: int) -> tuple[int, bytes]:
        cluster = self.clusters[index]
        link = self.links[index % len(self.links)]
        plan = self.plan
        return await link.exchange(
            lambda: cluster.request(
                self.fragments, plan.changed, plan.snapshot_reports, time.time()
            )
        )

    async def snapshots(self) -> None:
        """Every cluster's first report: a full snapshot of all its objects."""
        started = time.perf_counter()
        queue = iter(range(len(self.clusters)))

        async def sender() -> None:
            for index in queue:
                try:
                    status, _ = await self._exchange(index)
                except (OSError, HubConnectionLost) as exc:
                    self.result.snapshot_errors[type(exc).__name__] += 1
                    continue
                if status != 200:
                    self.result.snapshot_errors[str(status)] += 1

        await asyncio.gather(*(sender() for _ in range(8)))
        self.result.snapshot_seconds = time.perf_counter() - started

    def _record(
        self, scheduled: float, sent: float, status: str, reply: bytes | None, done: float
    ) -> None:
        measure_start, measure_end = self.window
        base = sent if self.plan.find_max else scheduled
        if measure_start <= base < measure_end:
            self.result.statuses[status] += 1
            self.latencies.append(done - base)
        if reply is not None and measure_start <= done < measure_end:
            self.result.completed_ok += 1
            match = _REPLY.search(reply)
            if match is not None:
                self.result.accepted += int(match[1])
                self.result.changed += int(match[2])
                self.result.duplicates += match[3] == b"true"

    async def _send(self, scheduled: float, cluster: int) -> None:
        sent = now()
        lag = sent - scheduled
        if lag > self.result.max_lag and not self.plan.find_max:
            self.result.max_lag = lag
        try:
            status, body = await self._exchange(cluster)
        except (OSError, HubConnectionLost) as exc:
            self._record(scheduled, sent, type(exc).__name__, None, now())
            return
        ok = 200 <= status < 300
        self._record(scheduled, sent, str(status), body if ok else None, now())

    async def open_loop(self, start: float) -> None:
        loop = asyncio.get_running_loop()
        plan = self.plan
        interval = 1.0 / plan.rate
        # Processes interleave: process i sends at start + (k * processes + i) / total rate.
        first = start + interval * plan.index / plan.processes
        end = start + plan.warmup + plan.duration
        tasks: set[asyncio.Task[None]] = set()
        k = 0
        count = len(self.clusters)
        while True:
            current = now()
            scheduled = first + k * interval
            if scheduled >= end:
                break
            if scheduled > current:
                # uvloop's timers tick in milliseconds: a shorter sleep returns at once and the
                # pacer would spin. Sleep at least a tick; whatever fell due meanwhile goes out
                # together (latency still counts from each request's scheduled time).
                await asyncio.sleep(max(scheduled - current, 0.001))
                continue
            while scheduled <= current and scheduled < end:
                task = loop.create_task(self._send(scheduled, k % count))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                k += 1
                scheduled = first + k * interval
        await self._drain(tasks)

    async def closed_loop(self, start: float) -> None:
        loop = asyncio.get_running_loop()
        end = start + self.plan.warmup + self.plan.duration
        count = len(self.clusters)
        turn = 0

        async def runner() -> None:
            nonlocal turn
            while now() < end:
                cluster = turn % count
                turn += 1
                await self._send(now(), cluster)

        delay = start - now()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks = {loop.create_task(runner()) for _ in range(max(1, self.plan.concurrency))}
        _, running = await asyncio.wait(tasks, timeout=max(0.0, end - now()))
        await self._drain(running)

    async def _drain(self, tasks: set[asyncio.Task[None]]) -> None:
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=self.plan.timeout)
        for task in pending:
            task.cancel()
        self.result.unfinished = len(pending)
        if pending:
            self.result.statuses["unfinished"] += len(pending)

    async def run(self, pipe: Connection) -> LoadResult:
        await self.snapshots()
        pipe.send(("ready", None))
        loop = asyncio.get_running_loop()
        start_wall = await loop.run_in_executor(None, pipe.recv)
        start = now() + (start_wall - time.time())
        self.window = (start + self.plan.warmup, start + self.plan.warmup + self.plan.duration)
        cpu: list[float] = []
        for mark in self.window:
            loop.call_later(mark - now(), lambda: cpu.append(time.process_time()))
        if self.plan.find_max:
            await self.closed_loop(start)
        else:
            await self.open_loop(start)
        if len(cpu) == 2:
            self.result.cpu_seconds = cpu[1] - cpu[0]
        self.result.latencies = self.latencies.tobytes()
        self.result.connects = sum(link.connects for link in self.links)
        for link in self.links:
            link.close()
        return self.result


def load_process(plan: LoadPlan, pipe: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    install_uvloop()
    result = asyncio.run(LoadRun(plan).run(pipe))
    pipe.send(("done", result))
    pipe.close()


# ---------------------------------------------------------------------------------------
# The hub under test


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def fleetmark_executable(explicit: str | None) -> str:
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "fleetmark"
    if beside.exists():
        return str(beside)
    found = shutil.which("fleetmark")
    if found is None:
        raise SystemExit("fleetmark is not installed; pass --fleetmark")
    return found


class Hub:
    """`fleetmark serve` in a process group of its own, with its output in a log file."""

    def __init__(self, executable: str, env: dict[str, str], data_dir: Path, port: int) -> None:
        self.executable = executable
        self.env = env
        self.data_dir = data_dir
        self.port = port
        self.log_path = data_dir.parent / "serve.log"
        self.process: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str) -> str:
        """Run a fleetmark subcommand against the same database; its stdout."""
        done = subprocess.run(
            [self.executable, *args, "--data-dir", str(self.data_dir)],
            env=self.env | {"COLUMNS": "500"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise SystemExit(f"fleetmark {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def start(self, workers: int) -> None:
        command = [
            self.executable,
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(workers),
            "--data-dir",
            str(self.data_dir),
        ]
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def wait_ready(self, limit: float = 180.0) -> None:
        import http.client

        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise SystemExit(f"fleetmark serve exited early:\n{self.log_tail()}")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                connection.request("GET", "/readyz")
                if connection.getresponse().status == 200:
                    connection.close()
                    return
                connection.close()
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"fleetmark serve was not ready within {limit:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def database_url_from_log(self) -> str | None:
        match = re.search(r"database: (\S+)", self.log_path.read_text(errors="replace"))
        if match is None:
            return None
        return match[1].replace("postgresql+psycopg://", "postgresql://", 1)

    def processes(self) -> list[psutil.Process]:
        """The serve process and its workers (an embedded PostgreSQL is not counted)."""
        assert self.process is not None
        try:
            root = psutil.Process(self.process.pid)
            found = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        return [p for p in found if not _is_postgres(p)]

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def checkout_commit(path: Path) -> str:
    """A checkout's short commit, with `+` when its tracked files differ from it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(f"{path} is not a git checkout: {done.stderr.strip()}")
        return done.stdout.strip()

    changed = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + ("+" if changed else "")


def hubs_under_test(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(label, fleetmark executable) of each hub to measure: the baseline's first, if any."""
    executable = fleetmark_executable(args.fleetmark)
    if args.baseline_fleetmark is None:
        return [("", executable)]
    baseline = args.baseline_fleetmark.resolve()
    theirs = baseline / ".venv" / "bin" / "fleetmark"
    if not theirs.exists():
        raise SystemExit(
            f"{theirs} does not exist: install the baseline checkout in its own .venv "
            "(python3 -m venv .venv && .venv/bin/pip install -e .)"
        )
    this = Path(__file__).resolve().parent.parent
    return [
        (f"baseline {checkout_commit(baseline)}", str(theirs)),
        (f"this tree {checkout_commit(this)}", executable),
    ]


def _is_postgres(process: psutil.Process) -> bool:
    try:
        return process.name().startswith("postgres")
    except psutil.Error:
        return False


def cumulative_cpu(processes: list[psutil.Process]) -> float:
    """CPU seconds of these processes, including children they have reaped."""
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def rss_bytes(processes: list[psutil.Process]) -> int:
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return total


def uss_bytes(processes: list[psutil.Process]) -> int | None:
    total = 0
    for process in processes:
        try:
            total += process.memory_full_info().uss
        except psutil.AccessDenied:
            return None
        except psutil.Error:
            continue
    return total


# ---------------------------------------------------------------------------------------
# The database


def with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database))


def database_name(url: str) -> str:
    name = urlsplit(url).path.lstrip("/")
    if not name:
        raise SystemExit("--database-url must name a database")
    return name


def timescaledb_server(data_dir: Path) -> str:
    """An embedded PostgreSQL with TimescaleDB preloaded in data_dir (stopped when this process
    exits): the URL of its `postgres` database."""
    from hub.embedded import TIMESCALEDB_SETTINGS, start_embedded_postgres, timescaledb_installed

    if not timescaledb_installed():
        raise SystemExit(
            "TimescaleDB is not installed in the embedded PostgreSQL: run `bash .ci/timescaledb`"
        )
    with phase("starting an embedded PostgreSQL with TimescaleDB"):
        url = start_embedded_postgres(data_dir / "postgres", TIMESCALEDB_SETTINGS)
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def recreate_database(url: str) -> None:
    name = database_name(url)
    if name in PROTECTED_DATABASES:
        raise SystemExit(f"refusing to drop the {name!r} database; name a scratch database")
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


@dataclass
class ServerFacts:
    version: str
    timescaledb: str
    # "on", or "off" and why that matters.
    autovacuum: str
    postmaster: psutil.Process | None


def server_facts(connection: psycopg.Connection[Any]) -> ServerFacts:
    version = connection.execute("SHOW server_version").fetchone()
    installed = connection.execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'"
    ).fetchone()
    available = connection.execute(
        "SELECT default_version FROM pg_available_extensions WHERE name = 'timescaledb'"
    ).fetchone()
    if installed is not None:
        timescaledb = f"yes, {installed[0]} (installed in the database)"
    elif available is not None:
        timescaledb = f"available ({available[0]}) but not installed in the database"
    else:
        timescaledb = "no (plain PostgreSQL tables and BRIN indexes)"
    vacuumed = connection.execute("SHOW autovacuum").fetchone()
    autovacuum = "on"
    if vacuumed is None or vacuumed[0] != "on":
        autovacuum = (
            "off: no table is analysed or vacuumed as the run writes, unlike on a production "
            "server, so plans and bloat are not what one would see"
        )
    backend = connection.execute("SELECT pg_backend_pid()").fetchone()
    postmaster = None
    host = connection.info.host
    if backend is not None and (host in {"127.0.0.1", "localhost", "::1"} or host.startswith("/")):
        with contextlib.suppress(psutil.Error):
            candidate = psutil.Process(backend[0]).parent()
            if candidate is not None and _is_postgres(candidate):
                postmaster = candidate
    return ServerFacts(
        version=str(version[0]) if version else "?",
        timescaledb=timescaledb,
        autovacuum=autovacuum,
        postmaster=postmaster,
    )


def postgres_cpu(postmaster: psutil.Process | None) -> float | None:
    """CPU seconds of the whole PostgreSQL server: postmaster, live and exited backends."""
    if postmaster is None:
        return None
    try:
        return cumulative_cpu([postmaster, *postmaster.children(recursive=True)])
    except psutil.Error:
        return None


def backend_cpu(connection: psycopg.Connection[Any]) -> dict[int, float]:
    """CPU seconds so far of the hub's PostgreSQL backends on this database, by pid."""
    rows = connection.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
        "AND datname = current_database()",
        (APPLICATION_NAME,),
    ).fetchall()
    connection.commit()
    found = {}
    for (pid,) in rows:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            found[pid] = times.user + times.system
    return found


def copy_baseline(
    connection: psycopg.Connection[Any], transitions: int
) -> tuple[int, float] | None:
    """Write the newest `transitions` transitions and their object-state rows again by COPY.

    The rows are read first (untimed); the timed part creates nothing and includes the commit.
    The transition table keeps the real one's indexes; the object-state table indexes the same
    columns as the real one, without uniqueness, because one run can change the same object
    more than once.
    """
    if transitions <= 0:
        return None
    state = (
        "source_url, source_ref, source_path, url_ref, applied_revision, applied_sha, "
        "applied_version, "
        "attempted_revision, attempted_sha, ready, reason, message, health, drifted, suspended"
    )
    transition_columns = f"observed_at, cluster_id, object_id, {state}, removed, received_at"
    object_columns = (
        f"id, cluster_id, reconciler, kind, namespace, name, {state}, last_transition_at, "
        "changed_at, first_seen_at, removed_at, applied_since, ready_since"
    )
    transition_rows = connection.execute(
        f"SELECT {transition_columns} FROM status_transition ORDER BY received_at DESC LIMIT %s",
        (transitions,),
    ).fetchall()
    object_rows = connection.execute(
        f"SELECT t.object_id, o.cluster_id, o.reconciler, o.kind, o.namespace, o.name, "
        f"{', '.join(f't.{c.strip()}' for c in state.split(','))}, o.last_transition_at, "
        "t.observed_at, o.first_seen_at, NULL::timestamptz, o.applied_since, o.ready_since "
        "FROM (SELECT * FROM status_transition ORDER BY received_at DESC LIMIT %s) t "
        "JOIN object_state o ON o.id = t.object_id WHERE NOT t.removed",
        (transitions,),
    ).fetchall()
    connection.execute(
        "CREATE TABLE bench_copy_status_transition "
        "(LIKE status_transition INCLUDING DEFAULTS INCLUDING INDEXES)"
    )
    connection.execute(
        "CREATE TABLE bench_copy_object_state (LIKE object_state INCLUDING DEFAULTS "
        "EXCLUDING INDEXES EXCLUDING CONSTRAINTS)"
    )
    connection.execute("CREATE INDEX ON bench_copy_object_state (id)")
    connection.execute(
        "CREATE INDEX ON bench_copy_object_state (cluster_id, reconciler, kind, namespace, name)"
    )
    connection.execute("CREATE INDEX ON bench_copy_object_state (source_url, url_ref)")
    connection.commit()
    try:
        started = time.perf_counter()
        with connection.cursor() as cursor:
            with cursor.copy(
                f"COPY bench_copy_status_transition ({transition_columns}) FROM STDIN"
            ) as copy:
                for row in transition_rows:
                    copy.write_row(row)
            with cursor.copy(f"COPY bench_copy_object_state ({object_columns}) FROM STDIN") as copy:
                for row in object_rows:
                    copy.write_row(row)
        connection.commit()
        elapsed = time.perf_counter() - started
    finally:
        connection.rollback()
        for table in SCRATCH_TABLES:
            connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        connection.commit()
    return len(transition_rows) + len(object_rows), elapsed


# ---------------------------------------------------------------------------------------
# Registration over the API


async def register_clusters(
    port: int, admin_token: str, names: list[str], parallel: int = 8
) -> dict[str, str]:
    tokens: dict[str, str] = {}
    queue = iter(enumerate(names))

    async def worker(link: AgentLink) -> None:
        for index, name in queue:
            body = orjson.dumps(
                {"name": name, "environment": "dev", "cluster_type": cluster_type_of(index)}
            )
            request = (
                f"POST /api/v1/clusters HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {admin_token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode() + body
            status, reply = await link.exchange(lambda request=request: request)
            if status != 201:
                raise SystemExit(f"registering {name} failed: {status} {reply.decode()}")
            tokens[name] = orjson.loads(reply)["token"]

    links = [AgentLink("127.0.0.1", port) for _ in range(parallel)]
    await asyncio.gather(*(worker(link) for link in links))
    for link in links:
        link.close()
    return tokens


# ---------------------------------------------------------------------------------------
# Figures


def percentile(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.0f} MiB"


def line(label: str, value: str) -> None:
    print(f"  {label:<34} {value}")


@contextlib.contextmanager
def phase(message: str) -> Iterator[None]:
    print(f"… {message}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    yield
    print(f"  done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


@dataclass
class Resources:
    """What the hub, PostgreSQL and the machine spent during the measured phase."""

    hub_cpu: float = 0.0
    pg_cpu: float | None = None
    backend_cpu: float = 0.0
    machine_cpu: float = 0.0
    peak_rss: int = 0
    end_rss: int = 0
    end_uss: int | None = None


def busy_seconds() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def watch(
    hub: Hub, facts: ServerFacts, database: psycopg.Connection[Any], start: float, end: float
) -> Resources:
    """Sample CPU and memory over [start, end] (wall-clock times), RSS once a second."""
    time.sleep(max(0.0, start - time.time()))
    machine_start = busy_seconds()
    hub_start = cumulative_cpu(hub.processes())
    pg_start = postgres_cpu(facts.postmaster)
    backends_start = backend_cpu(database)
    database.commit()
    resources = Resources()
    while time.time() < end:
        resources.peak_rss = max(resources.peak_rss, rss_bytes(hub.processes()))
        time.sleep(min(1.0, max(0.0, end - time.time())))
    resources.machine_cpu = busy_seconds() - machine_start
    processes = hub.processes()
    resources.hub_cpu = cumulative_cpu(processes) - hub_start
    pg_end = postgres_cpu(facts.postmaster)
    if pg_start is not None and pg_end is not None:
        resources.pg_cpu = pg_end - pg_start
    backends_end = backend_cpu(database)
    database.commit()
    resources.backend_cpu = sum(
        spent - backends_start.get(pid, 0.0) for pid, spent in backends_end.items()
    )
    resources.end_rss = rss_bytes(processes)
    resources.peak_rss = max(resources.peak_rss, resources.end_rss)
    resources.end_uss = uss_bytes(processes)
    return resources


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.clusters < args.processes:
        raise SystemExit("--clusters must be at least --processes")
    if not 0 <= args.changed <= 1:
        raise SystemExit("--changed is a share between 0 and 1")
    if args.objects < 1 or args.duration <= 0 or args.rate <= 0:
        raise SystemExit("--objects, --duration and --rate must be positive")

    hubs = hubs_under_test(args)
    hub_env = {}
    for pair in args.hub_env:
        key, separator, value = pair.partition("=")
        if not separator:
            raise SystemExit(f"--hub-env {pair!r}: expected KEY=VALUE")
        hub_env[key] = value
    modes = COMMIT_MODES if args.compare_commit_modes else (("", {}),)
    first = None if args.embedded else args.database_url
    backends = [("PostgreSQL" if args.timescaledb else "", first)]
    runs = []
    with contextlib.ExitStack() as stack:
        if args.timescaledb:
            server = timescaledb_server(Path(stack.enter_context(tempfile.TemporaryDirectory())))
            backends.append(
                ("TimescaleDB", with_database(server, database_name(DEFAULT_DATABASE_URL)))
            )
        for backend, database_url in backends:
            for mode, mode_env in modes:
                for code, executable in hubs:
                    label = ", ".join(part for part in (backend, mode, code) if part)
                    if label:
                        print(f"… {label}", file=sys.stderr, flush=True)
                    runs.append(measure(args, executable, label, hub_env | mode_env, database_url))
    for run in runs:
        report(args, run)
    if len(runs) > 1:
        compare(args, runs)


@dataclass
class Run:
    """One measured run of the hub, as `report` prints it."""

    label: str
    executable: str
    facts: ServerFacts
    results: list[LoadResult]
    resources: Resources
    baseline: tuple[int, float] | None
    database_url: str
    embedded: bool


def measure(
    args: argparse.Namespace,
    executable: str,
    label: str,
    hub_env: dict[str, str],
    database_url: str | None,
) -> Run:
    """Start a hub on a fresh database (its own embedded one when `database_url` is None),
    load it, and return what was measured."""
    workdir = Path(tempfile.mkdtemp(prefix="fleetmark-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMARK_")}
    env["FLEETMARK_DATA_DIR"] = str(workdir / "data")
    env.update(hub_env)
    embedded = database_url is None
    if database_url is not None:
        with phase(f"creating database {database_name(database_url)!r} afresh"):
            recreate_database(database_url)
        env["FLEETMARK_DATABASE_URL"] = database_url

    port = args.port or free_port()
    hub = Hub(executable, env, workdir / "data", port)
    workers: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []
    try:
        with phase(f"starting fleetmark serve --workers {args.workers} on port {port}"):
            hub.start(args.workers)
            hub.wait_ready()
        if database_url is None:
            database_url = hub.database_url_from_log()
            if database_url is None:
                raise SystemExit(f"could not find the database URL in:\n{hub.log_tail()}")
        with phase("creating an admin token with `fleetmark tokens create`"):
            output = hub.cli("tokens", "create", "bench-admin", "--scope", "admin")
            match = re.search(r"\bfma_[A-Za-z0-9_\-]+", output)
            if match is None:
                raise SystemExit(f"no token in the output of fleetmark tokens create:\n{output}")
            admin_token = match[0]
        names = [f"bench-{i:05d}" for i in range(args.clusters)]
        with phase(f"registering {args.clusters:,} clusters through POST /api/v1/clusters"):
            tokens = asyncio.run(register_clusters(port, admin_token, names))

        database = psycopg.connect(database_url, autocommit=False)
        facts = server_facts(database)
        database.commit()

        boot = f"{int(time.time())}"
        context = multiprocessing.get_context("spawn")
        connections_each = -(-args.connections // args.processes)  # 0 stays 0: one per cluster
        for index in range(args.processes):
            mine = range(index, args.clusters, args.processes)
            plan = LoadPlan(
                index=index,
                processes=args.processes,
                host="127.0.0.1",
                port=port,
                clusters=[(names[i], tokens[names[i]], cluster_type_of(i)) for i in mine],
                objects=args.objects,
                changed=args.changed,
                snapshot_reports=args.snapshot_reports,
                rate=args.rate / args.processes,
                find_max=args.find_max,
                concurrency=max(1, args.concurrency // args.processes),
                connections=connections_each,
                warmup=args.warmup,
                duration=args.duration,
                timeout=args.timeout,
                boot=boot,
            )
            ours, theirs = context.Pipe()
            process = context.Process(target=load_process, args=(plan, theirs), daemon=True)
            process.start()
            theirs.close()
            workers.append((process, ours))

        with phase(f"warm-up: each cluster's first full snapshot ({args.objects} objects)"):
            for _, pipe in workers:
                message, _ = pipe.recv()
                assert message == "ready"

        start_wall = time.time() + 0.5
        measure_start = start_wall + args.warmup
        mode = (
            f"closed loop, {args.concurrency} in flight"
            if args.find_max
            else f"open loop at {args.rate:,.0f} reports/s"
        )
        print(
            f"… {mode}: {args.warmup:g} s warm-up, then {args.duration:g} s measured",
            file=sys.stderr,
            flush=True,
        )
        for _, pipe in workers:
            pipe.send(start_wall)
        resources = watch(hub, facts, database, measure_start, measure_start + args.duration)

        results: list[LoadResult] = []
        for process, pipe in workers:
            if not pipe.poll(args.timeout + 60):
                raise SystemExit("a load process did not report back")
            message, result = pipe.recv()
            assert message == "done"
            results.append(result)
            process.join(timeout=10)

        with phase("COPY baseline for the rows written in the measured phase"):
            baseline = copy_baseline(database, sum(r.changed for r in results))
        database.close()
    except BaseException:
        print(f"the hub's output is kept in {hub.log_path}", file=sys.stderr)
        raise
    finally:
        for process, _ in workers:
            if process.is_alive():
                process.terminate()
        hub.stop()

    shutil.rmtree(workdir, ignore_errors=True)
    return Run(label, executable, facts, results, resources, baseline, database_url, embedded)


def sorted_latencies(results: list[LoadResult]) -> list[float]:
    latencies = array("d")
    for result in results:
        latencies.frombytes(result.latencies)
    return sorted(latencies)


def completed_reports(run: Run) -> int:
    return sum(r.completed_ok for r in run.results)


def capacity(run: Run) -> str:
    """Reports/s the machine's cores would carry at the hub's and PostgreSQL's CPU per report."""
    spent = run.resources.hub_cpu + (run.resources.pg_cpu or 0.0)
    if run.resources.pg_cpu is None or not spent:
        return "n/a"
    return f"{(os.cpu_count() or 1) * completed_reports(run) / spent:,.0f} reports/s"


def copy_ratio(run: Run, duration: float) -> str:
    """How many times longer the hub took for its rows than a bare COPY of them."""
    if run.baseline is None:
        return "n/a"
    return f"{duration / run.baseline[1]:,.0f}x"


def report(args: argparse.Namespace, run: Run) -> None:
    facts, results, resources, baseline = run.facts, run.results, run.resources, run.baseline
    statuses: Counter[str] = Counter()
    snapshot_errors: Counter[str] = Counter()
    for result in results:
        statuses.update(result.statuses)
        snapshot_errors.update(result.snapshot_errors)
    ordered = sorted_latencies(results)
    completed = completed_reports(run)
    accepted = sum(r.accepted for r in results)
    changed = sum(r.changed for r in results)
    offered = len(ordered) + statuses.get("unfinished", 0)
    errors = {status: count for status, count in statuses.items() if not status.startswith("2")}
    duration = args.duration
    load_cpu = sum(r.cpu_seconds for r in results)
    res = resources

    def cores(seconds: float) -> str:
        return f"{seconds:,.1f} s ({seconds / duration:.2f} cores)"

    def per_report(seconds: float) -> str:
        return f", {seconds / completed * 1000:.2f} ms/report" if completed else ""

    print()
    print("fleetmark ingest benchmark" + (f": {run.label}" if run.label else ""))
    print("  command: " + " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]))
    line("PostgreSQL", f"{facts.version}")
    line("TimescaleDB", facts.timescaledb)
    line("autovacuum", facts.autovacuum)
    line(
        "database",
        "embedded (temporary --data-dir)"
        if run.embedded
        else re.sub(r"//[^@/]*@", "//…@", run.database_url),
    )
    line("hub", f"{run.executable} serve --workers {args.workers}")
    line("machine", f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    line(
        "load",
        f"{args.clusters:,} clusters, {args.objects} objects/report, "
        f"{args.changed:.0%} changed, "
        + ("full snapshots" if args.snapshot_reports else "partial reports")
        + f", {args.processes} load processes, "
        + (
            f"{args.connections:,} keep-alive connections"
            if args.connections
            else "one keep-alive connection per cluster"
        ),
    )
    line(
        "mode",
        f"closed loop, {args.concurrency} in flight"
        if args.find_max
        else f"open loop, target {args.rate:,.0f} reports/s",
    )
    line("measured", f"{duration:g} s after {args.warmup:g} s warm-up")
    print()
    print("throughput")
    line("reports/s (2xx completed)", f"{completed / duration:,.1f}")
    line("objects/s", f"{accepted / duration:,.0f}")
    line("changed objects/s (transitions)", f"{changed / duration:,.1f}")
    if not args.find_max:
        line("offered reports/s", f"{offered / duration:,.1f}")
    print("latency" + (" (from send)" if args.find_max else " (from scheduled send time)"))
    for label, fraction in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
        line(label, ms(percentile(ordered, fraction)))
    line("max", ms(ordered[-1]) if ordered else "n/a")
    print("errors")
    line("measured requests", f"{offered:,}")
    line(
        "by status",
        ", ".join(f"{status}: {count:,}" for status, count in sorted(errors.items())) or "none",
    )
    line("duplicates reported by the hub", f"{sum(r.duplicates for r in results):,}")
    line(
        "warm-up snapshot errors",
        ", ".join(f"{s}: {c:,}" for s, c in sorted(snapshot_errors.items())) or "none",
    )
    line(
        "warm-up snapshots",
        f"{args.clusters:,} in {max(r.snapshot_seconds for r in results):.1f} s",
    )
    print("resources (measured phase)")
    line(
        "hub RSS, all processes",
        f"peak {mib(res.peak_rss)}, end {mib(res.end_rss)} (USS {mib(res.end_uss)})",
    )
    line("hub CPU", cores(res.hub_cpu) + per_report(res.hub_cpu))
    if res.pg_cpu is None:
        line("PostgreSQL CPU", "n/a (server not on this machine)")
    else:
        line("PostgreSQL CPU, all processes", cores(res.pg_cpu) + per_report(res.pg_cpu))
        line("  of which hub backends", f"{res.backend_cpu:,.1f} s")
    line(f"capacity ({os.cpu_count()} cores ÷ CPU/report)", capacity(run))
    line("load generator CPU", cores(load_cpu))
    others = res.machine_cpu - res.hub_cpu - (res.pg_cpu or 0.0) - load_cpu
    line(
        "machine busy, all processes", cores(res.machine_cpu) + f"; others {others / duration:.2f}"
    )
    line("generator max send lag", ms(max(r.max_lag for r in results)))
    line("connections opened", f"{sum(r.connects for r in results):,}")
    print("baseline: the same rows through a bare psycopg COPY")
    if baseline is None:
        line("rows", "none written; no baseline")
    else:
        rows, copy_seconds = baseline
        line("rows (transitions + object states)", f"{rows:,}")
        line("hub", f"{duration:,.1f} s, {rows / duration:,.0f} rows/s")
        line("COPY", f"{copy_seconds:,.3f} s, {rows / copy_seconds:,.0f} rows/s")
        line("ratio hub time / COPY time", copy_ratio(run, duration))


def compare(args: argparse.Namespace, runs: list[Run]) -> None:
    """The runs side by side: what a commit mode, a backend or a commit costs and buys."""
    width = max(22, *(len(run.label) for run in runs))
    print()
    print(f"side by side ({args.duration:g} s measured each)")
    print(f"  {'':<34} " + " ".join(f"{run.label:>{width}}" for run in runs))

    def row(label: str, values: list[str]) -> None:
        print(f"  {label:<34} " + " ".join(f"{value:>{width}}" for value in values))

    completed = [completed_reports(run) for run in runs]
    latencies = [sorted_latencies(run.results) for run in runs]
    row("reports/s (2xx completed)", [f"{count / args.duration:,.1f}" for count in completed])
    for label, fraction in (("p50", 0.50), ("p99", 0.99)):
        row(f"latency {label}", [ms(percentile(ordered, fraction)) for ordered in latencies])

    def per_report(seconds: float | None, count: int) -> str:
        return "n/a" if seconds is None or not count else f"{seconds / count * 1000:.2f} ms"

    row(
        "PostgreSQL CPU per report",
        [
            per_report(run.resources.pg_cpu, count)
            for run, count in zip(runs, completed, strict=True)
        ],
    )
    row(
        "  of which hub backends",
        [
            per_report(run.resources.backend_cpu, count)
            for run, count in zip(runs, completed, strict=True)
        ],
    )
    row(
        "hub CPU per report",
        [
            per_report(run.resources.hub_cpu, count)
            for run, count in zip(runs, completed, strict=True)
        ],
    )
    row(f"capacity, {os.cpu_count()} cores", [capacity(run) for run in runs])
    row("hub time / COPY time", [copy_ratio(run, args.duration) for run in runs])
    row(
        "errors",
        [
            f"{sum(n for r in run.results for s, n in r.statuses.items() if s[0] != '2'):,}"
            for run in runs
        ],
    )


if __name__ == "__main__":
    main()
