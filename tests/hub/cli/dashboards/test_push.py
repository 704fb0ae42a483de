"""`fleetmark dashboards push` against Grafana's HTTP API on a real port (fake_grafana.py): what
lands in Grafana, pushing again, and what the command says when Grafana refuses."""

import json
import socket
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from hub.cli import app as cli
from hub.cli import dashboards
from hub.cli.dashboards import DATASOURCE_TYPE
from tests.agent.conftest import free_port
from tests.hub.cli.dashboards.fake_grafana import (
    ADMIN_TOKEN,
    EDITOR_TOKEN,
    VIEWER_TOKEN,
    FakeGrafana,
    serve,
)
from tests.hub.conftest import words
from tests.support import serving_in_thread

PASSWORD = "s3cret-Reader-pw"
ENVIRONMENT = (
    "FLEETMARK_GRAFANA_URL",
    "FLEETMARK_GRAFANA_TOKEN",
    "FLEETMARK_GRAFANA_TOKEN_FILE",
    "FLEETMARK_GRAFANA_DB_PASSWORD_FILE",
    "FLEETMARK_GRAFANA_DB_HOST",
    "FLEETMARK_GRAFANA_DB_NAME",
    "FLEETMARK_GRAFANA_DB_USER",
    "FLEETMARK_GRAFANA_DB_PASSWORD",
    "FLEETMARK_GRAFANA_DB_SSLMODE",
    "FLEETMARK_GRAFANA_TIMESCALEDB",
)


def dashboard(uid: str, title: str) -> dict[str, Any]:
    """A dashboard as the builders generate them: a panel reading the fleetmark data source."""
    return {
        "uid": uid,
        "title": title,
        "id": None,
        "version": 0,
        "schemaVersion": 39,
        "templating": {"list": []},
        "panels": [
            {
                "id": 1,
                "type": "table",
                "title": "Clusters",
                "datasource": {"type": DATASOURCE_TYPE, "uid": "fleetmark"},
                "targets": [
                    {
                        "refId": "A",
                        "datasource": {"type": DATASOURCE_TYPE, "uid": "fleetmark"},
                        "rawSql": "SELECT environment, clusters FROM grafana.fleet_clusters",
                        "format": "table",
                    }
                ],
            }
        ],
    }


@pytest.fixture
def built(tmp_path: Path) -> Path:
    directory = tmp_path / "json"
    directory.mkdir()
    for uid, title in (("fleetmark-fleet", "Fleet overview"), ("fleetmark-drift", "Drift")):
        (directory / f"{uid}.json").write_text(json.dumps(dashboard(uid, title)))
    return directory


@pytest.fixture
def grafana() -> FakeGrafana:
    return FakeGrafana()


@pytest.fixture
def url(grafana: FakeGrafana) -> Iterator[str]:
    with serve(grafana) as base:
        yield base


def secret_file(path: Path, secret: str) -> Path:
    path.write_text(f"{secret}\n")
    path.chmod(0o600)
    return path


def connection(source: Path) -> list[str]:
    """The options that say how Grafana reaches the database, the password in a file beside
    `source`."""
    password = secret_file(source.parent / "db-password", PASSWORD)
    return [
        "--db-host", "db.internal:5432",
        "--db-name", "fleetmark",
        "--db-user", "fleetmark_grafana",
        "--db-password-file", str(password),
    ]  # fmt: skip


def push(url: str, source: Path, *args: str, token: str | None = ADMIN_TOKEN, **env: str) -> Result:
    """`fleetmark dashboards push` of `source`, the token (if any) in a file beside it."""
    environment: dict[str, str | None] = dict.fromkeys(ENVIRONMENT)
    environment |= env
    given = []
    if token is not None:
        given = ["--token-file", str(secret_file(source.parent / "grafana-token", token))]
    return CliRunner().invoke(
        cli,
        ["dashboards", "push", "--grafana-url", url, *given, "--from", str(source), *args],
        env=environment,
    )


def unwrapped(text: str) -> str:
    """Without any white space: rich breaks a long path where the line ends, even inside it."""
    return "".join(text.split())


def folder_titled(grafana: FakeGrafana, title: str) -> dict[str, Any]:
    (folder,) = (f for f in grafana.folders.values() if f["title"] == title)
    return folder


# --- what lands in Grafana ----------------------------------------------------------------------


