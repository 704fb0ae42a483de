"""The hub needs no superuser: a role that owns its database (and so, on PostgreSQL 15 and
newer, its public schema) migrates it, TimescaleDB included (a trusted extension), and
stores reports. This is the role the README, compose and the chart run the hub as."""

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import create_engine, pool, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from hub import migrate
from hub.app import create_app
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from tests.conftest import TOKEN_SECRET, DatabaseServer, expected_backend, hub_settings
from tests.support import bearer, kustomization, report


def run_as_superuser(server: DatabaseServer, *statements: str) -> None:
    engine = create_engine(server.url, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


@pytest.fixture
def owned_database(database_server: DatabaseServer) -> Iterator[str]:
    """A new database owned by a new role that may log in and do nothing else."""
    suffix = uuid.uuid4().hex[:12]
    role, database = f"fleetmark_owner_{suffix}", f"fleetmark_test_{suffix}"
    run_as_superuser(
        database_server,
        f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE',
        f'CREATE DATABASE "{database}" OWNER "{role}"',
    )
    url = make_url(database_server.url).set(username=role, database=database)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        run_as_superuser(
            database_server,
            f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)',
            f'DROP ROLE IF EXISTS "{role}"',
        )


def extensions_and_superuser(url: str) -> tuple[set[str], bool]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            extensions = set(connection.execute(text("SELECT extname FROM pg_extension")).scalars())
            superuser = connection.execute(
                text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            ).scalar_one()
    finally:
        engine.dispose()
    return extensions, superuser


async def test_a_role_owning_its_database_migrates_it_and_stores_reports(
    owned_database: str,
) -> None:
    migrate.upgrade(owned_database)
    engine = create_async_engine(owned_database)
    try:
        async with AsyncSession(engine) as session:
            registered = await cluster_service.register(
                session,
                ClusterRegistration(name="drone-dev-1", environment="dev", cluster_type="drone"),
                token_secret=TOKEN_SECRET,
            )
            await session.commit()
    finally:
        await engine.dispose()
    app = create_app(hub_settings(), owned_database)
    body = report(
        "drone-dev-1", sequence=1, observed_at=datetime.now(UTC), objects=[kustomization("app")]
    )

    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hub") as client,
    ):
        stored = await client.post("/api/v1/reports", json=body, headers=bearer(registered.token))
        ready = await client.get("/readyz")

    extensions, superuser = extensions_and_superuser(owned_database)
    assert superuser is False
    assert stored.status_code == 200, stored.text
    assert stored.json()["accepted"] == 1
    assert ready.status_code == 200
    assert migrate.current_revision(owned_database) == migrate.head_revision()
    assert ("timescaledb" in extensions) == (expected_backend() == "timescaledb")
