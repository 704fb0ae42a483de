"""Engine and sessions for the store: the boundary commits, read-only sessions run READ ONLY.

Report ingest, one statement, runs on `Statements`: autocommit psycopg connections, one round
trip without BEGIN, COMMIT or the ORM. A `StoreGate` stands before both, refusing requests at
once while the database cannot be reached instead of each waiting for a connection.
"""

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, NewType, Protocol

import psycopg
import structlog
from psycopg_pool import AsyncConnectionPool, PoolTimeout, TooManyRequests
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InterfaceError as EngineInterfaceError
from sqlalchemy.exc import OperationalError as EngineOperationalError
from sqlalchemy.exc import TimeoutError as EnginePoolTimeout
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from hub.embedded import start_embedded_postgres
from hub.settings import HubSettings

log = structlog.get_logger(__name__)

ReadSession = NewType("ReadSession", AsyncSession)
# The psycopg connection a single-statement unit of work runs on (see Statements).
StatementConnection = psycopg.AsyncConnection[Any]
APPLICATION_NAME = "fleetmark-hub"
# Raised when every database connection stays busy past database_pool_timeout: the hub is
# overloaded, not broken, so clients are told to retry (503) rather than shown an error.
STORE_BUSY_ERRORS: tuple[type[Exception], ...] = (PoolTimeout, TooManyRequests, EnginePoolTimeout)


class StoreUnreachable(Exception):
    """The hub's last attempt to connect to the store failed (see StoreGate)."""


# Raised when the store cannot be reached or drops the connection (refused, lost mid-statement,
# shut down, restarting; psycopg's InterfaceError for a connection already closed), bare or as
# SQLAlchemy wraps them: a request that meets one is told to retry (503), like a busy store.
STORE_UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    StoreUnreachable,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    EngineOperationalError,
    EngineInterfaceError,
)


# Seconds between two connection attempts while the store cannot be reached.
STORE_PROBE_INTERVAL = 1.0


