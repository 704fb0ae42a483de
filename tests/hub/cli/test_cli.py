"""The `fleetmark` command line against a database of its own (the CLI commits its work)."""

import asyncio
import csv
import io
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from sqlalchemy import create_engine, inspect, pool
from typer.testing import CliRunner

from hub import migrate
from hub.app import create_app
from hub.cli import app as cli
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.support import START, bearer, kustomization, report


@pytest.fixture(scope="module")
def cli_database_url(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@pytest.fixture
def use_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[str], None]:
    """Point the CLI's settings (FLEETMARK_* variables) at the given database."""
    monkeypatch.setenv("FLEETMARK_MODE", "development")
    monkeypatch.setenv("FLEETMARK_TOKEN_SECRET", TOKEN_SECRET)
    # Never fall back to an embedded database in the user's data directory.
    monkeypatch.setenv("FLEETMARK_DATA_DIR", str(tmp_path))
    return lambda url: monkeypatch.setenv("FLEETMARK_DATABASE_URL", url)


@pytest.fixture
def cli_database(use_database: Callable[[str], None], cli_database_url: str) -> str:
    use_database(cli_database_url)
    return cli_database_url


@pytest.fixture
def unique() -> str:
    """A suffix keeping names apart, since CLI tests share a committed database."""
    return uuid.uuid4().hex[:8]


def words(text: str) -> str:
    return " ".join(text.split())


