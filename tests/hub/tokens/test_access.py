"""API tokens: scopes on every endpoint, and the token lifecycle through the API."""

from datetime import datetime

import httpx
import pytest

from tests.conftest import RegisterCluster
from tests.support import FakeClock, bearer

ADMIN_ENDPOINTS = [
    ("POST", "/api/v1/clusters", {"name": "drone-dev-9"}),
    ("POST", "/api/v1/clusters/drone-dev-1/token", None),
    ("DELETE", "/api/v1/clusters/drone-dev-1/token", None),
    ("GET", "/api/v1/tokens", None),
    ("POST", "/api/v1/tokens", {"name": "ci", "scope": "read"}),
    ("DELETE", "/api/v1/tokens/grafana", None),
]
READ_ENDPOINTS = [
    ("GET", "/api/v1/clusters", None),
    ("GET", "/api/v1/clusters/drone-dev-1", None),
]


@pytest.fixture
async def cluster_token(register_cluster: RegisterCluster) -> str:
    return await register_cluster("drone-dev-1", environment="dev")


def _id(endpoint: tuple[str, str, object]) -> str:
    return f"{endpoint[0]} {endpoint[1]}"


@pytest.mark.usefixtures("cluster_token")
@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ENDPOINTS, ids=map(_id, ADMIN_ENDPOINTS))
async def test_read_token_is_refused_on_admin_endpoints(
    client: httpx.AsyncClient, read_token: str, method: str, path: str, body: object
) -> None:
    response = await client.request(method, path, json=body, headers=bearer(read_token))

    assert response.status_code == 403
    assert response.json() == {
        "error": "insufficient_scope",
        "detail": "this needs a token with scope 'admin'; yours has 'read'",
    }


@pytest.mark.usefixtures("cluster_token")
@pytest.mark.parametrize(
    ("method", "path", "body"),
    ADMIN_ENDPOINTS + READ_ENDPOINTS,
    ids=map(_id, ADMIN_ENDPOINTS + READ_ENDPOINTS),
)
async def test_every_endpoint_needs_a_token(
    client: httpx.AsyncClient, method: str, path: str, body: object
) -> None:
    response = await client.request(method, path, json=body)

    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "path", "body"), READ_ENDPOINTS, ids=map(_id, READ_ENDPOINTS))
async def test_cluster_token_is_not_an_api_token(
    client: httpx.AsyncClient, cluster_token: str, method: str, path: str, body: object
) -> None:
    response = await client.request(method, path, json=body, headers=bearer(cluster_token))

    assert response.status_code == 401


@pytest.mark.usefixtures("cluster_token")
@pytest.mark.parametrize(("method", "path", "body"), READ_ENDPOINTS, ids=map(_id, READ_ENDPOINTS))
async def test_read_and_admin_tokens_may_read(
    client: httpx.AsyncClient,
    read_token: str,
    admin_token: str,
    method: str,
    path: str,
    body: object,
) -> None:
    for token in (read_token, admin_token):
        response = await client.request(method, path, json=body, headers=bearer(token))
        assert response.status_code == 200, response.text


async def test_token_lifecycle(
    client: httpx.AsyncClient, admin_token: str, clock: FakeClock
) -> None:
    created = await client.post(
        "/api/v1/tokens", json={"name": "ci-pipeline", "scope": "read"}, headers=bearer(admin_token)
    )
    assert created.status_code == 201
    assert (created.json()["name"], created.json()["scope"]) == ("ci-pipeline", "read")
    ci_token = created.json()["token"]
    assert ci_token.startswith("fma_")
    assert (await client.get("/api/v1/clusters", headers=bearer(ci_token))).status_code == 200

    listed = (await client.get("/api/v1/tokens", headers=bearer(admin_token))).json()
    assert [(t["name"], t["scope"], t["revoked_at"]) for t in listed] == [
        ("ci-pipeline", "read", None),
        ("ops-admin", "admin", None),
    ]
    assert all("token" not in t for t in listed), "token values are never shown again"

    clock.advance(hours=1)
    revoked = await client.delete("/api/v1/tokens/ci-pipeline", headers=bearer(admin_token))
    assert revoked.status_code == 204
    refused = await client.get("/api/v1/clusters", headers=bearer(ci_token))
    assert refused.status_code == 401
    assert refused.json()["detail"] == "the API token is unknown or revoked"
    listed = (await client.get("/api/v1/tokens", headers=bearer(admin_token))).json()
    assert datetime.fromisoformat(listed[0]["revoked_at"]) == clock.now

    again = await client.delete("/api/v1/tokens/ci-pipeline", headers=bearer(admin_token))
    assert again.status_code == 404
    assert again.json()["error"] == "unknown_token"


async def test_admin_token_created_by_admin_is_admin(
    client: httpx.AsyncClient, admin_token: str
) -> None:
    created = await client.post(
        "/api/v1/tokens",
        json={"name": "second-admin", "scope": "admin"},
        headers=bearer(admin_token),
    )

    second = created.json()["token"]
    response = await client.get("/api/v1/tokens", headers=bearer(second))
    assert response.status_code == 200


async def test_token_names_are_unique(client: httpx.AsyncClient, admin_token: str) -> None:
    response = await client.post(
        "/api/v1/tokens", json={"name": "ops-admin", "scope": "read"}, headers=bearer(admin_token)
    )

    assert response.status_code == 409
    assert response.json()["error"] == "already_exists"


@pytest.mark.parametrize(
    ("body", "field"),
    [({"name": "ci", "scope": "write"}, "scope"), ({"name": "a b", "scope": "read"}, "name")],
)
async def test_token_request_is_validated(
    client: httpx.AsyncClient, admin_token: str, body: dict[str, str], field: str
) -> None:
    response = await client.post("/api/v1/tokens", json=body, headers=bearer(admin_token))

    assert response.status_code == 422
    assert response.json()["detail"].startswith(f"{field}:")
