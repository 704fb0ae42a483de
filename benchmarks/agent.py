"""Agent benchmark: memory and CPU of `python -m agent` watching 1,000 reconciler objects,
beside two baselines in the same window (docs/benchmarks.md, "Agent").

    .venv/bin/python benchmarks/agent.py --duration 20       # a quick run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_RSS_MB = 80.0
KIND_SHARE = {  # plural: (share of the objects, name prefix)
    "kustomizations": (0.40, "ks"),
    "helmreleases": (0.25, "hr"),
    "gitrepositories": (0.10, "git"),
    "ocirepositories": (0.05, "oci"),
    "applications": (0.20, "app"),
}
CHANGED_KINDS = ("kustomizations", "applications", "gitrepositories")
NAMESPACES = 20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/agent.py",
        description="Run the agent against a local fake API server and print its RSS and CPU "
        "next to baselines measured in the same run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--objects", type=int, default=1000, help="Objects in the cluster.")
    parser.add_argument("--rate", type=float, default=10.0, help="Object changes per second.")
    parser.add_argument("--duration", type=float, default=60.0, help="Measured seconds.")
    parser.add_argument(
        "--min-interval", type=float, default=5.0, help="Agent FLEETMARK_AGENT_MIN_INTERVAL."
    )
    parser.add_argument(
        "--snapshot-interval",
        type=float,
        default=30.0,
        help="Agent FLEETMARK_AGENT_SNAPSHOT_INTERVAL (shorter than the default 300 s so that "
        "periodic full snapshots fall inside the measured window).",
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=60.0, help="Seconds to wait for the first report."
    )
    parser.add_argument(
        "--malloc-arena-max",
        type=int,
        default=2,
        help="MALLOC_ARENA_MAX for the agent and the baselines, as the Helm chart sets it "
        "(0: glibc's default).",
    )
    parser.add_argument("--sample", type=float, default=0.25, help="Seconds between RSS samples.")
    parser.add_argument(
        "--hub-database-url",
        help="Forward reports to a real hub on this scratch PostgreSQL database (dropped and "
        "created afresh) instead of answering them in the stand-in.",
    )
    parser.add_argument("--protocol-only", metavar="API_URL", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------------
# The cluster: objects, changes, and the hub stand-in (helper process)


def revision(counter: int) -> str:
    return f"{counter:040x}"


def make_objects(count: int) -> list[tuple[str, dict[str, Any]]]:
    from tests.agent import examples

    builders = {
        "kustomizations": lambda: examples.kustomization(applied=f"main@sha1:{revision(0)}"),
        "helmreleases": lambda: examples.helm_release_v2(),
        "gitrepositories": lambda: examples.git_repository(
            {"branch": "main"}, f"main@sha1:{revision(0)}"
        ),
        "ocirepositories": lambda: examples.oci_repository(
            {"tag": "6.5.4"}, f"6.5.4@sha256:{examples.DIGEST}"
        ),
        "applications": lambda: examples.application(applied=revision(0)),
    }
    objects: list[tuple[str, dict[str, Any]]] = []
    repositories = max(1, round(count * KIND_SHARE["gitrepositories"][0]))
    for plural, (share, prefix) in KIND_SHARE.items():
        for index in range(round(count * share)):
            obj = builders[plural]()
            obj["metadata"] = examples.metadata(f"{prefix}-{index:04d}", namespace(index))
            if plural == "kustomizations":
                followed = index % repositories
                obj["spec"]["sourceRef"] = {
                    "kind": "GitRepository",
                    "name": f"git-{followed:04d}",
                    "namespace": namespace(followed),
                }
            objects.append((plural, obj))
    return objects[:count]


def namespace(index: int) -> str:
    return f"team-{index % NAMESPACES:02d}"


def changed(plural: str, obj: dict[str, Any], counter: int) -> dict[str, Any]:
    """`obj` with a new revision that names `counter`, as its controller would write it."""
    sha = revision(counter)
    status = obj["status"]
    if plural == "kustomizations":
        status["lastAppliedRevision"] = status["lastAttemptedRevision"] = f"main@sha1:{sha}"
    elif plural == "gitrepositories":
        status["artifact"]["revision"] = f"main@sha1:{sha}"
    elif plural == "applications":
        status["sync"]["revision"] = sha
        status["history"][-1]["revision"] = sha
        status["operationState"]["syncResult"]["revision"] = sha
        status["operationState"]["operation"]["sync"]["revision"] = sha
    return obj


def marker(record: dict[str, Any]) -> int | None:
    """The change counter a reported record carries, if it carries one."""
    for value in (record.get("applied_revision"), record.get("attempted_revision")):
        if isinstance(value, str):
            sha = value.rpartition(":")[2]
            if len(sha) == 40:
                try:
                    return int(sha, 16) or None
                except ValueError:
                    continue
    return None


@dataclass
class SinkStats:
    reports: int = 0
    full_snapshots: int = 0
    snapshot_parts: int = 0  # reports that were a part of a snapshot
    part_objects: int = 0  # objects in the parts of the snapshot coming in
    parts_per_snapshot: Counter[int] = field(default_factory=Counter)  # count: snapshots
    statuses: Counter[int] = field(default_factory=Counter)  # the hub's answers
    records: int = 0
    bytes: int = 0
    first_snapshot_objects: int = 0
    changes_made: int = 0
    lags: list[float] = field(default_factory=list)
    changed_at: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def serve_cluster(count: int, rate: float, hub: str | None, pipe: Connection) -> None:
    """The helper process: fake API server, change driver and hub sink (forwarding to `hub`
    when given), until told to stop."""
    from tests.agent.apiserver import FakeApiServer, served

    api = FakeApiServer(served(*KIND_SHARE)).start()
    objects = make_objects(count)
    for plural, obj in objects:
        api.put(plural, obj)
    stats = SinkStats()
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _sink_handler(stats, hub))
    sink.daemon_threads = True
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    driving = threading.Event()
    stopping = threading.Event()
    changeable = [(plural, obj) for plural, obj in objects if plural in CHANGED_KINDS]

    def drive() -> None:
        driving.wait()
        counter, started = 0, time.monotonic()
        while not stopping.is_set():
            counter += 1
            plural, obj = changeable[counter % len(changeable)]
            with stats.lock:
                stats.changed_at[counter] = time.monotonic()
                stats.changes_made = counter
            api.put(plural, changed(plural, obj, counter))
            delay = started + counter / rate - time.monotonic()
            if delay > 0:
                stopping.wait(delay)

    threading.Thread(target=drive, daemon=True).start()
    pipe.send({"api": api.url, "sink": f"http://127.0.0.1:{sink.server_address[1]}"})
    while True:
        command = pipe.recv()
        if command == "drive":
            driving.set()
        elif command == "stats":
            with stats.lock:
                pipe.send(
                    {
                        "reports": stats.reports,
                        "full_snapshots": stats.full_snapshots,
                        "snapshot_parts": stats.snapshot_parts,
                        "parts_per_snapshot": dict(stats.parts_per_snapshot),
                        "statuses": dict(stats.statuses),
                        "records": stats.records,
                        "bytes": stats.bytes,
                        "first_snapshot_objects": stats.first_snapshot_objects,
                        "changes_made": stats.changes_made,
                        "lags": list(stats.lags),
                    }
                )
        elif command == "stop":
            stopping.set()
            sink.shutdown()
            api.stop()
            pipe.send("stopped")
            return


def _forward(hub: str, body: bytes, headers: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """Post `body` to the hub's report route; its status, headers and body."""
    host, _, port = hub.removeprefix("http://").partition(":")
    connection = HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request(
            "POST",
            "/api/v1/reports",
            body=body,
            headers={
                "Authorization": headers.get("Authorization", ""),
                "Content-Type": "application/json",
            },
        )
        response = connection.getresponse()
        reply = response.read()
        kept = [
            (name, value)
            for name, value in response.getheaders()
            if name.lower() in ("content-type", "x-fleetmark-max-report-bytes", "retry-after")
        ]
        return response.status, kept, reply
    finally:
        connection.close()


