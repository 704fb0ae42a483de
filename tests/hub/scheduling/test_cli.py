"""`fleetmark schedule` end to end: real repositories, a database of its own (the CLI commits
its work), the API reading what it stored."""

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from hub.app import create_app
from hub.cli import app as cli
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.hub.scheduling.fleet import ControlPlane, Platform
from tests.scheduler_core import scenario
from tests.support import bearer


@pytest.fixture
def cli_database(
    database_server: DatabaseServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    with database_server.migrated_database() as url:
        monkeypatch.setenv("FLEETMARK_MODE", "development")
        monkeypatch.setenv("FLEETMARK_TOKEN_SECRET", TOKEN_SECRET)
        monkeypatch.setenv("FLEETMARK_DATA_DIR", str(tmp_path / "data"))
        monkeypatch.setenv("FLEETMARK_DATABASE_URL", url)
        # Wide enough for the temporary paths in messages to stay whole.
        monkeypatch.setenv("COLUMNS", "1000")
        yield url


def fleetmark(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    # Rich wraps lines at the terminal width; compare words, not line breaks.
    output = result.output if "json" in args else " ".join(result.output.split())
    return result.exit_code, output


def schedule(control_plane: ControlPlane, platform: Platform, *args: str) -> tuple[int, str]:
    return fleetmark(
        "schedule",
        "--control-plane",
        str(control_plane.path),
        "--gitops",
        str(platform.path),
        *args,
    )


async def served_assignments(database: str) -> list[tuple[str, str, str]]:
    """The assignments the hub serves from what the CLI stored, read with a token it made."""
    code, output = await asyncio.to_thread(fleetmark, "tokens", "create", "reader")
    token = re.search(r"fma_[\w-]{43}", output)
    assert code == 0, output
    assert token is not None, output
    app = create_app(hub_settings(), database)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hub") as client,
    ):
        response = await client.get("/api/v1/assignments", headers=bearer(token[0]))
    return [
        (item["cluster_type"], item["status"], item["commit_sha"])
        for item in response.json()["items"]
    ]


async def test_schedule_commits_then_finds_nothing_to_do(
    cli_database: str,
    control_plane: ControlPlane,
    platform: Platform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Run from inside the control plane's clone, as its owner would.
    monkeypatch.chdir(control_plane.path)
    arguments = ("schedule", "--control-plane", ".", "--gitops", str(platform.path), "-e", "dev")
    code, output = await asyncio.to_thread(fleetmark, *arguments)
    again_code, again = await asyncio.to_thread(fleetmark, *arguments)

    head = platform.head("dev")
    assert head is not None
    assert code == 0, output
    assert f"committed {head[:12]} to dev" in output
    assert f"promotes control-plane commit {control_plane.main}" in output
    assert "drone hello-world-app-functional-test added rendered" in output
    assert "2 assignments, 0 failed; 11 files written, 0 deleted (full render)" in output
    assert again_code == 0, again
    assert "nothing changed, nothing committed" in again
    assert platform.commits("dev") == [head]
    assert await served_assignments(cli_database) == [
        ("drone", "rendered", head),
        ("large", "rendered", head),
    ]


@pytest.mark.usefixtures("cli_database")
def test_json_output_and_the_exit_status_of_failed_assignments(
    control_plane: ControlPlane, platform: Platform
) -> None:
    broken = scenario.ARGOCD_TEMPLATE.replace("{{ .Namespace }}", "{{ .Namespace ")
    control_plane.promote("dev", control_plane.commit("main", {"templates/argocd.yaml": broken}))

    code, output = schedule(control_plane, platform, "-e", "dev", "--output", "json")

    assert code == 1, output
    [outcome] = json.loads(output)["environments"]
    assert outcome["commit"] == platform.head("dev")
    assert outcome["failed"] == 1
    assert [(e["kind"], e["cluster_type"]) for e in outcome["errors"]] == [("template", "large")]


@pytest.mark.usefixtures("cli_database")
def test_what_cannot_be_written_at_all_exits_with_2(
    control_plane: ControlPlane, platform: Platform, tmp_path: Path
) -> None:
    unknown = schedule(control_plane, platform, "-e", "prod")
    plain = tmp_path / "not-a-repository"
    plain.mkdir()
    not_git = fleetmark(
        "schedule", "--control-plane", str(plain), "-e", "dev", "--gitops", str(platform.path)
    )

    assert unknown[0] == 2
    assert unknown[1].endswith(
        ": nothing written: environment 'prod' was not loaded from the control plane "
        "(loaded: dev, stage)"
    )
    assert not_git[0] == 2
    assert f"could not read {plain}#main" in not_git[1]
    assert f"fatal: '{plain}' does not appear to be a git repository" in not_git[1]
    assert platform.branches() == {}


@pytest.mark.usefixtures("cli_database")
@pytest.mark.parametrize("userinfo", ["bot:s3cret", "s3cret"])
def test_a_repository_url_carrying_credentials_is_refused(
    platform: Platform, userinfo: str
) -> None:
    code, output = fleetmark(
        "schedule",
        "--control-plane",
        f"https://{userinfo}@git.example.com/platform/control-plane.git",
        "-e",
        "dev",
        "--gitops",
        str(platform.path),
    )

    assert code == 2
    assert "must not carry credentials" in output
    assert "s3cret" not in output
