"""Fixtures: a real PostgreSQL, a fresh database per run, a rolled-back transaction per test.

The server is FLEETMARK_TEST_DATABASE_URL when set, otherwise an embedded PostgreSQL in a
temporary directory; with FLEETMARK_TEST_BACKEND=timescaledb that embedded server preloads
TimescaleDB (built into it by .ci/timescaledb), and tests/test_backend.py checks that the
store really is on the backend FLEETMARK_TEST_BACKEND names. Each run creates its own
databases there (unique names, so runs never collide), builds the schema once with `alembic
upgrade head`, makes every other database at head a copy of that one, and drops them all at
the end.

Every test runs inside one outer transaction that is rolled back afterwards. The app gets
that connection's session through `dependency_overrides`, and its report statements through
its state; the session joins the transaction with savepoints, so the hub's own commit and
rollback at the request boundary behave as in production without ever committing the outer
transaction.
"""

import atexit
import json
import logging
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TextIO

import httpx
import psycopg
import pytest
import structlog
from fastapi import FastAPI
from sqlalchemy import create_engine, pool, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from hub import migrate
from hub.app import create_app
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.database import ReadSession, StatementConnection, normalise_database_url
from hub.deps import get_read_session, get_session
from hub.embedded import TIMESCALEDB_SETTINGS, start_embedded_postgres, timescaledb_installed
from hub.ingest.batcher import ReportBatcher
from hub.settings import HubSettings
from hub.tokens import service as token_service
from hub.tokens.schemas import Scope, TokenRequest
from tests.support import Agent, FakeClock, Store

TEST_DATABASE_URL = "FLEETMARK_TEST_DATABASE_URL"
TEST_BACKEND = "FLEETMARK_TEST_BACKEND"
BACKENDS = ("postgresql", "timescaledb")
TOKEN_SECRET = "fleetmark-test-secret-of-at-least-32-characters"


class HubLogs:
    """Where the hub's log lines go in the tests: to the real standard error (pytest keeps them
    with the test's output), or to standard output, as in production, while a test that reads
    them there asks (`stdout_logs`).

    The hub served in the tests' own process (tests/agent/conftest.py's LiveHub) logs from
    threads of its own while CliRunner, running a command, swaps sys.stdout for every thread:
    on standard output its lines would land in what the command under test printed. A logger
    structlog caches keeps this stream, so it follows the choice too."""

    to_stdout = False

    def _stream(self) -> TextIO:
        stream = sys.stdout if self.to_stdout else sys.__stderr__
        assert stream is not None, "no standard error"
        return stream

    def write(self, text: str) -> int:
        return self._stream().write(text)

    def flush(self) -> None:
        self._stream().flush()


HUB_LOGS = HubLogs()


def route_hub_logs() -> None:
    # A stream in all that PrintLogger uses of one: write and flush.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(HUB_LOGS))  # type: ignore[arg-type]


@pytest.fixture(scope="session", autouse=True)
def hub_logs_apart() -> None:
    route_hub_logs()


@pytest.fixture
def stdout_logs() -> Iterator[None]:
    """The hub's log lines on standard output for the test's length; its logging set up anew
    after it (hub.logs.configure_logging sets the root logger's handler, in JSON mode)."""
    handlers = logging.root.handlers[:]
    HUB_LOGS.to_stdout = True
    yield
    HUB_LOGS.to_stdout = False
    structlog.reset_defaults()
    route_hub_logs()
    logging.root.handlers = handlers