def test_first_push_creates_the_folder_the_data_source_and_the_dashboards(
    grafana: FakeGrafana, url: str, built: Path
) -> None:
    result = push(url, built, *connection(built))

    assert result.exit_code == 0, result.output
    folder = folder_titled(grafana, "fleetmark")
    assert {uid: d["folderUid"] for uid, d in grafana.dashboards.items()} == {
        "fleetmark-fleet": folder["uid"],
        "fleetmark-drift": folder["uid"],
    }
    stored = grafana.dashboards["fleetmark-fleet"]
    assert stored["version"] == 1
    assert stored["dashboard"]["title"] == "Fleet overview"
    assert stored["dashboard"]["panels"] == dashboard("fleetmark-fleet", "Fleet overview")["panels"]
    source = grafana.datasources["fleetmark"]
    assert (source["name"], source["type"], source["access"]) == (
        "fleetmark",
        DATASOURCE_TYPE,
        "proxy",
    )
    assert (source["url"], source["user"]) == ("db.internal:5432", "fleetmark_grafana")
    assert source["jsonData"] == {
        "database": "fleetmark",
        "sslmode": "require",
        "timescaledb": False,
    }
    assert grafana.secrets["fleetmark"] == {"password": PASSWORD}
    said = words(result.stdout)
    assert "Grafana 11.3.0 at" in said
    assert (
        "data source 'fleetmark': created (PostgreSQL db.internal:5432, database fleetmark, "
        "user fleetmark_grafana)" in said
    )
    assert f"folder 'fleetmark': created (uid {folder['uid']})" in said
    assert (
        "dashboard fleetmark-fleet (Fleet overview): version 1, "
        f"{url}/d/fleetmark-fleet/fleet-overview" in said
    )
    assert "pushed 2 dashboards into the folder 'fleetmark'" in said
    assert PASSWORD not in result.output


def test_the_connection_comes_from_the_environment_too(
    grafana: FakeGrafana, url: str, built: Path
) -> None:
    result = push(
        url,
        built,
        FLEETMARK_GRAFANA_DB_HOST="timescale:5432",
        FLEETMARK_GRAFANA_DB_NAME="hub",
        FLEETMARK_GRAFANA_DB_USER="reader",
        FLEETMARK_GRAFANA_DB_PASSWORD=PASSWORD,
        FLEETMARK_GRAFANA_DB_SSLMODE="disable",
        FLEETMARK_GRAFANA_TIMESCALEDB="true",
    )

    assert result.exit_code == 0, result.output
    source = grafana.datasources["fleetmark"]
    assert (source["url"], source["user"]) == ("timescale:5432", "reader")
    assert source["jsonData"] == {"database": "hub", "sslmode": "disable", "timescaledb": True}
    assert grafana.secrets["fleetmark"] == {"password": PASSWORD}
    assert PASSWORD not in result.output


def test_a_second_push_changes_nothing_but_the_versions(
    grafana: FakeGrafana, url: str, built: Path
) -> None:
    assert push(url, built, *connection(built)).exit_code == 0
    folders, sources = json.dumps(grafana.folders), json.dumps(grafana.datasources)
    first = {uid: d["dashboard"] for uid, d in grafana.dashboards.items()}

    again = push(url, built, *connection(built))

    assert again.exit_code == 0, again.output
    assert grafana.calls("POST", "/api/folders") == 1
    assert grafana.calls("POST", "/api/datasources") == 1
    assert json.dumps(grafana.folders) == folders
    assert json.dumps(grafana.datasources) == sources
    second = {uid: d["dashboard"] for uid, d in grafana.dashboards.items()}
    assert {uid: d["version"] for uid, d in second.items()} == {
        "fleetmark-fleet": 2,
        "fleetmark-drift": 2,
    }
    assert {uid: {**d, "version": 0} for uid, d in second.items()} == {
        uid: {**d, "version": 0} for uid, d in first.items()
    }
    said = words(again.stdout)
    assert "folder 'fleetmark': exists" in said
    assert "data source 'fleetmark': exists (db.internal:5432), left as it is" in said
    assert "dashboard fleetmark-drift (Drift): version 2" in said


