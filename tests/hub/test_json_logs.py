"""The hub served in JSON log mode: every line it writes is a JSON object, uvicorn's own lines
(an unhandled exception's traceback, a request it cannot parse) included."""

import json
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import create_engine, pool, text

from hub.cli.common import run_in_database
from hub.tokens import service as token_service
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.served import hub_environment, served_hub
from tests.support import bearer


@pytest.fixture
def hub_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


def _records(log: Path) -> list[dict[str, Any]]:
    lines = log.read_text().splitlines()
    assert lines
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line!r}\n\nthe log:\n{log.read_text()}")
    return records


def test_every_line_is_json_in_json_log_mode(hub_database: str, tmp_path: Path) -> None:
    admin = "fma_" + secrets.token_urlsafe(32)
    run_in_database(
        hub_database,
        hub_settings(),
        lambda session: token_service.create_first_admin(
            session, token=admin, token_secret=TOKEN_SECRET
        ),
    )
    environment = hub_environment(hub_database, tmp_path, FLEETMARK_LOG_FORMAT="json")
    log = tmp_path / "hub.log"

    with served_hub(environment, log) as hub:
        address = urlsplit(hub.url)
        with socket.create_connection((address.hostname, address.port), timeout=10) as raw:
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            refused = raw.recv(1024)
        # An exception no handler takes: the table runs are read from is gone.
        engine = create_engine(hub_database, poolclass=pool.NullPool)
        with engine.begin() as connection:
            connection.execute(text("ALTER TABLE job_run RENAME TO job_run_gone"))
        engine.dispose()
        failed = httpx.get(f"{hub.url}/api/v1/runs/1", headers=bearer(admin), timeout=10.0)
        assert hub.stop() == 0

    assert refused.startswith(b"HTTP/1.1 400")
    assert failed.status_code == 500
    records = _records(log)
    uvicorn = [record for record in records if record.get("logger", "").startswith("uvicorn")]
    assert any("Invalid HTTP request" in record["event"] for record in uvicorn), uvicorn
    (unhandled,) = [r for r in uvicorn if r["event"].startswith("Exception in ASGI application")]
    assert unhandled["level"] == "error"
    assert "UndefinedTable" in unhandled["exception"]
    assert any(record["event"] == "hub starting" for record in records)
    # `fleetmark serve` keeps uvicorn's access log off.
    assert not [record for record in uvicorn if record["logger"] == "uvicorn.access"]
