"""No credentials in a repository URL the hub keeps, shows or logs.

A token is usually given as the user name of an https URL (`https://ghp_…@github.com/…`), so
configured http(s) URLs with any user name or password are refused (the secret belongs in
`credentials`), URLs named by repository content are kept without theirs, and whatever an
earlier version stored is redacted in every answer and log line.
"""

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import structlog
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.app import create_app
from hub.errors import InvalidConfiguration
from hub.git.urls import normalise_repository_url
from hub.harvest import service
from hub.logs import configure_logging
from hub.models import Repository
from tests.conftest import hub_settings
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import Harvest, MakeRepo
from tests.hub.harvest.gitrepo import GitServer
from tests.hub.harvest.store import HarvestedRepo
from tests.support import bearer

Configure = Callable[..., object]
TOKEN = "ghp_L3akedT0kenValue"


@pytest.fixture
def json_log(
    stdout_logs: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[[], list[str]]:
    """The hub's production logging, its lines as written to standard output."""
    configure_logging("json")
    # A logger of its own: the module's may have been bound to an earlier test's output.
    monkeypatch.setattr(service, "log", structlog.get_logger("fleetmark.harvest"))
    return lambda: capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    "url",
    [
        f"https://{TOKEN}@github.com/contoso/platform-gitops.git",
        f"https://x-access-token:{TOKEN}@github.com/contoso/platform-gitops.git",
        f"http://{TOKEN}@git.internal/contoso/platform-gitops",
    ],
)
async def test_the_admin_api_refuses_a_url_with_credentials(
    url: str, client: httpx.AsyncClient, admin_token: str
) -> None:
    response = await client.post(
        "/api/v1/repositories", json={"url": url, "role": "platform"}, headers=bearer(admin_token)
    )

    assert response.status_code == 422
    body = response.json()
    assert [problem["field"] for problem in body["problems"]] == ["url"]
    assert "the URL holds credentials (a user name or password)" in body["detail"]
    assert "token_file or token_env" in body["detail"]
    assert TOKEN not in response.text


@pytest.mark.parametrize(
    "url", ["git@github.com:contoso/app-gitops.git", "ssh://git@github.com/contoso/app-gitops"]
)
async def test_an_ssh_user_is_no_secret(
    url: str, client: httpx.AsyncClient, admin_token: str
) -> None:
    response = await client.post(
        "/api/v1/repositories", json={"url": url, "role": "app"}, headers=bearer(admin_token)
    )

    assert response.status_code == 201, response.text
    assert response.json()["clone_url"] == url


async def test_the_hub_does_not_start_with_a_url_with_credentials_in_its_file(
    tmp_path: Path, database_url: str
) -> None:
    file = tmp_path / "repositories.yaml"
    file.write_text(
        "repositories:\n"
        "- url: git@github.com:contoso/platform-gitops.git\n"
        "  role: platform\n"
        f"- url: https://{TOKEN}@github.com/contoso/app-gitops.git\n"
        "  role: app\n"
    )
    app = create_app(hub_settings(repositories_file=file), database_url)

    with pytest.raises(InvalidConfiguration) as refused:
        async with app.router.lifespan_context(app):
            pass

    assert refused.value.detail.startswith(f"{file}: line 4: repositories[1].url: ")
    assert "the URL holds credentials" in refused.value.detail
    assert TOKEN not in refused.value.detail


async def test_a_discovered_url_is_kept_without_its_credentials(
    make_repo: MakeRepo,
    served_git: Callable[[], GitServer],
    configure: Configure,
    harvest: Harvest,
    session: AsyncSession,
    client: httpx.AsyncClient,
    read_token: str,
) -> None:
    app = make_repo("app-gitops")
    scenario.build_app(app)
    remote = served_git().publish(app)
    named = remote.replace("http://", f"http://{TOKEN}@")
    platform = make_repo("platform-gitops")
    commit = platform.commit("Promote dev", scenario.platform_dev(named))
    await configure(platform.url, "platform", branches=["dev"])

    await harvest()

    errors = await HarvestedRepo(session, platform.url).errors()
    assert {(error["commit_sha"], error["path"]) for error in errors} == {
        (commit, "drone/hello-world-app-functional-test"),
        (commit, "large/hello-world-app-performance-test"),
    }
    assert {error["message"] for error in errors} == {
        f"{remote} is harvested without the credentials its URL held (a user name or "
        "password): repository content must not carry them; list the repository in the "
        "repositories file with `credentials` (token_file or token_env) instead"
    }
    listed = await client.get("/api/v1/repositories", headers=bearer(read_token))
    discovered = [item for item in listed.json() if item["source"] == "discovered"]
    assert [item["clone_url"] for item in discovered] == [remote]
    assert TOKEN not in listed.text


async def test_a_url_stored_with_credentials_is_shown_and_logged_without_them(
    served_git: Callable[[], GitServer],
    session: AsyncSession,
    harvest: Harvest,
    client: httpx.AsyncClient,
    read_token: str,
    json_log: Callable[[], list[str]],
) -> None:
    """A URL an earlier version accepted: git's own error names it, user name and all."""
    remote = served_git().url("app-gitops.git")
    await session.execute(
        insert(Repository).values(
            url=normalise_repository_url(remote),
            clone_url=remote.replace("http://", f"http://{TOKEN}@"),
            role="app",
            source="api",
            branches=["dev"],
        )
    )
    await session.commit()

    await harvest()

    lines = json_log()
    fetch_failed = [json.loads(line) for line in lines if '"fetch failed"' in line]
    [event] = fetch_failed
    assert event["error"].startswith(f"fetching {remote} failed: fatal: ")
    assert not [line for line in lines if TOKEN in line]
    [stored] = await HarvestedRepo(session, remote).errors()
    assert TOKEN not in stored["message"]
    shown = [
        (await client.get("/api/v1/repositories", headers=bearer(read_token))).text,
        (await client.get("/repositories")).text,
    ]
    assert all(remote in page and TOKEN not in page for page in shown)