class DatabaseServer:
    """Creates and drops throw-away databases on one PostgreSQL server.

    A database at schema head is a copy of one migrated once (CREATE DATABASE … TEMPLATE): a
    copy takes a tenth of a second, `alembic upgrade head` seconds. tests/test_migrations.py
    runs the migrations themselves.

    A test's databases are dropped in a thread of their own (`discard`) while the next test
    runs: PostgreSQL checkpoints for each DROP DATABASE, which can take seconds; `close` waits
    for every drop and fails with the first that did."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._at_head: str | None = None
        self._drops = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drop-database")
        self._dropping: list[Future[None]] = []

    def _execute(self, statement: str) -> None:
        engine = create_engine(self.url, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(text(statement))
        finally:
            engine.dispose()

    def create_database(self, template: str | None = None) -> str:
        name = f"fleetmark_test_{uuid.uuid4().hex[:16]}"
        copied = "" if template is None else f' TEMPLATE "{template}"'
        self._execute(f'CREATE DATABASE "{name}"{copied}')
        return make_url(self.url).set(database=name).render_as_string(hide_password=False)

    def _drop(self, url: str) -> None:
        self._execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')

    def discard(self, url: str) -> None:
        """Drop the database in the background."""
        self._dropping.append(self._drops.submit(self._drop, url))

    def _template_at_head(self) -> str:
        """The database migrated once, that databases at head are copies of; no one connects to
        it (a database being copied may have no session)."""
        if self._at_head is None:
            url = self.create_database()
            migrate.upgrade(url)
            name = make_url(url).database
            # TimescaleDB's job scheduler keeps a session on every database with the
            # extension: refuse new ones, then end those open.
            self._execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            self._execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
            )
            self._at_head = name
        return self._at_head

    @contextmanager
    def migrated_database(self) -> Iterator[str]:
        """A new database at schema head, dropped when the block ends."""
        url = self.create_database(template=self._template_at_head())
        try:
            yield url
        finally:
            self.discard(url)

    def close(self) -> None:
        """Wait for the drops, then drop the database the others at head were copied from."""
        self._drops.shutdown(wait=True)
        for dropped in self._dropping:
            dropped.result()
        if self._at_head is not None:
            self._execute(f'DROP DATABASE IF EXISTS "{self._at_head}" WITH (FORCE)')
            self._at_head = None


def expected_backend() -> str | None:
    """The backend FLEETMARK_TEST_BACKEND says this run is on, if it says one."""
    backend = os.environ.get(TEST_BACKEND) or None
    if backend is not None and backend not in BACKENDS:
        raise pytest.UsageError(f"{TEST_BACKEND}={backend!r}: expected one of {BACKENDS}")
    return backend


@pytest.fixture(scope="session")
def database_server() -> Iterator[DatabaseServer]:
    server = DatabaseServer(_server_url())
    yield server
    server.close()


def _server_url() -> str:
    """FLEETMARK_TEST_DATABASE_URL, or an embedded PostgreSQL started for the run."""
    configured = os.environ.get(TEST_DATABASE_URL)
    if configured:
        return normalise_database_url(configured)
    data_dir = Path(tempfile.mkdtemp(prefix="fleetmark-test-"))
    # Registered before the server starts: exit handlers run last-in first-out, so the
    # embedded server (which stops itself at exit) is down before its files are removed.
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    settings = None
    if expected_backend() == "timescaledb":
        if not timescaledb_installed():
            raise pytest.UsageError(
                f"{TEST_BACKEND}=timescaledb, but TimescaleDB is not installed in the embedded "
                "PostgreSQL: run `bash .ci/timescaledb`"
            )
        settings = TIMESCALEDB_SETTINGS
    return start_embedded_postgres(data_dir / "postgres", settings)


@pytest.fixture
def fresh_database(database_server: DatabaseServer) -> Iterator[Callable[[], str]]:
    """Makes empty databases (no schema) that are dropped after the test."""
    created: list[str] = []

    def make() -> str:
        created.append(database_server.create_database())
        return created[-1]

    yield make
    for url in created:
        database_server.discard(url)


@pytest.fixture
def migrated_database(database_server: DatabaseServer) -> Iterator[str]:
    """A database of the test's own at schema head, that the hub commits to; dropped after."""
    with database_server.migrated_database() as url:
        yield url


