"""Compose with `--profile demo` shows something on every dashboard. Compose cannot run here,
so its `demo` service's command runs as compose runs it, against `fleetmark serve` as compose
runs it (production mode: no local repository; the admin token from a file): the compose
names (`hub:8080`, `demo:8000`, `/run/secrets/admin_token`) stand for this machine's, and the
story is told at the fast pace, the hub's jobs at that pace too. Then every panel's SQL, as
Grafana sends it with the variables at "All" for the last day, returns rows as Grafana's
read-only role, with something in them besides zeros; and every alert rule's query runs.
"""

import asyncio
import re
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from dashboards import alerts
from hub import store
from hub.cli.demo import FAST
from hub.database import create_sessionmaker
from tests.conftest import DatabaseServer
from tests.dashboards.conftest import ReadOnly
from tests.dashboards.panels import PanelQuery, panel_queries
from tests.demo_run import STOP_TIMEOUT, STORY_TIMEOUT, TOLD, environment
from tests.served import FLEETMARK, ServedHub, free_port, hub_environment, served_hub
from tests.support import bearer

ROOT = Path(__file__).resolve().parents[2]
QUERIES = panel_queries()


def compose_demo() -> dict[str, object]:
    service: dict[str, object] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())[
        "services"
    ]["demo"]
    return service


@dataclass
class Told:
    database: str
    hub: ServedHub
    admin: str
    output: str


def _command(hub: ServedHub, token_file: Path, git_port: int) -> list[str]:
    """The compose service's command, its compose names this machine's."""
    command = compose_demo()["command"]
    assert isinstance(command, list)
    local = {
        "http://hub:8080": hub.url,
        "/run/secrets/admin_token": str(token_file),
        "0.0.0.0:8000": f"127.0.0.1:{git_port}",
        "http://demo:8000": f"http://127.0.0.1:{git_port}",
    }
    assert set(local) <= set(command), command
    return [local.get(word, word) for word in command]


async def _roll_up(url: str) -> None:
    engine = create_async_engine(url)
    try:
        await store.refresh_rollups(
            create_sessionmaker(engine), datetime.now(UTC), timedelta(seconds=FAST.stale_after)
        )
    finally:
        await engine.dispose()


@pytest.fixture(scope="module")
def told(
    database_server: DatabaseServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Told]:
    tmp = tmp_path_factory.mktemp("demo-profile")
    admin = tmp / "admin_token"
    admin.write_text(f"fma_{uuid.uuid4().hex}{uuid.uuid4().hex[:11]}\n")
    admin.chmod(0o600)
    at_the_story_pace = {
        "FLEETMARK_STALE_AFTER_SECONDS": str(FAST.stale_after),
        "FLEETMARK_GATE_ANSWERS_SOAK": str(FAST.soak),
        "FLEETMARK_HARVEST_INTERVAL": str(FAST.jobs * 3),
        **{
            f"FLEETMARK_{job}_INTERVAL": str(FAST.jobs)
            for job in ("DRIFT", "ENV_DIFF", "GATE_ANSWERS", "DORA")
        },
    }
    with database_server.migrated_database() as url:
        hub_variables = hub_environment(
            url, tmp / "hub", FLEETMARK_ADMIN_TOKEN_FILE=str(admin), **at_the_story_pace
        )
        hub_variables["FLEETMARK_MODE"] = "production"
        with served_hub(hub_variables, tmp / "hub.log") as hub:
            command = _command(hub, admin, free_port())
            log = tmp / "demo.log"
            with log.open("wb") as sink:
                demo = subprocess.Popen(
                    [FLEETMARK, *command, "--fast", "--data-dir", str(tmp / "demo")],
                    env=environment(),
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                )
            try:
                started = time.monotonic()
                while TOLD not in log.read_text():
                    assert demo.poll() is None, f"the demo exited:\n{log.read_text()}"
                    assert time.monotonic() - started < STORY_TIMEOUT, log.read_text()
                    time.sleep(0.5)
                # The jobs' next rounds: the DORA job's judgement of the last step among them.
                time.sleep(3 * FAST.jobs)
                # The rollup job's round, which comes every 10 minutes (the fleet's health is
                # sampled there), run as it runs.
                asyncio.run(_roll_up(url))
                yield Told(url, hub, admin.read_text().strip(), log.read_text())
            finally:
                demo.send_signal(signal.SIGINT)
                assert demo.wait(timeout=STOP_TIMEOUT) == 0, log.read_text()


@pytest.fixture
async def demo_readonly(told: Told) -> AsyncIterator[ReadOnly]:
    """Grafana's read-only role on the store the demo told its story to (rolled back after)."""
    engine = create_async_engine(told.database)
    try:
        async with engine.connect() as connection:
            transaction = await connection.begin()
            session = AsyncSession(bind=connection, join_transaction_mode="create_savepoint")
            role = f"grafana_demo_{uuid.uuid4().hex[:12]}"
            await session.execute(text(f'CREATE ROLE "{role}" NOLOGIN'))
            await store.grant_readonly(session, role)
            backend = await store.backend(session)
            try:
                yield ReadOnly(session, role, backend.timescaledb is not None)
            finally:
                await session.close()
                await transaction.rollback()
    finally:
        await engine.dispose()


def test_the_profile_tells_the_story_to_compose_hub_without_local_repositories(
    told: Told,
) -> None:
    repositories = httpx.get(
        f"{told.hub.url}/api/v1/repositories", headers=bearer(told.admin), timeout=10
    ).json()

    for step in range(1, 7):
        assert f"step {step} of 6:" in told.output
    # Served by the demo over HTTP: the hub, in production mode, reads no local repository.
    assert {
        (found["role"], re.sub(r":\d+/", ":PORT/", found["url"])) for found in repositories
    } == {
        ("platform", "https://127.0.0.1:PORT/platform-gitops"),
        ("app", "https://127.0.0.1:PORT/app-gitops"),
    }
    assert all(found["fetch_error"] is None for found in repositories), repositories


@pytest.mark.parametrize("query", QUERIES, ids=[query.key for query in QUERIES])
async def test_every_panel_shows_rows(
    told: Told, demo_readonly: ReadOnly, query: PanelQuery
) -> None:
    now = datetime.now(UTC)
    variables = await demo_readonly.variables(query.dashboard)
    rows = await demo_readonly.panel(
        query, variables, now - timedelta(days=1), now + timedelta(minutes=5)
    )

    # Something to draw: a stat's counts over no rows would be a row of zeros and nulls.
    shown = [value for row in rows for name, value in row.items() if name != "time"]
    assert any(value not in (None, 0, "") for value in shown), (query.key, rows)


async def test_every_alert_rule_runs(told: Told, demo_readonly: ReadOnly) -> None:
    for rule in alerts.RULES:
        await demo_readonly.rows(rule.sql)
