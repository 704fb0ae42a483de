"""`fleetmark harvest` against a database of its own (the CLI commits its work)."""

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hub.cli import app as cli
from tests.conftest import TOKEN_SECRET, DatabaseServer
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import MakeRepo
from tests.hub.harvest.gitrepo import WorkRepo


@pytest.fixture
def app_repo(
    database_server: DatabaseServer,
    make_repo: MakeRepo,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[WorkRepo]:
    repo = make_repo("app-gitops")
    for index in range(3):
        repo.commit(
            f"release {index}", {"uat-test/deployment.yaml": scenario.deployment(f"1.{index}.0")}
        )
    file = tmp_path / "repositories.yaml"
    file.write_text(f"repositories:\n- url: {repo.url}\n  role: app\n  branches: [dev]\n")
    with database_server.migrated_database() as url:
        monkeypatch.setenv("FLEETMARK_MODE", "development")
        monkeypatch.setenv("FLEETMARK_TOKEN_SECRET", TOKEN_SECRET)
        monkeypatch.setenv("FLEETMARK_DATA_DIR", str(tmp_path / "data"))
        monkeypatch.setenv("FLEETMARK_DATABASE_URL", url)
        monkeypatch.setenv("FLEETMARK_REPOSITORIES_FILE", str(file))
        yield repo


def fleetmark(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    # Rich wraps long lines at the terminal width; compare words, not line breaks.
    return result.exit_code, " ".join(
        result.output.split()
    ) if "json" not in args else result.output


@pytest.mark.usefixtures("app_repo")
def test_harvest_reports_new_commits_then_nothing_new() -> None:
    first = fleetmark("harvest", "--output", "json")
    second = fleetmark("harvest", "--output", "json")

    assert first[0] == 0, first[1]
    [outcome] = json.loads(first[1])["repositories"]
    assert [(b["name"], b["new_commits"]) for b in outcome["branches"]] == [("dev", 3)]
    [again] = json.loads(second[1])["repositories"]
    assert [b["new_commits"] for b in again["branches"]] == [0]


def test_backfill_of_one_repository_reads_it_again(app_repo: WorkRepo) -> None:
    fleetmark("harvest")

    code, output = fleetmark("harvest", "--repo", app_repo.url + ".git", "--backfill")

    assert code == 0, output
    assert "app-gitops" in output
    assert "(rewritten)" in output
    assert "1 repositories" in output


@pytest.mark.usefixtures("app_repo")
def test_unknown_repository_is_a_clean_error() -> None:
    code, output = fleetmark("harvest", "--repo", "https://github.com/contoso/nothing")

    assert code == 2
    assert "repository https://github.com/contoso/nothing is unknown (known: " in output


def test_harvest_as_csv(app_repo: WorkRepo) -> None:
    result = CliRunner().invoke(cli, ["harvest", "--output", "csv"])

    assert result.exit_code == 0, result.output
    [row] = list(csv.DictReader(io.StringIO(result.stdout)))
    assert row == {
        "repository": app_repo.url,
        "role": "app",
        "branch": "dev",
        "new commits": "3",
        "head": app_repo.head("dev"),
        "errors": "0",
    }