def test_push_overwrites_a_dashboard_edited_in_grafana(
    grafana: FakeGrafana, url: str, built: Path
) -> None:
    assert push(url, built, *connection(built)).exit_code == 0
    edited = grafana.dashboards["fleetmark-drift"]["dashboard"]
    edited["title"], edited["panels"] = "Drift (mine)", []

    result = push(url, built)

    assert result.exit_code == 0, result.output
    restored = grafana.dashboards["fleetmark-drift"]["dashboard"]
    assert restored["title"] == "Drift"
    assert restored["panels"] == dashboard("fleetmark-drift", "Drift")["panels"]
    assert grafana.dashboards["fleetmark-drift"]["message"] == "fleetmark dashboards push"


def test_an_existing_folder_and_data_source_are_used_as_they_are(
    grafana: FakeGrafana, url: str, built: Path
) -> None:
    """A Grafana set up by hand: the team's folder and a data source an administrator made.
    An Editor's token is enough then, and no connection options are needed."""
    grafana.handle("POST", "/api/folders", {}, f"Bearer {ADMIN_TOKEN}", {"title": "Platform"})
    grafana.handle(
        "POST", "/api/folders", {}, f"Bearer {ADMIN_TOKEN}", {"title": "fleetmark views"}
    )
    platform = folder_titled(grafana, "Platform")
    # A folder of the same title inside another one is not the one asked for.
    grafana.handle(
        "POST", "/api/folders", {}, f"Bearer {ADMIN_TOKEN}",
        {"title": "fleetmark", "parentUid": platform["uid"]},
    )  # fmt: skip
    grafana.handle(
        "POST", "/api/datasources", {}, f"Bearer {ADMIN_TOKEN}",
        {"name": "fleetmark", "uid": "fleetmark", "type": "postgres", "url": "pg.corp:6432"},
    )  # fmt: skip
    before = len(grafana.folders)

    into_platform = push(url, built, "--folder", "Platform", token=EDITOR_TOKEN)
    into_fleetmark = push(url, built, token=EDITOR_TOKEN)

    assert into_platform.exit_code == 0, into_platform.output
    assert "folder 'Platform': exists" in into_platform.stdout
    assert "data source 'fleetmark': exists (pg.corp:6432), left as it is" in into_platform.stdout
    assert into_fleetmark.exit_code == 0, into_fleetmark.output
    assert len(grafana.folders) == before + 1
    top = next(
        f for f in grafana.folders.values() if f["title"] == "fleetmark" and "parentUid" not in f
    )
    assert {d["folderUid"] for d in grafana.dashboards.values()} == {top["uid"]}
    assert grafana.datasources["fleetmark"]["url"] == "pg.corp:6432"
    assert grafana.calls("POST", "/api/datasources") == 1


# --- secrets: from files or variables, never shown ----------------------------------------------


def test_the_token_and_the_password_may_come_from_variables(
    grafana: FakeGrafana, url: str, built: Path
) -> None:
    args = connection(built)[:-2]  # without --db-password-file

    result = push(
        url,
        built,
        *args,
        token=None,
        FLEETMARK_GRAFANA_TOKEN=ADMIN_TOKEN,
        FLEETMARK_GRAFANA_DB_PASSWORD=PASSWORD,
    )

    assert result.exit_code == 0, result.output
    assert grafana.secrets["fleetmark"] == {"password": PASSWORD}


def test_no_secret_is_taken_from_the_command_line(url: str, built: Path) -> None:
    token = push(url, built, "--token", ADMIN_TOKEN, token=None)
    password = push(url, built, "--db-password", PASSWORD)
    none = push(url, built, token=None)

    assert token.exit_code == password.exit_code == 2
    assert "No such option: --token" in token.output
    assert "No such option: --db-password" in password.output
    assert none.exit_code == 2
    assert (
        "a Grafana service account token is needed: give the file that holds it with "
        "--token-file (or FLEETMARK_GRAFANA_TOKEN_FILE), or the token in FLEETMARK_GRAFANA_TOKEN"
    ) in words(none.stderr)