def _sink_handler(stats: SinkStats, hub: str | None) -> type[BaseHTTPRequestHandler]:
    class Sink(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            arrived = time.monotonic()
            if hub is None:
                status = 200
                reply = b""
                headers = [("Content-Type", "application/json")]
            else:
                status, headers, reply = _forward(hub, body, self.headers)
            report = json.loads(body)
            objects = report.get("objects", [])
            part = report.get("snapshot_part")
            with stats.lock:
                stats.statuses[status] += 1
                snapshot = len(objects) if report.get("full_snapshot") else None
                if part is not None:
                    stats.snapshot_parts += 1
                    stats.part_objects += len(objects)
                    if part["index"] == part["count"] - 1:
                        stats.parts_per_snapshot[part["count"]] += 1
                        snapshot, stats.part_objects = stats.part_objects, 0
                stats.reports += 1
                stats.records += len(objects)
                stats.bytes += len(body)
                if snapshot is not None:
                    stats.full_snapshots += 1
                    if stats.full_snapshots == 1:
                        stats.first_snapshot_objects = snapshot
                for record in objects:
                    counter = marker(record)
                    if counter is not None and counter in stats.changed_at:
                        stats.lags.append(arrived - stats.changed_at.pop(counter))
            if hub is None:
                reply = json.dumps(
                    {"accepted": len(objects), "changed": len(objects), "duplicate": False}
                ).encode()
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    return Sink


# ---------------------------------------------------------------------------------------
# Baseline: the watch protocol consumed without mapping (its own process)


async def consume_protocol(api_url: str) -> None:
    from agent.kube import ClusterReader
    from agent.runner import configure_logging
    from agent.sources import WATCHED_KINDS

    configure_logging("json", "warning")

    reader = ClusterReader.connect(host=api_url)
    discovery = await reader.discover(WATCHED_KINDS)
    async with reader.watch(discovery.served) as watcher:
        async for _ in watcher:
            pass


# ---------------------------------------------------------------------------------------
# Measuring


@dataclass
class Probe:
    name: str
    process: psutil.Process
    peak_rss: int = 0
    last_rss: int = 0
    cpu_start: float = 0.0
    cpu_end: float = 0.0

    def cpu(self) -> float:
        times = self.process.cpu_times()
        return times.user + times.system

    def sample(self) -> None:
        rss = self.process.memory_info().rss
        self.peak_rss = max(self.peak_rss, rss)
        self.last_rss = rss


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"benchmark: timed out waiting for {what}")
        time.sleep(0.1)


