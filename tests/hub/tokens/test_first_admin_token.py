"""The first admin token: a hub installed by Helm or compose is administered through the API."""

import secrets
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hub import migrate
from tests.conftest import DatabaseServer
from tests.served import FLEETMARK, free_port, hub_environment, served_hub
from tests.support import bearer


@pytest.fixture
def hub_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


def token_file(path: Path) -> Path:
    path.write_text("fma_" + secrets.token_urlsafe(32) + "\n")
    return path


def serve(environment: dict[str, str], port: int | None = None) -> subprocess.CompletedProcess[str]:
    """`fleetmark serve` that is to stop before it serves: it has a reason to (the port asks
    nothing of the test)."""
    return subprocess.run(
        [FLEETMARK, "serve", "--no-migrate", "--port", str(port or free_port())],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def tokens(url: str, token: str) -> httpx.Response:
    return httpx.get(f"{url}/api/v1/tokens", headers=bearer(token), timeout=10.0)


def test_the_hub_creates_the_admin_token_from_the_file_once(
    hub_database: str, tmp_path: Path
) -> None:
    secret = token_file(tmp_path / "admin-token")
    environment = hub_environment(hub_database, tmp_path, FLEETMARK_ADMIN_TOKEN_FILE=str(secret))
    token = secret.read_text().strip()

    with served_hub(environment, tmp_path / "first.log") as hub:
        first = tokens(hub.url, token)
        created = httpx.post(
            f"{hub.url}/api/v1/tokens",
            json={"name": "ci", "scope": "read"},
            headers=bearer(token),
            timeout=10.0,
        )
    with served_hub(environment, tmp_path / "second.log") as hub:
        second = tokens(hub.url, token)

    assert first.status_code == 200, first.text
    assert [(t["name"], t["scope"]) for t in first.json()] == [("admin", "admin")]
    assert created.status_code == 201, created.text
    assert f"created from {secret}" in (tmp_path / "first.log").read_text()
    assert [(t["name"], t["scope"]) for t in second.json()] == [
        ("admin", "admin"),
        ("ci", "read"),
    ]
    assert "admin token" not in (tmp_path / "second.log").read_text()


def test_without_a_file_the_token_is_kept_in_the_data_folder(
    hub_database: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    kept = data / "admin.token"
    environment = hub_environment(hub_database, data) | {"FLEETMARK_MODE": "production"}

    with served_hub(environment, tmp_path / "first.log") as hub:
        token = kept.read_text().strip()
        answer = tokens(hub.url, token)
    mode = stat.S_IMODE(kept.stat().st_mode)
    with served_hub(environment, tmp_path / "second.log") as hub:
        again = tokens(hub.url, token)
    first_log = " ".join((tmp_path / "first.log").read_text().split())

    assert token.startswith("fma_")
    assert answer.status_code == 200, answer.text
    assert [t["name"] for t in answer.json()] == ["admin"]
    assert mode == 0o600
    assert f"created admin token admin, kept in {kept} (readable by its owner only)" in first_log
    assert token not in first_log
    assert [t["name"] for t in again.json()] == ["admin"]
    assert kept.read_text().strip() == token
    second_log = " ".join((tmp_path / "second.log").read_text().split())
    assert f"The first admin token this hub made is kept in {kept}" in second_log
    assert token not in second_log


def test_in_development_the_kept_token_is_printed_too(hub_database: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    environment = hub_environment(hub_database, data)

    with served_hub(environment, tmp_path / "first.log") as hub:
        printed = hub.output().split("shown only this once:\n", 1)[1].split("\n", 1)[0]
        answer = tokens(hub.url, printed)

    assert answer.status_code == 200, answer.text
    assert (data / "admin.token").read_text().strip() == printed


def test_no_token_is_made_when_it_cannot_be_kept(hub_database: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "admin.token").mkdir(parents=True)
    environment = hub_environment(hub_database, data)

    refused = serve(environment)
    (data / "admin.token").rmdir()
    with served_hub(environment, tmp_path / "hub.log") as hub:
        answer = tokens(hub.url, (data / "admin.token").read_text().strip())

    assert refused.returncode == 2
    assert f"cannot keep the first admin token in {data / 'admin.token'}" in " ".join(
        refused.stderr.split()
    )
    # The refused start left no admin token behind: the next start made the one it kept.
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("not-a-token\n", "does not hold a fleetmark API token"),
        ("fma_short", "does not hold a fleetmark API token"),
        ("fmc_" + "a" * 43, "does not hold a fleetmark API token"),
        ("fma_" + "a" * 43 + "\nfma_" + "b" * 43, "holds 2 lines"),
        ("", "is empty"),
        (None, "cannot be read"),
    ],
)
def test_a_bad_token_file_stops_the_start_naming_it(
    hub_database: str, tmp_path: Path, content: str | None, problem: str
) -> None:
    secret = tmp_path / "admin-token"
    if content is not None:
        secret.write_text(content)
    environment = hub_environment(hub_database, tmp_path, FLEETMARK_ADMIN_TOKEN_FILE=str(secret))

    result = serve(environment)

    assert result.returncode == 2
    assert f"FLEETMARK_ADMIN_TOKEN_FILE {secret}: {problem}" in " ".join(result.stderr.split())
    assert "a" * 43 not in result.stderr


def test_a_busy_port_is_refused_before_anything_starts(
    database_server: DatabaseServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    database = database_server.create_database()
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = serve(hub_environment(database, data), port)
        schema = migrate.current_revision(database)
    finally:
        database_server.discard(database)

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --port {port}: cannot listen on 127.0.0.1:{port} (Address already in use)"
    ]
    assert result.stdout == ""
    # Neither the database nor the first admin token was touched.
    assert schema is None
    assert not (data / "admin.token").exists()