def fleetmark(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
async def hub_client(cli_database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The hub as deployed: its own sessions on the CLI's database, no overrides."""
    app = create_app(hub_settings(), cli_database_url)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hub") as client,
    ):
        yield client


@pytest.mark.usefixtures("cli_database")
async def test_registered_token_authenticates_a_report(
    hub_client: httpx.AsyncClient, unique: str
) -> None:
    name = f"drone-{unique}"
    result = await asyncio.to_thread(
        fleetmark, "clusters", "register", name, "-e", "dev", "-t", "drone"
    )
    assert result.exit_code == 0, result.output
    assert f"Registered cluster {name}" in result.stdout
    token = re.search(r"fmc_[\w-]{43}", result.stdout)
    assert token is not None, result.stdout

    body = report(name, sequence=1, observed_at=START, objects=[kustomization("app")])
    response = await hub_client.post("/api/v1/reports", json=body, headers=bearer(token[0]))
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 1

    listed = await asyncio.to_thread(fleetmark, "clusters", "list", "-e", "dev", "-o", "json")
    (item,) = [item for item in json.loads(listed.stdout)["items"] if item["name"] == name]
    assert (item["cluster_type"], item["objects"], item["ready"]) == ("drone", 1, 1)
    assert item["last_seen_at"] is not None


@pytest.mark.usefixtures("cli_database")
def test_clusters_list_as_json(unique: str) -> None:
    environment = f"env-{unique}"
    for name in (f"b-{unique}", f"a-{unique}"):
        registered = fleetmark("clusters", "register", name, "--environment", environment)
        assert registered.exit_code == 0, registered.output
    fleetmark("clusters", "register", f"elsewhere-{unique}", "--environment", "stage")

    result = fleetmark("clusters", "list", "--environment", environment, "--output", "json")

    assert result.exit_code == 0, result.output
    page = json.loads(result.stdout)
    assert page["total"] == 2
    assert [item["name"] for item in page["items"]] == [f"a-{unique}", f"b-{unique}"]
    assert all(item["environment"] == environment for item in page["items"])
    assert all(item["stale"] and item["token_active"] for item in page["items"])
    assert all(item["last_seen_at"] is None for item in page["items"])


@pytest.mark.usefixtures("cli_database")
def test_clusters_list_as_table(unique: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # a wide terminal, so no cell is wrapped
    fleetmark("clusters", "register", f"table-{unique}", "--environment", f"env-{unique}")

    result = fleetmark("clusters", "list", "--environment", f"env-{unique}")

    assert result.exit_code == 0, result.output
    assert f"table-{unique}" in result.stdout
    assert "never" in result.stdout
    assert "1 of 1 clusters" in result.stdout


@pytest.mark.usefixtures("cli_database")
def test_decommissioning_hides_a_cluster_and_keeps_its_time(
    unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    environment = f"env-{unique}"
    for name in (f"kept-{unique}", f"gone-{unique}"):
        fleetmark("clusters", "register", name, "--environment", environment)

    gone = fleetmark("clusters", "decommission", f"gone-{unique}")
    again = fleetmark("clusters", "decommission", f"gone-{unique}", "--output", "json")
    unknown = fleetmark("clusters", "decommission", f"never-{unique}")
    listed = fleetmark("clusters", "list", "--environment", environment, "--output", "json")
    everything = fleetmark("clusters", "list", "--environment", environment, "--decommissioned")

    assert gone.exit_code == 0, gone.output
    left = re.search(r"decommissioned at (\S+);", gone.stdout)
    assert left is not None, gone.stdout
    assert "its token no longer works, its history stays" in " ".join(gone.stdout.split())
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["decommissioned_at"].startswith(left[1][:19])
    assert unknown.exit_code == 2
    assert f"error: cluster 'never-{unique}' is unknown" in unknown.stderr
    assert [item["name"] for item in json.loads(listed.stdout)["items"]] == [f"kept-{unique}"]
    assert f"gone-{unique}" in everything.stdout
    assert "decommissioned 20" in everything.stdout
    assert "2 of 2 clusters" in everything.stdout


@pytest.mark.usefixtures("cli_database")
def test_placing_a_cluster_that_was_unplaced(unique: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    name, environment = f"place-{unique}", f"env-{unique}"
    fleetmark("clusters", "register", name)

    before = fleetmark("clusters", "list")
    placed = fleetmark("clusters", "place", name, "-e", environment, "-t", "drone")
    again = fleetmark("clusters", "place", name, "-e", environment, "-o", "json")
    bad = fleetmark("clusters", "place", name, "-e", "<x>")
    unknown = fleetmark("clusters", "place", f"never-{unique}", "-e", environment)
    listed = fleetmark("clusters", "list", "--environment", environment, "--output", "json")

    [row] = [line for line in before.stdout.splitlines() if name in line]
    assert "unplaced" in row
    assert placed.exit_code == 0, placed.output
    assert f"Cluster {name} placed in {environment}/drone." in words(placed.stdout)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["cluster_type"] is None
    assert bad.exit_code == 2
    assert "--environment" in bad.stderr
    assert unknown.exit_code == 2
    assert f"error: cluster 'never-{unique}' is unknown" in unknown.stderr
    [item] = json.loads(listed.stdout)["items"]
    assert (item["name"], item["environment"]) == (name, environment)


@pytest.mark.usefixtures("cli_database")
def test_registering_a_name_twice_fails_clearly(unique: str) -> None:
    first = fleetmark("clusters", "register", f"twice-{unique}")

    second = fleetmark("clusters", "register", f"twice-{unique}", "--environment", "dev")

    assert first.exit_code == 0
    assert second.exit_code == 2
    assert f"error: cluster 'twice-{unique}' is already registered" in second.stderr
    assert "rotate its token" in second.stderr
    assert "fmc_" not in second.stdout


@pytest.mark.usefixtures("cli_database")
def test_register_refuses_bad_labels(unique: str) -> None:
    result = fleetmark("clusters", "register", f"labels-{unique}", "--label", "no-equals-sign")

    assert result.exit_code == 2
    assert "--label 'no-equals-sign': expected KEY=VALUE" in result.stderr


@pytest.mark.usefixtures("cli_database")
async def test_tokens_create_admin(hub_client: httpx.AsyncClient, unique: str) -> None:
    name = f"ops-{unique}"
    result = await asyncio.to_thread(fleetmark, "tokens", "create", name, "--scope", "admin")

    assert result.exit_code == 0, result.output
    assert f"Created admin token {name}" in result.stdout
    token = re.search(r"fma_[\w-]{43}", result.stdout)
    assert token is not None, result.stdout
    response = await hub_client.get("/api/v1/tokens", headers=bearer(token[0]))
    assert response.status_code == 200
    assert {"name": name, "scope": "admin"}.items() <= next(
        item for item in response.json() if item["name"] == name
    ).items()

    listed = await asyncio.to_thread(fleetmark, "tokens", "list", "--output", "json")
    assert {"name": name, "scope": "admin", "revoked_at": None}.items() <= next(
        item for item in json.loads(listed.stdout) if item["name"] == name
    ).items()


@pytest.mark.usefixtures("cli_database")
async def test_a_metrics_token_reads_metrics_and_nothing_else(
    cli_database_url: str, unique: str
) -> None:
    name = f"prometheus-{unique}"
    result = await asyncio.to_thread(fleetmark, "tokens", "create", name, "--scope", "metrics")
    token = re.search(r"fma_[\w-]{43}", result.stdout)
    assert token is not None, result.output
    app = create_app(hub_settings(mode="production"), cli_database_url)

    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hub") as client,
    ):
        metrics = await client.get("/metrics", headers=bearer(token[0]))
        fleet = await client.get("/api/v1/fleet", headers=bearer(token[0]))

    assert f"Created metrics token {name}" in result.stdout
    assert (metrics.status_code, fleet.status_code) == (200, 403)


@pytest.mark.usefixtures("cli_database")
async def test_cluster_token_revoke_and_rotate(hub_client: httpx.AsyncClient, unique: str) -> None:
    name = f"rotate-{unique}"
    await asyncio.to_thread(fleetmark, "clusters", "register", name)

    revoked = await asyncio.to_thread(fleetmark, "clusters", "revoke", name)
    rotated = await asyncio.to_thread(fleetmark, "clusters", "rotate", name)

    assert revoked.exit_code == 0
    assert f"Revoked the token of cluster {name}" in revoked.stdout
    assert rotated.exit_code == 0
    token = re.search(r"fmc_[\w-]{43}", rotated.stdout)
    assert token is not None
    body = report(name, sequence=1, observed_at=START)
    response = await hub_client.post("/api/v1/reports", json=body, headers=bearer(token[0]))
    assert response.status_code == 200


@pytest.mark.usefixtures("cli_database")
def test_unknown_cluster_fails_clearly() -> None:
    result = fleetmark("clusters", "rotate", "no-such-cluster")

    assert result.exit_code == 2
    assert "error: cluster 'no-such-cluster' is unknown" in result.stderr


def _tables(url: str) -> set[str]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


def test_migrate_prints_the_revision(
    use_database: Callable[[str], None], fresh_database: Callable[[], str]
) -> None:
    url = fresh_database()
    use_database(url)

    before = fleetmark("clusters", "list")
    up = fleetmark("migrate")
    down = fleetmark("migrate", "base", "--down")

    assert before.exit_code == 2
    assert "run `fleetmark migrate` first" in before.stderr
    assert up.exit_code == 0, up.output
    assert up.stdout.strip() == f"schema at revision {migrate.head_revision()}"
    assert down.exit_code == 0, down.output
    assert down.stdout.strip() == "schema at revision base"
    assert "cluster" not in _tables(url)


@pytest.mark.parametrize("args", [["version"], ["--version"], ["--version", "clusters", "list"]])
def test_version(args: list[str]) -> None:
    result = fleetmark(*args)

    assert result.exit_code == 0
    assert result.stdout.strip() == "fleetmark 0.1.0"


@pytest.mark.usefixtures("cli_database")
def test_register_names_the_option_and_the_rule_it_broke(unique: str) -> None:
    result = fleetmark("clusters", "register", f"Drone_{unique}", "--environment", "e" * 64)

    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert message.startswith("error: NAME: must match pattern")
    assert "; --environment: must be at most 63 characters" in message
    assert "pydantic" not in message
    assert "validation error" not in message


@pytest.mark.usefixtures("cli_database")
def test_clusters_and_tokens_list_as_csv(unique: str) -> None:
    name = "csv-" + unique + "-" + "x" * 50
    fleetmark("clusters", "register", name, "--environment", f"env-{unique}", "--label", "a=b")
    fleetmark("tokens", "create", f"csv-{unique}")

    clusters = fleetmark("clusters", "list", "--environment", f"env-{unique}", "-o", "csv")
    tokens = fleetmark("tokens", "list", "--output", "csv")

    assert clusters.exit_code == 0, clusters.output
    [row] = list(csv.DictReader(io.StringIO(clusters.stdout)))
    assert row == {
        "cluster": name,
        "environment": f"env-{unique}",
        "cluster type": "",
        "last seen": "never",
        "objects": "0",
        "ready": "0",
        "failing": "0",
        "token": "active",
    }
    assert tokens.exit_code == 0, tokens.output
    listed = {row["name"]: row for row in csv.DictReader(io.StringIO(tokens.stdout))}
    assert listed[f"csv-{unique}"]["scope"] == "read"
    assert listed[f"csv-{unique}"]["revoked"] == ""
