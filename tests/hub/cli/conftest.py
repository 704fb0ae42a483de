"""The CLI against a hub served on a real port (uvicorn in a thread, one per module): the
module's hub with an admin token made on the hub's host, and the commands run in-process."""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from hub.app import utc_now
from hub.cli import app as cli
from tests.agent.conftest import LiveHub
from tests.conftest import TOKEN_SECRET, DatabaseServer


@dataclass(frozen=True)
class Hub:
    url: str
    database_url: str
    # An admin token made the way the operator makes the first one on the hub's host
    # (`--database-url`).
    admin_token: str


class Served:
    """The module's hub, and the test's admin token in a file of its own."""

    def __init__(self, hub: Hub, tmp_path: Path) -> None:
        self.hub = hub
        self.database_url = hub.database_url
        self.tmp_path = tmp_path
        self.admin_file = self.write_token("admin-token", hub.admin_token)

    def write_token(self, name: str, token: str, mode: int = 0o600) -> Path:
        path = self.tmp_path / name
        path.write_text(f"{token}\n")
        path.chmod(mode)
        return path

    def admin(self, *args: str) -> Result:
        """`fleetmark ARGS` against the hub with the admin token's file."""
        return fleetmark(*args, "--hub", self.hub.url, "--token-file", str(self.admin_file))


def fleetmark(*args: str) -> Result:
    # Wide enough that no row wraps; the environment names neither hub nor database.
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "250"})


def token_in(result: Result, prefix: str = "fma_") -> str:
    found = re.search(rf"{prefix}[\w-]{{43}}", result.stdout)
    assert found is not None, result.output
    return found[0]


def words(text: str) -> str:
    return " ".join(text.split())


@contextmanager
def serving(
    database_server: DatabaseServer, tmp_path_factory: pytest.TempPathFactory, **settings: Any
) -> Iterator[Hub]:
    """A hub on a database of its own, with `settings` beside the test ones, and its first
    admin token; the CLI's environment names neither hub nor database."""
    with pytest.MonkeyPatch.context() as environment:
        for variable in ("FLEETMARK_HUB_URL", "FLEETMARK_TOKEN", "FLEETMARK_DATABASE_URL"):
            environment.delenv(variable, raising=False)
        environment.setenv("FLEETMARK_MODE", "development")
        environment.setenv("FLEETMARK_TOKEN_SECRET", TOKEN_SECRET)
        environment.setenv("FLEETMARK_DATA_DIR", str(tmp_path_factory.mktemp("cli-data")))
        with database_server.migrated_database() as url:
            made = fleetmark("tokens", "create", "root", "--scope", "admin", "--database-url", url)
            assert made.exit_code == 0, made.output
            live = LiveHub(
                url,
                utc_now,
                harvest_enabled=False,
                data_dir=tmp_path_factory.mktemp("data"),
                **settings,
            )
            live.start()
            try:
                yield Hub(live.url, url, token_in(made))
            finally:
                live.stop()


@pytest.fixture
def served(hub: Hub, tmp_path: Path) -> Served:
    """The `hub` of the test's module (each module serves its own), with the admin token."""
    return Served(hub, tmp_path)
