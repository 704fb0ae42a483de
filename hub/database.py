"""Engine and sessions for the store.

Only the boundary commits: the request dependency and each background job's wrapper open a
session, commit on success and roll back on error. Read-only sessions run in READ ONLY
transactions so a query path can never write.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NewType

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from hub.embedded import start_embedded_postgres
from hub.settings import HubSettings

ReadSession = NewType("ReadSession", AsyncSession)


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
    return create_async_engine(
        url,
        pool_size=settings.database_pool_size,
        max_overflow=settings.database_pool_size,
        pool_pre_ping=False,
        connect_args={"application_name": "fleetmark-hub"},
    )


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
async def read_session(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[ReadSession]:
    """A READ ONLY transaction, always rolled back."""
    async with sessionmaker() as session:
        await session.connection(execution_options={"postgresql_readonly": True})
        try:
            yield ReadSession(session)
        finally:
            await session.rollback()
