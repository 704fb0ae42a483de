"""The hub's connections to its store: each query stays on one core unless configured
otherwise, is never JIT-compiled and runs in UTC, server options the database URL gives are
kept, and read sessions are read-only and keep the statements they prepared."""

from urllib.parse import quote

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import async_sessionmaker

from hub.database import create_engine, read_session
from tests.conftest import hub_settings


async def show(url: str, parallel_workers: int, *parameters: str) -> list[str]:
    engine = create_engine(url, hub_settings(database_parallel_workers=parallel_workers))
    try:
        async with engine.connect() as connection:
            return [str(await connection.scalar(text(f"SHOW {name}"))) for name in parameters]
    finally:
        await engine.dispose()


async def test_queries_run_without_parallel_workers_by_default(database_url: str) -> None:
    assert await show(database_url, 0, "max_parallel_workers_per_gather") == ["0"]
    assert await show(database_url, 3, "max_parallel_workers_per_gather") == ["3"]


async def test_queries_are_not_jit_compiled_and_times_come_in_utc(database_url: str) -> None:
    assert await show(database_url, 0, "jit", "timezone") == ["off", "UTC"]


async def test_server_options_of_the_url_are_kept(database_url: str) -> None:
    separator = "&" if "?" in database_url else "?"
    url = f"{database_url}{separator}options={quote('-c work_mem=7MB')}"

    assert await show(url, 0, "work_mem", "max_parallel_workers_per_gather") == ["7MB", "0"]


async def test_read_sessions_cannot_write_and_keep_their_prepared_statements(
    database_url: str,
) -> None:
    engine = create_engine(database_url, hub_settings())
    sessionmaker = async_sessionmaker(engine)
    asked = text("SELECT count(*) FROM pg_class WHERE relname = :name")
    prepared = text("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%relname%'")
    try:
        # One connection, asked the same statement once per request, as a hub serves reads:
        # the driver prepares it on the sixth asking and keeps it for the next request.
        for _ in range(6):
            async with read_session(sessionmaker) as session:
                await session.execute(asked, {"name": "cluster"})
        async with read_session(sessionmaker) as session:
            assert await session.scalar(prepared) == 1
        with pytest.raises(DBAPIError, match="read-only transaction"):
            async with read_session(sessionmaker) as session:
                await session.execute(text("CREATE TEMPORARY TABLE scratch (id int)"))
    finally:
        await engine.dispose()