def test_a_secret_file_of_more_than_one_line_is_refused_naming_it_never_showing_it(
    grafana: FakeGrafana, url: str, built: Path, tmp_path: Path
) -> None:
    pasted = secret_file(tmp_path / "pasted", f"{ADMIN_TOKEN}\nsecond-secret")
    passwords = secret_file(tmp_path / "passwords", f"{PASSWORD}\n\nold-password")

    token = push(url, built, "--token-file", str(pasted), token=None)
    password = push(url, built, *connection(built)[:-1], str(passwords))

    assert token.exit_code == password.exit_code == 2
    assert (
        f"error: --token-file {pasted}: holds 2 lines; it must hold the secret alone, on one line"
    ) in words(token.stderr)
    assert f"error: --db-password-file {passwords}: holds 2 lines" in words(password.stderr)
    for said in (token.output, password.output):
        for secret in (ADMIN_TOKEN, "second-secret", PASSWORD, "old-password"):
            assert secret not in said
    assert (grafana.folders, grafana.datasources, grafana.dashboards) == ({}, {}, {})


def test_a_grafana_url_with_credentials_is_refused_never_showing_them(
    grafana: FakeGrafana, url: str, built: Path
) -> None:
    host = url.removeprefix("http://")
    with_password = push(f"http://admin:hunter2@{host}", built, *connection(built))
    token_as_user = push(f"http://glsa_user-secret@{host}", built, *connection(built))
    without_scheme = push(f"admin:hunter2@{host}", built, *connection(built))

    for result in (with_password, token_as_user, without_scheme):
        assert result.exit_code == 2
        assert (
            "--grafana-url (FLEETMARK_GRAFANA_URL) holds a user name or password: push signs in "
            "with the service account token alone; give Grafana's URL without them"
        ) in words(result.stderr)
        assert "hunter2" not in result.output
        assert "user-secret" not in result.output
    assert (grafana.folders, grafana.datasources, grafana.dashboards) == ({}, {}, {})


# --- what the command says when it cannot -------------------------------------------------------


def test_without_a_data_source_the_connection_is_asked_for_before_anything_is_written(
    grafana: FakeGrafana, url: str, built: Path
) -> None:
    result = push(url, built, "--db-host", "db:5432", "--db-user", "reader")

    assert result.exit_code == 2
    assert (
        "has no data source 'fleetmark' yet, and to create it push needs --db-name "
        "(FLEETMARK_GRAFANA_DB_NAME), --db-password-file (or FLEETMARK_GRAFANA_DB_PASSWORD)"
    ) in words(result.stderr)
    assert "fleetmark db grant-readonly ROLE" in words(result.stderr)
    assert (grafana.folders, grafana.datasources, grafana.dashboards) == ({}, {}, {})


def test_a_refused_token(grafana: FakeGrafana, url: str, built: Path) -> None:
    result = push(url, built, *connection(built), token="glsa_revoked")

    assert result.exit_code == 2
    assert (
        f"Grafana at {url}/ refused the token when asked to look up the data source 'fleetmark' "
        "(401 Unauthorized): give a valid service account token of this Grafana in --token-file "
        "(or FLEETMARK_GRAFANA_TOKEN)"
    ) in words(result.stderr)
    assert (grafana.folders, grafana.datasources, grafana.dashboards) == ({}, {}, {})


def test_a_token_without_the_rights(grafana: FakeGrafana, url: str, built: Path) -> None:
    editor = push(url, built, *connection(built), token=EDITOR_TOKEN)
    viewer = push(url, built, *connection(built), token=VIEWER_TOKEN)
    assert push(url, built, *connection(built)).exit_code == 0
    read_only = push(url, built, token=VIEWER_TOKEN)

    assert editor.exit_code == viewer.exit_code == read_only.exit_code == 2
    assert (
        f"Grafana at {url}/ does not let the token's service account create the data source "
        "'fleetmark' (403 Forbidden: You'll need additional permissions to perform this action. "
        "Permissions needed: datasources:create): creating a data source takes the Admin role"
    ) in words(editor.stderr)
    assert "create the data source 'fleetmark'" in words(viewer.stderr)
    # Once the data source and folder are there, a Viewer fails at the first dashboard.
    assert (
        "does not let the token's service account store the dashboard 'fleetmark-drift' "
        "(403 Forbidden" in words(read_only.stderr)
    )
    assert "give it the Editor role" in words(read_only.stderr)