@pytest.fixture(scope="session")
def database_url(database_server: DatabaseServer) -> Iterator[str]:
    """This run's database, migrated to head."""
    with database_server.migrated_database() as url:
        yield url


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def session(engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    async with engine.connect() as connection:
        transaction = await connection.begin()
        # expire_on_commit (unlike the hub's sessions) because this one session outlives
        # many requests: nothing loaded in one request may be served stale in the next.
        session = AsyncSession(
            bind=connection, join_transaction_mode="create_savepoint", autoflush=False
        )
        try:
            yield session
        finally:
            await session.close()
            await transaction.rollback()


@pytest.fixture
def store(session: AsyncSession) -> Store:
    return Store(session)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def hub_settings(**overrides: Any) -> HubSettings:
    values: dict[str, Any] = {
        "mode": "development",
        "token_secret": TOKEN_SECRET,
        "max_report_bytes": 4 * 1024 * 1024,
        "stale_after_seconds": 600,
        "database_pool_size": 2,
        # The app's drift and env diff jobs run on the test's database with its clock: at their
        # 30 s default, a test slow to set up had its first round taken by the job.
        "drift_interval": 3600,
        "env_diff_interval": 3600,
    }
    return HubSettings(**(values | overrides))


@pytest.fixture
def settings() -> HubSettings:
    return hub_settings()


@pytest.fixture(scope="session")
def openapi_document() -> dict[str, Any]:
    """The OpenAPI document /openapi.json serves with the test settings, built once: it takes
    a second or more to build, and every app of the same code serves the same one."""
    app = create_app(hub_settings(), "postgresql://nobody@127.0.0.1:1/none")
    return json.loads(json.dumps(app.openapi()))


class SessionStatements:
    """Runs the app's single statements on the test session's connection, each in a savepoint
    of the test's transaction that is released when it succeeds (as autocommit would)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[StatementConnection]:
        try:
            connection = await self.session.connection()
            raw = await connection.get_raw_connection()
            driver = raw.driver_connection
            assert isinstance(driver, psycopg.AsyncConnection)
            yield driver
        except BaseException:
            await self.session.rollback()
            raise
        await self.session.commit()


def use_test_session(app: FastAPI, session: AsyncSession) -> None:
    """Route the app's sessions and statements to the test's, each request a unit of work.
    Called once the app has started, whose start-up sets statements of its own."""

    async def write_session() -> AsyncIterator[AsyncSession]:
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await session.commit()

    async def read_session() -> AsyncIterator[ReadSession]:
        # As in production the read path runs READ ONLY; inside the savepoint this reverts
        # on rollback, so a query that writes fails here just as it would in the hub.
        await session.execute(text("SET TRANSACTION READ ONLY"))
        try:
            yield ReadSession(session)
        finally:
            await session.rollback()

    app.dependency_overrides[get_session] = write_session
    app.dependency_overrides[get_read_session] = read_session
    # Reports are answered ahead of the app's dependencies (hub/ingest/router.py): their
    # statements and batcher are the app's state, which start-up sets.
    settings: HubSettings = app.state.settings
    app.state.statements = statements = SessionStatements(session)
    app.state.report_batcher = ReportBatcher(
        statements, busy_timeout=settings.database_pool_timeout
    )


MakeClient = Callable[..., Awaitable[httpx.AsyncClient]]


@pytest.fixture
async def make_client(
    session: AsyncSession, clock: FakeClock, database_url: str
) -> AsyncIterator[MakeClient]:
    """Builds the app with the given settings overrides and returns a client for it."""
    async with AsyncExitStack() as stack:

        async def make(**overrides: Any) -> httpx.AsyncClient:
            app = create_app(hub_settings(**overrides), database_url, clock=clock)
            await stack.enter_async_context(app.router.lifespan_context(app))
            use_test_session(app, session)
            transport = httpx.ASGITransport(app=app)
            return await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://hub.test")
            )

        yield make


@pytest.fixture
async def client(make_client: MakeClient) -> httpx.AsyncClient:
    return await make_client()


@pytest.fixture
def make_token(session: AsyncSession) -> Callable[..., Awaitable[str]]:
    """Creates an API token directly through the service, as `fleetmark tokens create` does."""

    async def make(name: str, scope: Scope) -> str:
        created = await token_service.create(
            session, TokenRequest(name=name, scope=scope), token_secret=TOKEN_SECRET
        )
        await session.commit()
        return created.token

    return make


@pytest.fixture
async def admin_token(make_token: Callable[..., Awaitable[str]]) -> str:
    return await make_token("ops-admin", "admin")


@pytest.fixture
async def read_token(make_token: Callable[..., Awaitable[str]]) -> str:
    return await make_token("grafana", "read")


RegisterCluster = Callable[..., Awaitable[str]]


@pytest.fixture
def register_cluster(session: AsyncSession) -> RegisterCluster:
    """Registers a cluster as `fleetmark clusters register` does; returns its token."""

    async def register(
        name: str,
        environment: str | None = None,
        cluster_type: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> str:
        registration = ClusterRegistration(
            name=name, environment=environment, cluster_type=cluster_type, labels=labels or {}
        )
        registered = await cluster_service.register(
            session, registration, token_secret=TOKEN_SECRET
        )
        await session.commit()
        return registered.token

    return register


MakeAgent = Callable[..., Awaitable[Agent]]


@pytest.fixture
def make_agent(
    client: httpx.AsyncClient, clock: FakeClock, register_cluster: RegisterCluster
) -> MakeAgent:
    """Registers a cluster and returns an agent that reports for it."""

    async def make(name: str = "drone-dev-1", **registration: Any) -> Agent:
        token = await register_cluster(name, **registration)
        return Agent(client=client, clock=clock, cluster=name, token=token)

    return make


@pytest.fixture
async def agent(make_agent: MakeAgent) -> Agent:
    return await make_agent()