def mb(value: float) -> str:
    return f"{value / 1024 / 1024:6.1f} MB"


def start_hub(database_url: str, workdir: Path) -> tuple[Any, str]:
    """`fleetmark serve` (benchmarks/ingest.py's) on `database_url` made afresh, with the
    benchmark's cluster registered; the hub and the cluster's token."""
    from benchmarks.ingest import Hub, fleetmark_executable, recreate_database

    recreate_database(database_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMARK_")}
    env |= {"FLEETMARK_DATABASE_URL": database_url, "FLEETMARK_DATA_DIR": str(workdir / "hub")}
    hub = Hub(fleetmark_executable(None), env, workdir / "hub", free_port())
    hub.start(workers=1)
    hub.wait_ready()
    output = hub.cli("clusters", "register", "bench-cluster", "--environment", "dev")
    match = re.search(r"\bfmc_[A-Za-z0-9_\-]+", output)
    if match is None:
        hub.stop()
        raise SystemExit(f"no token in the output of fleetmark clusters register:\n{output}")
    return hub, match[0]


def held_by_hub(database_url: str) -> tuple[int, int]:
    """Live and removed objects the hub holds for the benchmark's cluster."""
    import psycopg

    with psycopg.connect(database_url) as connection:
        row = connection.execute(
            "SELECT count(*) FILTER (WHERE removed_at IS NULL),"
            " count(*) FILTER (WHERE removed_at IS NOT NULL)"
            " FROM object_state o JOIN cluster c ON c.id = o.cluster_id"
            " WHERE c.name = 'bench-cluster'"
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.protocol_only:
        asyncio.run(consume_protocol(args.protocol_only))
        return

    workdir = Path(tempfile.mkdtemp(prefix="fleetmark-agent-bench-"))
    token = "fm-benchmark-token"
    hub = None
    if args.hub_database_url:
        hub, token = start_hub(args.hub_database_url, workdir)
    context = multiprocessing.get_context("spawn")
    here, there = context.Pipe()
    helper = context.Process(
        target=serve_cluster,
        args=(
            args.objects,
            args.rate,
            None if hub is None else f"http://127.0.0.1:{hub.port}",
            there,
        ),
    )
    helper.start()
    urls = here.recv()

    def stats() -> dict[str, Any]:
        here.send("stats")
        answer: dict[str, Any] = here.recv()
        return answer

    (workdir / "token").write_text(token + "\n")
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLEETMARK_AGENT_")},
        "FLEETMARK_AGENT_HUB_URL": urls["sink"],
        "FLEETMARK_AGENT_TOKEN_FILE": str(workdir / "token"),
        "FLEETMARK_AGENT_CLUSTER_NAME": "bench-cluster",
        "FLEETMARK_AGENT_INSTANCE": "fleetmark-agent-bench",
        "FLEETMARK_AGENT_KUBE_HOST": urls["api"],
        "FLEETMARK_AGENT_SPOOL_DIR": str(workdir / "spool"),
        "FLEETMARK_AGENT_LEASE_NAMESPACE": "fleetmark",
        "FLEETMARK_AGENT_HEALTH_HOST": "127.0.0.1",
        "FLEETMARK_AGENT_HEALTH_PORT": str(free_port()),
        "FLEETMARK_AGENT_MIN_INTERVAL": str(args.min_interval),
        "FLEETMARK_AGENT_SNAPSHOT_INTERVAL": str(args.snapshot_interval),
        "FLEETMARK_AGENT_LOG_LEVEL": "warning",
    }
    environment.pop("MALLOC_ARENA_MAX", None)
    if args.malloc_arena_max:
        environment["MALLOC_ARENA_MAX"] = str(args.malloc_arena_max)
    logs = (workdir / "agent.log").open("wb")
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent"], env=environment, stdout=logs, stderr=logs, cwd=ROOT
    )
    protocol = subprocess.Popen(
        [sys.executable, __file__, "--protocol-only", urls["api"]], cwd=ROOT, env=environment
    )
    imports = subprocess.Popen(
        [sys.executable, "-c", "import agent.runner, time; time.sleep(1e6)"],
        cwd=ROOT,
        env=environment,
    )
    probes = [
        Probe("agent (watch + mappers + reporter)", psutil.Process(agent.pid)),
        Probe("baseline: same imports, idle", psutil.Process(imports.pid)),
        Probe("baseline: same imports, list+watch only", psutil.Process(protocol.pid)),
    ]
    try:
        started = time.monotonic()
        wait_for(lambda: stats()["full_snapshots"] >= 1, args.startup_timeout, "the first snapshot")
        startup = time.monotonic() - started
        startup_cpu = probes[0].cpu()
        here.send("drive")
        for probe in probes:
            probe.cpu_start = probe.cpu()
        before = stats()
        window_start = time.monotonic()
        while time.monotonic() - window_start < args.duration:
            for probe in probes:
                probe.sample()
            time.sleep(args.sample)
        window = time.monotonic() - window_start
        for probe in probes:
            probe.sample()
            probe.cpu_end = probe.cpu()
        after = stats()
        for process in (agent, protocol, imports):
            if process.poll() is not None:
                raise SystemExit(f"benchmark: a process exited early ({process.args})")
    finally:
        for process in (agent, protocol, imports):
            process.terminate()
        for process in (agent, protocol, imports):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        here.send("stop")
        here.recv()
        helper.join(timeout=10)
        held = None if hub is None else held_by_hub(args.hub_database_url)
        if hub is not None:
            hub.stop()
        logs.close()
        problems = (workdir / "agent.log").read_text(errors="replace").strip()
        shutil.rmtree(workdir, ignore_errors=True)
    if problems:
        print("agent log (warnings and errors):\n" + problems[-4000:], file=sys.stderr)

    lags = sorted(after["lags"])
    reports = after["reports"] - before["reports"]
    print()
    print("fleetmark agent benchmark")
    print(f"  objects {args.objects}, {args.rate:g} changes/s, measured {window:.1f} s")
    print(
        f"  agent min_interval {args.min_interval:g} s, snapshot_interval "
        f"{args.snapshot_interval:g} s, leader election on, MALLOC_ARENA_MAX "
        f"{args.malloc_arena_max or 'unset'}"
    )
    print(
        f"  first full snapshot after {startup:.1f} s ({startup_cpu:.2f} s CPU), "
        f"{after['first_snapshot_objects']} objects"
    )
    print()
    print(f"  {'process':<40} {'RSS peak':>10} {'RSS end':>10} {'CPU':>8}")
    for probe in probes:
        cpu = (probe.cpu_end - probe.cpu_start) / window * 100
        print(f"  {probe.name:<40} {mb(probe.peak_rss):>10} {mb(probe.last_rss):>10} {cpu:7.2f}%")
    agent_probe, imports_probe, protocol_probe = probes
    print()
    print("  agent over baselines")
    print(
        f"    RSS  +{(agent_probe.peak_rss - imports_probe.peak_rss) / 1024 / 1024:.1f} MB over "
        f"the idle imports, +{(agent_probe.peak_rss - protocol_probe.peak_rss) / 1024 / 1024:.1f}"
        " MB over list+watch only"
    )
    agent_cpu = agent_probe.cpu_end - agent_probe.cpu_start
    protocol_cpu = protocol_probe.cpu_end - protocol_probe.cpu_start
    ratio = f"{agent_cpu / protocol_cpu:.1f}x" if protocol_cpu > 0 else "n/a"
    print(f"    CPU  {ratio} that of list+watch only")
    print()
    print("  reports received by the sink during the window")
    print(
        f"    {reports} reports ({after['full_snapshots'] - before['full_snapshots']} full), "
        f"{after['records'] - before['records']} records, "
        f"{(after['bytes'] - before['bytes']) / 1024:.0f} KiB"
    )
    if hub is not None:
        parts = ", ".join(
            f"{snapshots} in {count} parts"
            for count, snapshots in sorted(after["parts_per_snapshot"].items())
        )
        statuses = ", ".join(f"{status}: {n}" for status, n in sorted(after["statuses"].items()))
        print("  a real hub (fleetmark serve, 4 MiB body limit), over the whole run")
        print(f"    full snapshots in parts: {parts or 'none'}; {after['snapshot_parts']} parts")
        print(f"    the hub's answers: {statuses}")
        if held is not None:
            print(f"    the hub holds {held[0]} live objects of the cluster, {held[1]} removed")
    made = after["changes_made"] - before["changes_made"]
    if lags:
        p50 = statistics.median(lags)
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
        print(
            f"    {made} changes made, {len(lags)} seen in reports; "
            f"change → hub p50 {p50:.2f} s, p99 {p99:.2f} s"
        )
    verdict = "meets" if agent_probe.peak_rss / 1024 / 1024 < TARGET_RSS_MB else "MISSES"
    print()
    print(
        f"  target: agent RSS < {TARGET_RSS_MB:.0f} MB: {verdict} "
        f"(peak {agent_probe.peak_rss / 1024 / 1024:.1f} MB)"
    )


if __name__ == "__main__":
    main()