def test_a_grafana_too_old(url: str, built: Path, grafana: FakeGrafana) -> None:
    grafana.version = "10.2.2"

    result = push(url, built, *connection(built))

    assert result.exit_code == 2
    assert (
        f"Grafana at {url}/ is version 10.2.2, older than 10.2.3, which fleetmark's dashboards "
        f"need (their data source type {DATASOURCE_TYPE} came with it): upgrade Grafana to "
        "10.2.3 or newer and push again"
    ) in words(result.stderr)
    assert grafana.requests == [("GET", "/api/health")]


def test_a_newer_grafana_and_one_that_hides_its_version_are_fine(
    url: str, built: Path, grafana: FakeGrafana
) -> None:
    grafana.version = "12.3.0-18235911813"
    assert push(url, built, *connection(built)).exit_code == 0
    grafana.version = None  # type: ignore[assignment]
    hidden = push(url, built)
    assert hidden.exit_code == 0, hidden.output
    assert "Grafana (version not shown) at" in words(hidden.stdout)


@pytest.mark.parametrize(
    ("status", "explained"),
    [
        (
            "version-mismatch",
            "The dashboard has been changed by someone else (412 version-mismatch): it was saved "
            "in Grafana while this push stored it (another push, or someone in the editor); push "
            "again to overwrite it with fleetmark's version",
        ),
        (
            "name-exists",
            "A dashboard with the same name in the folder already exists (412 name-exists): the "
            "folder already holds a dashboard titled 'Drift' under another uid; rename or delete "
            "that one in Grafana and push again",
        ),
    ],
)
def test_a_dashboard_refused_with_412(
    grafana: FakeGrafana, url: str, built: Path, status: str, explained: str
) -> None:
    messages = {
        "version-mismatch": "The dashboard has been changed by someone else",
        "name-exists": "A dashboard with the same name in the folder already exists",
    }
    grafana.answer_next(
        "POST", "/api/dashboards/db", 412, {"message": messages[status], "status": status}
    )

    result = push(url, built, *connection(built))

    assert result.exit_code == 2
    assert f"Grafana at {url}/ refused the dashboard 'fleetmark-drift': {explained}" in words(
        result.stderr
    )
    # Files are pushed in name order: the drift dashboard first, refused; nothing after it.
    assert grafana.dashboards == {}
    again = push(url, built)
    assert again.exit_code == 0, again.output
    assert set(grafana.dashboards) == {"fleetmark-drift", "fleetmark-fleet"}


@pytest.mark.parametrize(
    ("status", "body"),
    [(500, {"message": "Internal server error"}), (503, "upstream connect error")],
)
def test_grafana_in_trouble(
    grafana: FakeGrafana, url: str, built: Path, status: int, body: Any
) -> None:
    grafana.answer_next("POST", "/api/folders", status, body)

    result = push(url, built, *connection(built))

    assert result.exit_code == 2
    message = body["message"] if isinstance(body, dict) else body
    assert (
        f"Grafana at {url}/ failed when asked to create the folder 'fleetmark' "
        f"(HTTP {status}: {message}): "
        "Grafana, or a proxy in front of it, is in trouble; look at its log and push again once "
        "it answers (a push can be repeated safely)"
    ) in words(result.stderr)


