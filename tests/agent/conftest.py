"""Fixtures for the agent's delivery path: reports, a scripted hub, and the real hub served.

`FakeHub` stands behind `httpx.MockTransport` for the unit tests: it keeps what it took by
(boot id, sequence) the way the hub does, and can be taken down, made to refuse the token,
reject chosen reports or lose a reply after taking a report.

`LiveHub` is the real one: the hub's app over a migrated database of its own (committed to,
unlike the rolled-back `session` fixture), served by uvicorn on 127.0.0.1 in a thread, and
stopped and started again on the same port as a hub restart would be.
"""

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from agent.client import HubClient
from agent.report import AgentIdentity, ClusterIdentity, ObjectRecord, Report, Source
from hub.app import create_app
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from tests.conftest import TOKEN_SECRET, hub_settings
from tests.support import PLATFORM_REPO, SHA_A, START, FakeClock

CLUSTER = "drone-dev-1"
TOKEN = "fm-test-cluster-token"
IDENTITY = ClusterIdentity(name=CLUSTER, environment="dev", labels={"region": "east-us"})


def record(name: str, revision: str = f"dev@sha1:{SHA_A}", **fields: Any) -> ObjectRecord:
    """A healthy Flux Kustomization record; fields override any attribute."""
    values: dict[str, Any] = {
        "reconciler": "flux",
        "kind": "Kustomization",
        "namespace": "flux-system",
        "name": name,
        "source": Source(url=PLATFORM_REPO, ref="dev", path=f"drone/{name}"),
        "applied_revision": revision,
        "attempted_revision": revision,
        "ready": True,
        "reason": "ReconciliationSucceeded",
        "health": "Healthy",
    }
    return ObjectRecord(**(values | fields))


def make_report(
    sequence: int,
    *,
    boot_id: str = "boot-1",
    full_snapshot: bool = False,
    objects: tuple[ObjectRecord, ...] = (),
    observed_at: datetime = START,
) -> Report:
    return Report(
        cluster=IDENTITY,
        agent=AgentIdentity(version="0.1.0", boot_id=boot_id, instance="fleetmark-agent-0"),
        sequence=sequence,
        observed_at=observed_at,
        full_snapshot=full_snapshot,
        objects=objects or (record(f"app-{sequence}"),),
    )


class Sleeps:
    """An injected sleep that only writes down how long it was asked to wait."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@dataclass
class FakeHub:
    """The hub's ingest contract, in memory: idempotent on (boot id, sequence)."""

    token: str = TOKEN
    down: bool = False
    reject: dict[int, tuple[int, dict[str, str]]] = field(default_factory=dict)
    lose_reply_for: set[int] = field(default_factory=set)
    # The largest body taken (stated in every reply, as the hub does); None: no limit.
    max_report_bytes: int | None = None
    taken: dict[tuple[str, int], Report] = field(default_factory=dict)
    # Every request that reached the hub: (boot id, sequence, duplicate or None if refused).
    seen: list[tuple[str, int, bool | None]] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        limit = self.max_report_bytes
        headers = {} if limit is None else {"X-Fleetmark-Max-Report-Bytes": str(limit)}
        if limit is not None and len(request.content) > limit:
            body = {"error": "payload_too_large", "detail": f"the limit is {limit}"}
            return httpx.Response(413, json=body, headers=headers)
        report = Report.model_validate_json(request.content)
        key = (report.agent.boot_id, report.sequence)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            self.seen.append((*key, None))
            body = {"error": "not_authenticated", "detail": "the cluster token is unknown"}
            return httpx.Response(401, json=body)
        if report.sequence in self.reject:
            self.seen.append((*key, None))
            status, body = self.reject[report.sequence]
            return httpx.Response(status, json=body)
        duplicate = key in self.taken
        self.seen.append((*key, duplicate))
        self.taken.setdefault(key, report)
        if report.sequence in self.lose_reply_for:
            self.lose_reply_for.discard(report.sequence)
            raise httpx.ReadError("connection reset after the hub took the report")
        reply = {
            "accepted": 0 if duplicate else len(report.objects),
            "changed": 0 if duplicate else len(report.objects),
            "duplicate": duplicate,
            "warnings": [],
        }
        return httpx.Response(200, json=reply, headers=headers)

    def delivered(self) -> list[tuple[str, int]]:
        """(boot id, sequence) of each report taken, in the order the hub first took them."""
        return list(self.taken)


