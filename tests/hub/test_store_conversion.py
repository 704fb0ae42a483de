"""A store made on plain PostgreSQL moves onto TimescaleDB with `fleetmark migrate
--to-timescaledb` and keeps every row: the server it lives on is restarted with TimescaleDB
preloaded, as an operator enabling the extension would."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from typer.testing import CliRunner

from hub import migrate, store
from hub.cli import app as cli
from hub.database import create_sessionmaker
from hub.embedded import TIMESCALEDB_SETTINGS, start_embedded_postgres
from tests.conftest import TEST_BACKEND, TOKEN_SECRET, DatabaseServer
from tests.hub.test_migrations import schema_differences
from tests.hub.test_rollups import RAW, VIEWS
from tests.hub.test_store_retention import NOW, STALE_AFTER, connected, fill

COUNTS = {
    table: f"SELECT count(*), min({column}), max({column}) FROM {table}"
    for table, (column, _) in migrate.HYPERTABLES.items()
}


@pytest.fixture
def server_dir() -> Path:
    if os.environ.get(TEST_BACKEND) != "timescaledb":
        pytest.skip(f"needs TimescaleDB installed ({TEST_BACKEND}=timescaledb)")
    data_dir = Path(tempfile.mkdtemp(prefix="fleetmark-convert-"))
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    return data_dir / "postgres"


def fleetmark(database: str, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    monkeypatch.setenv("FLEETMARK_DATABASE_URL", database)
    monkeypatch.setenv("FLEETMARK_TOKEN_SECRET", TOKEN_SECRET)
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


async def test_a_plain_store_moves_onto_timescaledb_with_its_history(
    server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = DatabaseServer(start_embedded_postgres(server_dir))
    database = plain.create_database()
    migrate.upgrade(database)
    async with connected(database) as admin:
        await fill(admin)
        before = {
            table: (await admin.execute(text(query))).one() for table, query in COUNTS.items()
        }
    engine = create_async_engine(database)
    try:
        assert await store.refresh_rollups(create_sessionmaker(engine), NOW, STALE_AFTER)
    finally:
        await engine.dispose()

    code, output = fleetmark(database, monkeypatch, "migrate", "--to-timescaledb")
    assert code == 2
    assert "does not preload TimescaleDB" in output

    # The operator installs TimescaleDB and restarts the server with it preloaded.
    start_embedded_postgres(server_dir, TIMESCALEDB_SETTINGS)
    code, output = fleetmark(database, monkeypatch, "migrate", "--to-timescaledb")
    assert code == 0, output
    assert migrate.head_revision() in output

    async with connected(database) as admin:
        found = await store.backend(admin)
        assert (found.name, found.continuous_aggregates) == ("timescaledb", True)
        hypertables = await admin.scalars(
            text("SELECT hypertable_name FROM timescaledb_information.hypertables")
        )
        assert set(hypertables) >= set(COUNTS)
        after = {table: (await admin.execute(text(query))).one() for table, query in COUNTS.items()}
        assert after == before
        for view, query in VIEWS.items():
            rows = sorted(tuple(row) for row in await admin.execute(text(query)))
            assert rows == sorted(tuple(row) for row in await admin.execute(text(RAW[view])))
    assert schema_differences(database) == []

    code, output = fleetmark(database, monkeypatch, "migrate", "--to-timescaledb")
    assert code == 2
    assert "on TimescaleDB already" in output