def test_grafana_unreachable(built: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"

    result = push(url, built, *connection(built))

    assert result.exit_code == 2
    assert f"Grafana at {url}/ is unreachable (" in words(result.stderr)
    assert "check --grafana-url (or FLEETMARK_GRAFANA_URL) and that Grafana is running" in words(
        result.stderr
    )


def test_grafana_that_does_not_answer(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A port that takes the connection and never answers (a hung Grafana, a black-holing
    proxy); the wait is cut to a second here."""
    monkeypatch.setattr(dashboards, "TIMEOUT_SECONDS", 1.0)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        result = push(url, built, *connection(built))

    assert result.exit_code == 2
    assert (
        f"Grafana at {url}/ did not answer within 1 s when asked to tell its version: check "
        "that it is running and --grafana-url is right, then push again"
    ) in words(result.stderr)


def test_a_url_that_is_not_grafana(url: str, built: Path, tmp_path: Path) -> None:
    """Grafana under another path than the one given, a web server that is not Grafana, no URL."""
    site = tmp_path / "site"
    (site / "api").mkdir(parents=True)
    (site / "api" / "health").write_text("<html><body>It works!</body></html>")
    handler = partial(SimpleHTTPRequestHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    web = f"http://127.0.0.1:{server.server_address[1]}"
    with serving_in_thread(server):
        not_grafana = push(web, built, *connection(built))
    elsewhere = push(f"{url}/grafana", built, *connection(built))
    no_url = push("grafana.example.com", built, *connection(built))

    assert not_grafana.exit_code == elsewhere.exit_code == no_url.exit_code == 2
    assert (
        f"{web}/ does not answer as Grafana does (no JSON when asked to tell its version): "
        "check --grafana-url; if Grafana is served under a sub-path, include it"
    ) in words(not_grafana.stderr)
    assert (
        f"{url}/grafana/ does not answer as Grafana does (GET /api/health: HTTP 404): check "
        "--grafana-url; if Grafana is served under a sub-path, include it"
    ) in words(elsewhere.stderr)
    assert (
        "--grafana-url must be Grafana's http(s) URL, such as https://grafana.example.com, got "
        "'grafana.example.com'"
    ) in words(no_url.stderr)


def test_dashboards_that_cannot_be_pushed(grafana: FakeGrafana, url: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.json").write_text('{"uid": "a", "title": ')
    untitled = tmp_path / "untitled"
    untitled.mkdir()
    (untitled / "b.json").write_text(json.dumps({"uid": "b", "panels": []}))
    twice = tmp_path / "twice"
    twice.mkdir()
    for name in ("c.json", "d.json"):
        (twice / name).write_text(json.dumps(dashboard("same", name)))

    results = {
        name: push(url, tmp_path / name, *connection(tmp_path / name))
        for name in ("empty", "broken", "untitled", "twice")
    }

    assert {result.exit_code for result in results.values()} == {2}
    assert unwrapped(
        f"no dashboard JSON files in {empty}: build them with `python -m dashboards build`, or "
        "point --from at a directory of dashboard JSON files"
    ) in unwrapped(results["empty"].stderr)
    assert unwrapped(f"{broken / 'a.json'} is not JSON: Expecting value") in unwrapped(
        results["broken"].stderr
    )
    assert unwrapped(
        f"{untitled / 'b.json'} is not a dashboard: it needs a `uid` and a `title`"
    ) in unwrapped(results["untitled"].stderr)
    assert unwrapped(
        f"{twice / 'd.json'} has the uid 'same' of another dashboard in {twice}"
    ) in unwrapped(results["twice"].stderr)
    assert grafana.requests == []


def test_a_dashboard_grafana_does_not_take(grafana: FakeGrafana, url: str, built: Path) -> None:
    uid = "fleetmark-drift-" + "x" * 30  # Grafana's uids are at most 40 characters
    (built / "fleetmark-drift.json").write_text(json.dumps(dashboard(uid, "Drift")))

    result = push(url, built, *connection(built))

    assert result.exit_code == 2
    assert unwrapped(
        f"Grafana at {url}/ refused to store the dashboard '{uid}' (HTTP 400: Dashboard UID too "
        f"long): the dashboard comes from {built}/fleetmark-drift.json; rebuild it (`python -m "
        "dashboards build`) or fix it, and push again"
    ) in unwrapped(result.stderr)


def test_a_data_source_of_another_kind_under_the_uid(
    grafana: FakeGrafana, url: str, built: Path
) -> None:
    grafana.handle(
        "POST", "/api/datasources", {}, f"Bearer {ADMIN_TOKEN}",
        {"name": "metrics", "uid": "fleetmark", "type": "prometheus", "url": "http://prom:9090"},
    )  # fmt: skip
    taken = FakeGrafana()
    taken.handle(
        "POST", "/api/datasources", {}, f"Bearer {ADMIN_TOKEN}",
        {"name": "fleetmark", "uid": "pg-1", "type": DATASOURCE_TYPE},
    )  # fmt: skip

    other_kind = push(url, built, *connection(built))
    with serve(taken) as taken_url:
        name_taken = push(taken_url, built, *connection(built))

    assert other_kind.exit_code == name_taken.exit_code == 2
    assert (
        "has a data source with the uid 'fleetmark' of the type 'prometheus', not PostgreSQL"
        in words(other_kind.stderr)
    )
    assert (
        "already has a data source named 'fleetmark' but with another uid (data source with the "
        "same name already exists); the dashboards look their data source up by the uid "
        "'fleetmark': rename or delete that data source in Grafana and push again"
    ) in words(name_taken.stderr)