@pytest.fixture
def fake_hub() -> FakeHub:
    return FakeHub()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    write_token(path, TOKEN)
    return path


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def hub_client(
    fake_hub: FakeHub, token_file: Path, sleeps: Sleeps
) -> AsyncIterator[HubClient]:
    async with HubClient(
        "http://hub.test",
        token_file=token_file,
        transport=httpx.MockTransport(fake_hub.handler),
        attempts=2,
        sleep=sleeps,
        jitter=lambda: 1.0,
    ) as client:
        yield client


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class LiveHub:
    """The real hub on a real port; `stop()` and `start()` again are a hub restart."""

    BOUND = 15.0  # seconds the server may take to come up or go down

    def __init__(self, database_url: str, clock: Callable[[], datetime], **settings: Any) -> None:
        self.database_url = database_url
        self.clock = clock
        self.settings = settings
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.apps: list[FastAPI] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        assert self._server is None, "the hub is already running"
        app = create_app(hub_settings(**self.settings), self.database_url, clock=self.clock)
        self.apps.append(app)
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            loop="asyncio",
            http="h11",
            ws="none",
            lifespan="on",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name=f"hub-{self.port}", daemon=True)
        thread.start()
        deadline = time.monotonic() + self.BOUND
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise RuntimeError(f"the hub did not start on port {self.port}")
            time.sleep(0.01)
        self._server, self._thread = server, thread

    def stop(self) -> None:
        assert self._server is not None, "the hub is not running"
        assert self._thread is not None
        self._server.should_exit = True
        self._thread.join(self.BOUND)
        if self._thread.is_alive():
            raise RuntimeError(f"the hub on port {self.port} did not stop")
        self._server = self._thread = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def reports(self, outcome: str) -> float:
        """The hub's own count of reports by outcome (accepted, duplicate), over every run."""
        total = 0.0
        for app in self.apps:
            value = app.state.metrics.registry.get_sample_value(
                "fleetmark_reports_total", {"outcome": outcome}
            )
            total += value or 0.0
        return total


@pytest.fixture
def hub_database(migrated_database: str) -> str:
    """A database of the test's own, migrated to head, that the hub commits to."""
    return migrated_database


@pytest.fixture
async def hub_engine(hub_database: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(hub_database)
    yield engine
    await engine.dispose()


@pytest.fixture
def live_hub(hub_database: str) -> Iterator[LiveHub]:
    # The hub's clock runs a day ahead of the reports' observation times, so the hub never
    # clamps an observed_at to its receipt time and each report keeps its own.
    hub = LiveHub(hub_database, FakeClock(START + timedelta(days=1)))
    try:
        yield hub
    finally:
        if hub.running:
            hub.stop()


async def register_cluster(engine: AsyncEngine, name: str, environment: str) -> str:
    """Registers a cluster as `fleetmark clusters register` does; returns its token."""
    async with AsyncSession(engine) as session:
        registered = await cluster_service.register(
            session,
            ClusterRegistration(name=name, environment=environment),
            token_secret=TOKEN_SECRET,
        )
        await session.commit()
    return registered.token


def write_token(path: Path, token: str, mode: int = 0o600) -> None:
    """Writes a token file as a mounted Secret holds it (a new file swapped in)."""
    replacement = path.with_name(path.name + ".new")
    replacement.write_text(token + "\n")
    replacement.chmod(mode)
    replacement.replace(path)


def reason_of(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.with_name(path.name + ".reason.json").read_text())
    return loaded