class StoreGate:
    """Whether requests that need the store try it, or are refused at once.

    - Open until a request fails with one of STORE_UNAVAILABLE_ERRORS (`doubt`). One statement
      failing does not yet say the server is gone (the server may have ended that one
      connection), so the next request to come first opens a connection of its own.
    - That attempt failing shuts the gate: requests raise StoreUnreachable at once, where each
      would otherwise wait `database_pool_timeout` seconds for a pool that cannot connect.
    - While shut, the first request STORE_PROBE_INTERVAL seconds after the last attempt tries
      again; a connection that succeeds opens the gate, and that request goes on.

    A busy store (every connection in use) never shuts it: that is load, not an outage.
    """

    def __init__(
        self,
        database_url: str,
        *,
        connect_timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.conninfo = _conninfo(database_url)
        self.connect_timeout = max(round(connect_timeout), 1)
        self.clock = clock
        self.unreachable = False
        self._attempt_due: float | None = None  # None while nothing says the store is gone
        self._attempting = False

    def doubt(self) -> None:
        if self._attempt_due is None:
            self._attempt_due = self.clock()

    async def check(self) -> None:
        """Return when the request may use the store; raise StoreUnreachable when not."""
        due = self._attempt_due
        if due is None:
            return
        if self._attempting or self.clock() < due:
            if self.unreachable:
                raise StoreUnreachable
            return
        self._attempting = True
        try:
            connection = await psycopg.AsyncConnection.connect(
                self.conninfo,
                connect_timeout=self.connect_timeout,
                application_name=APPLICATION_NAME,
            )
        except psycopg.Error as exc:
            if not self.unreachable:
                log.warning("database unreachable: refusing requests until it answers", error=exc)
            self.unreachable = True
            self._attempt_due = self.clock() + STORE_PROBE_INTERVAL
            raise StoreUnreachable from exc
        finally:
            self._attempting = False
        await connection.close()
        if self.unreachable:
            log.warning("database reachable again")
        self.unreachable = False
        self._attempt_due = None


def _conninfo(database_url: str) -> str:
    """The libpq form of a SQLAlchemy URL (postgresql+psycopg://...)."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def normalise_database_url(url: str) -> str:
    """Accept postgres://, postgresql:// or postgresql+psycopg:// and use psycopg 3."""
    parsed = make_url(url)
    if parsed.get_backend_name() not in {"postgres", "postgresql"}:
        raise ValueError(
            f"FLEETMARK_DATABASE_URL must be a PostgreSQL URL, not {parsed.drivername}"
        )
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def resolve_database_url(settings: HubSettings) -> str:
    """The configured database, or the embedded one (started if needed) when none is set."""
    if settings.database_url is not None:
        return normalise_database_url(settings.database_url.get_secret_value())
    return start_embedded_postgres(settings.embedded_data_dir)


def create_engine(url: str, settings: HubSettings) -> AsyncEngine:
    # Without JIT: PostgreSQL compiles a statement whose estimated cost is high, and the hub's
    # read statements, planned on rough guesses but run in milliseconds, would spend more
    # time compiling than running (150 ms of the promotion gate's 7,000 clusters).
    # In UTC: times come back in the session's zone, and adding a soak of a day to a time in a
    # zone with daylight saving would add a calendar day, not 24 hours.
    return create_async_engine(
        url,
        pool_size=settings.database_pool_size,
        max_overflow=settings.database_pool_size,
        pool_pre_ping=False,
        pool_timeout=settings.database_pool_timeout,
        connect_args={
            "application_name": APPLICATION_NAME,
            "options": _server_options(
                url,
                f"-c max_parallel_workers_per_gather={settings.database_parallel_workers} "
                "-c jit=off -c timezone=UTC",
            ),
        },
    )


def _server_options(url: str, option: str) -> str:
    """`option` after the server options the URL gives (`?options=...`), which it overrides
    only where they set the same parameter."""
    given = make_url(url).query.get("options", "")
    if isinstance(given, tuple):
        given = " ".join(given)
    return f"{given} {option}".strip()


def create_statement_pool(url: str, settings: HubSettings) -> AsyncConnectionPool:
    """Autocommit psycopg connections for units of work that are one SQL statement.

    Beside the engine's pool, so the hot path (report ingest) skips SQLAlchemy's session and
    transaction handling. Its commits wait for the WAL flush as the server's own setting says
    (on, unless changed there), so a report answered 2xx survives a crash; with
    `ingest_synchronous_commit` off they do not wait. Opened and closed by the app's lifespan;
    a request that finds every connection busy for `database_pool_timeout` seconds gets
    PoolTimeout, answered with 503. A connection lost with the server is opened again for as
    long, then left to be opened when a request asks for one. So after a longer outage the pool
    connects as soon as requests come back (StoreGate), not after its back-off, which doubles
    each time (1, 2, 4, 8, 16 s, ...).
    """
    conninfo = _conninfo(url)
    options = {"autocommit": True, "application_name": APPLICATION_NAME}
    if not settings.ingest_synchronous_commit:
        options["options"] = "-c synchronous_commit=off"
    return AsyncConnectionPool(
        conninfo,
        min_size=1,
        max_size=2 * settings.database_pool_size,
        timeout=settings.database_pool_timeout,
        reconnect_timeout=settings.database_pool_timeout,
        kwargs=options,
        name="fleetmark-statements",
        open=False,
    )


class Statements(Protocol):
    """Where a unit of work that is one SQL statement runs (see create_statement_pool).

    The app's is its statement pool; tests substitute their own transaction's connection.
    """

    def connection(self) -> AbstractAsyncContextManager[StatementConnection]: ...


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


@asynccontextmanager
async def write_session(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[AsyncSession]:
    """A unit of work: commits when the block succeeds, rolls back when it raises."""
    async with sessionmaker() as session:
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await session.commit()


@asynccontextmanager
async def exclusive(
    sessionmaker: async_sessionmaker[AsyncSession], key: int
) -> AsyncIterator[bool]:
    """Whether this process got the advisory lock `key`: one replica at a time runs what it
    guards (a job's run), the others skip. Held on a connection of its own until the end."""
    async with sessionmaker() as session:
        connection = await session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        acquired = bool(await connection.scalar(select(func.pg_try_advisory_lock(key))))
        try:
            yield acquired
        finally:
            if acquired:
                await connection.scalar(select(func.pg_advisory_unlock(key)))


@asynccontextmanager
async def read_session(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[ReadSession]:
    """A READ ONLY transaction.

    It has nothing to commit, and still ends by COMMIT unless an error ends it: psycopg
    forgets a connection's prepared statements on ROLLBACK, and the statements read endpoints
    ask again and again would then be planned anew on every request.
    """
    async with sessionmaker() as session:
        await session.connection(execution_options={"postgresql_readonly": True})
        try:
            yield ReadSession(session)
        except BaseException:
            await session.rollback()
            raise
        await session.commit()


async def plan_for_values(session: AsyncSession) -> None:
    """The rest of the transaction's statements planned for their own values: once psycopg has
    prepared a statement, the server may run a generic plan, made for any values, which keeps
    every optional filter and cannot leave TimescaleDB's chunks outside a range unread."""
    await session.execute(select(func.set_config("plan_cache_mode", "force_custom_plan", True)))
