"""GET /api/v1/repositories (read scope) and the admin API that adds and removes repositories."""

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from hub.git.urls import normalise_repository_url
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import Harvest, MakeRepo
from tests.support import FakeClock, bearer

Configure = Callable[..., Awaitable[int]]


async def listed(client: httpx.AsyncClient, token: str) -> dict[str, dict[str, Any]]:
    response = await client.get("/api/v1/repositories", headers=bearer(token))
    assert response.status_code == 200, response.text
    return {item["url"]: item for item in response.json()}


async def test_status_shows_heads_lag_and_errors_per_branch(
    client: httpx.AsyncClient,
    read_token: str,
    make_repo: MakeRepo,
    configure: Configure,
    harvest: Harvest,
    clock: FakeClock,
) -> None:
    app = make_repo("app-gitops")
    heads = scenario.build_app(app)
    app.commit("broken", {"uat-test/broken.yaml": "a: [\n"})
    await configure(app.url, "app", branches=["dev", "stage", "prod"])
    await harvest()
    clock.advance(seconds=90)

    status = (await listed(client, read_token))[normalise_repository_url(app.url)]

    assert (status["role"], status["source"], status["enabled"]) == ("app", "api", True)
    assert status["configured_branches"] == ["dev", "stage", "prod"]
    assert status["fetch_error"] is None
    branches = {branch["name"]: branch for branch in status["branches"]}
    assert sorted(branches) == ["dev", "stage"]
    assert branches["stage"]["head_sha"] == heads["stage"]
    assert branches["dev"]["head_sha"] == app.head("dev")
    assert branches["dev"]["lag_seconds"] == 90
    assert (branches["dev"]["commits"], branches["stage"]["commits"]) == (2, 2)
    assert status["error_count"] == 2
    assert {error["message"] for error in status["recent_errors"]} == {
        "branch 'prod' does not exist on the remote",
        "uat-test/broken.yaml: line 2, column 1: invalid YAML: did not find expected node content",
    }


async def test_status_needs_a_read_token(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/repositories")

    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"


async def test_admin_adds_and_removes_a_repository(
    client: httpx.AsyncClient, admin_token: str, read_token: str
) -> None:
    body = {
        "url": "git@github.com:Contoso/App-GitOps.git",
        "role": "app",
        "branches": ["dev"],
        "credentials": {"token_env": "FLEETMARK_GIT_CONTOSO"},
    }

    created = await client.post("/api/v1/repositories", json=body, headers=bearer(admin_token))
    again = await client.post(
        "/api/v1/repositories",
        json=body | {"url": "https://github.com/Contoso/App-GitOps"},
        headers=bearer(admin_token),
    )
    removed = await client.delete(
        f"/api/v1/repositories/{created.json()['id']}", headers=bearer(admin_token)
    )

    assert created.status_code == 201, created.text
    assert created.json()["url"] == "https://github.com/Contoso/App-GitOps"
    assert created.json()["credentials"] == "token_env"
    assert again.status_code == 409
    assert removed.status_code == 204
    status = (await listed(client, read_token))["https://github.com/Contoso/App-GitOps"]
    assert (status["enabled"], status["credentials"]) == (False, None)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            {"url": "https://github.com/c/a", "role": "cluster"},
            "role: Input should be 'platform' or 'app'",
        ),
        ({"url": "https://bot:hunter2@github.com/c/a", "role": "app"}, "the URL holds credentials"),
        ({"url": "ftp://github.com/c/a", "role": "app"}, "unsupported repository URL scheme"),
        (
            {"url": "https://github.com/c/a", "role": "app", "credentials": {"token": "ghp_x"}},
            "credentials.token: Extra inputs are not permitted",
        ),
        (
            {
                "url": "https://github.com/c/a",
                "role": "app",
                "credentials": {"token_env": "FLEETMARK_TOKEN_SECRET"},
            },
            "only variables named FLEETMARK_GIT_* may be referenced",
        ),
        (
            {
                "url": "https://github.com/c/a",
                "role": "app",
                "credentials": {"token_file": "/etc/shadow"},
            },
            "FLEETMARK_GIT_CREDENTIALS_DIR is set",
        ),
        (
            {"url": "https://github.com/c/a", "role": "app", "branches": ["a..b"]},
            "cannot contain '..'",
        ),
    ],
)
async def test_bad_repository_is_refused_naming_the_field(
    client: httpx.AsyncClient, admin_token: str, body: dict[str, Any], problem: str
) -> None:
    response = await client.post("/api/v1/repositories", json=body, headers=bearer(admin_token))

    assert response.status_code == 422
    assert problem in response.json()["detail"]
    assert "hunter2" not in response.text
    assert "ghp_x" not in response.text


async def test_read_token_cannot_add_repositories(
    client: httpx.AsyncClient, read_token: str
) -> None:
    response = await client.post(
        "/api/v1/repositories",
        json={"url": "https://github.com/c/a", "role": "app"},
        headers=bearer(read_token),
    )

    assert response.status_code == 403


async def test_files_inside_the_credentials_dir_are_accepted(
    make_client: Callable[..., Awaitable[httpx.AsyncClient]], admin_token: str, tmp_path: Path
) -> None:
    client = await make_client(git_credentials_dir=tmp_path)
    body = {"url": "https://github.com/c/a", "role": "app"}

    inside = await client.post(
        "/api/v1/repositories",
        json=body | {"credentials": {"token_file": str(tmp_path / "token")}},
        headers=bearer(admin_token),
    )
    outside = await client.post(
        "/api/v1/repositories",
        json=body
        | {
            "url": "https://github.com/c/b",
            "credentials": {"token_file": str(tmp_path / "../token")},
        },
        headers=bearer(admin_token),
    )

    assert inside.status_code == 201, inside.text
    assert outside.status_code == 422
    assert "outside FLEETMARK_GIT_CREDENTIALS_DIR" in outside.json()["detail"]


async def test_repositories_of_the_file_cannot_be_changed_through_the_api(
    client: httpx.AsyncClient,
    admin_token: str,
    harvest: Harvest,
    make_repo: MakeRepo,
    tmp_path: Path,
    harvest_settings: Any,
) -> None:
    app = make_repo("app-gitops")
    app.commit("Manifests", {"uat-test/deployment.yaml": scenario.deployment("1.0.0")})
    file = tmp_path / "repositories.yaml"
    file.write_text(f"repositories:\n- url: {app.url}\n  role: app\n  branches: [dev]\n")
    harvest_settings.repositories_file = file
    await harvest()
    status = await client.get("/api/v1/repositories", headers=bearer(admin_token))
    [item] = status.json()

    added = await client.post(
        "/api/v1/repositories", json={"url": app.url, "role": "app"}, headers=bearer(admin_token)
    )
    removed = await client.delete(f"/api/v1/repositories/{item['id']}", headers=bearer(admin_token))
    unknown = await client.delete("/api/v1/repositories/999999", headers=bearer(admin_token))

    assert item["source"] == "file"
    assert (added.status_code, added.json()["error"]) == (409, "managed_by_file")
    assert (removed.status_code, removed.json()["error"]) == (409, "managed_by_file")
    assert (unknown.status_code, unknown.json()["error"]) == (404, "unknown_repository")
