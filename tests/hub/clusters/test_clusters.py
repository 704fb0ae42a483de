"""Cluster endpoints: listing, detail, staleness, and registration with its token lifecycle."""

from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.conftest import MakeAgent
from tests.support import SHA_A, SHA_B, Agent, FakeClock, bearer, kustomization

FLEET = [
    ("drone-dev-1", "dev", "drone"),
    ("drone-dev-2", "dev", "drone"),
    ("large-dev-1", "dev", "large"),
    ("drone-stage-1", "stage", "drone"),
    ("large-stage-1", "stage", "large"),
]


async def register(
    client: httpx.AsyncClient, admin_token: str, name: str, **fields: Any
) -> httpx.Response:
    return await client.post(
        "/api/v1/clusters", json={"name": name, **fields}, headers=bearer(admin_token)
    )


@pytest.fixture
async def fleet(client: httpx.AsyncClient, admin_token: str) -> None:
    for name, environment, cluster_type in FLEET:
        response = await register(
            client, admin_token, name, environment=environment, cluster_type=cluster_type
        )
        assert response.status_code == 201, response.text


async def names(client: httpx.AsyncClient, token: str, **params: Any) -> list[str]:
    response = await client.get("/api/v1/clusters", params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    return [item["name"] for item in response.json()["items"]]


@pytest.mark.usefixtures("fleet")
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, ["drone-dev-1", "drone-dev-2", "drone-stage-1", "large-dev-1", "large-stage-1"]),
        ({"environment": "dev"}, ["drone-dev-1", "drone-dev-2", "large-dev-1"]),
        ({"cluster_type": "drone"}, ["drone-dev-1", "drone-dev-2", "drone-stage-1"]),
        ({"environment": "stage", "cluster_type": "large"}, ["large-stage-1"]),
    ],
)
async def test_list_filters(
    client: httpx.AsyncClient, read_token: str, params: dict[str, str], expected: list[str]
) -> None:
    assert await names(client, read_token, **params) == expected


@pytest.mark.usefixtures("fleet")
async def test_an_unknown_environment_is_404_naming_those_known(
    client: httpx.AsyncClient, read_token: str
) -> None:
    response = await client.get(
        "/api/v1/clusters", params={"environment": "prod"}, headers=bearer(read_token)
    )

    assert response.status_code == 404
    assert response.json() == {
        "error": "unknown_environment",
        "detail": "environment 'prod' is unknown (known: dev, stage)",
    }


@pytest.mark.usefixtures("fleet")
async def test_list_pages(client: httpx.AsyncClient, read_token: str) -> None:
    everything = await names(client, read_token)

    pages = []
    for offset in (0, 2, 4):
        response = await client.get(
            "/api/v1/clusters", params={"limit": 2, "offset": offset}, headers=bearer(read_token)
        )
        page = response.json()
        assert (page["total"], page["limit"], page["offset"]) == (5, 2, offset)
        pages.append([item["name"] for item in page["items"]])

    assert pages == [everything[0:2], everything[2:4], everything[4:]]
    dev_page = await client.get(
        "/api/v1/clusters",
        params={"environment": "dev", "limit": 1, "offset": 1},
        headers=bearer(read_token),
    )
    assert dev_page.json()["total"] == 3
    assert [item["name"] for item in dev_page.json()["items"]] == ["drone-dev-2"]


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"offset": -1}])
async def test_list_refuses_bad_paging(
    client: httpx.AsyncClient, read_token: str, params: dict[str, int]
) -> None:
    response = await client.get("/api/v1/clusters", params=params, headers=bearer(read_token))

    assert response.status_code == 422
    assert next(iter(params)) in response.json()["detail"]


async def test_list_counts_live_objects_by_readiness(
    agent: Agent, read_token: str, clock: FakeClock
) -> None:
    await agent.send_ok(
        [
            kustomization("ready"),
            kustomization("failing", ready=False),
            kustomization("unknown", ready=None),
            kustomization("removed-later"),
        ],
        full_snapshot=True,
    )
    clock.advance(minutes=1)
    await agent.send_ok(
        [
            kustomization("ready"),
            kustomization("failing", ready=False),
            kustomization("unknown", ready=None),
        ],
        full_snapshot=True,
    )

    response = await agent.client.get("/api/v1/clusters", headers=bearer(read_token))

    (item,) = response.json()["items"]
    assert (item["objects"], item["ready"], item["failing"]) == (3, 1, 1)
    assert datetime.fromisoformat(item["last_seen_at"]) == clock.now
    assert item["token_active"] is True


async def test_detail_shows_current_object_states(
    make_agent: MakeAgent, read_token: str, clock: FakeClock
) -> None:
    agent = await make_agent(
        "drone-dev-1", environment="dev", cluster_type="drone", labels={"region": "east-us"}
    )
    await agent.send_ok(
        [kustomization("b-app", f"dev@sha1:{SHA_B}"), kustomization("a-infra"), kustomization("x")],
        full_snapshot=True,
    )
    clock.advance(minutes=1)
    await agent.send_ok(
        [kustomization("b-app", f"dev@sha1:{SHA_B}"), kustomization("a-infra")],
        full_snapshot=True,
    )

    response = await agent.client.get("/api/v1/clusters/drone-dev-1", headers=bearer(read_token))

    assert response.status_code == 200
    detail = response.json()
    assert (detail["name"], detail["environment"], detail["cluster_type"]) == (
        "drone-dev-1",
        "dev",
        "drone",
    )
    assert detail["labels"] == {"region": "east-us"}
    assert detail["stale"] is False
    assert [(o["name"], o["applied_sha"]) for o in detail["objects"]] == [
        ("a-infra", SHA_A),
        ("b-app", SHA_B),
    ]
    first = detail["objects"][0]
    assert (first["reconciler"], first["kind"], first["namespace"]) == (
        "flux",
        "Kustomization",
        "flux-system",
    )
    assert first["ready"] is True
    assert first["reason"] == "ReconciliationSucceeded"


async def test_detail_shows_the_reporting_agent_and_the_kinds_it_skipped(
    make_agent: MakeAgent, read_token: str, clock: FakeClock
) -> None:
    agent = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")
    helm = {
        "kind": "HelmRelease",
        "api_group": "helm.toolkit.fluxcd.io",
        "reason": "its CustomResourceDefinition is absent",
    }
    argo = {"kind": "Application", "api_group": "argoproj.io", "reason": "forbidden"}
    await agent.send_ok([kustomization("apps")], sequence=2, skipped_kinds=[helm])
    # A late report from before: its view of the cluster is older and does not count.
    clock.advance(seconds=5)
    await agent.send_ok([kustomization("apps")], sequence=1, skipped_kinds=[helm, argo])

    response = await agent.client.get("/api/v1/clusters/drone-dev-1", headers=bearer(read_token))

    reporting = response.json()["agent"]
    assert (reporting["boot_id"], reporting["version"], reporting["instance"]) == (
        "boot-1",
        "0.1.0",
        "fleetmark-agent-7d9f",
    )
    assert (reporting["sequence"], reporting["reports"]) == (2, 2)
    assert reporting["skipped_kinds"] == [helm]

    # Once the CRD is installed, the next report skips nothing.
    await agent.send_ok([kustomization("apps")], sequence=3)
    response = await agent.client.get("/api/v1/clusters/drone-dev-1", headers=bearer(read_token))
    assert response.json()["agent"]["skipped_kinds"] == []


async def test_a_cluster_that_never_reported_has_no_agent(
    client: httpx.AsyncClient, admin_token: str, read_token: str
) -> None:
    await register(client, admin_token, "drone-dev-9", environment="dev", cluster_type="drone")

    response = await client.get("/api/v1/clusters/drone-dev-9", headers=bearer(read_token))

    assert response.json()["agent"] is None


async def test_detail_of_unknown_cluster_is_404(client: httpx.AsyncClient, read_token: str) -> None:
    response = await client.get("/api/v1/clusters/nowhere", headers=bearer(read_token))

    assert response.status_code == 404
    assert response.json()["error"] == "unknown_cluster"
    assert response.json()["detail"].startswith("cluster 'nowhere' is unknown (")


async def test_stale_flag_follows_the_hub_clock(
    agent: Agent, read_token: str, clock: FakeClock
) -> None:
    async def stale() -> tuple[bool, bool]:
        listed = await agent.client.get("/api/v1/clusters", headers=bearer(read_token))
        detail = await agent.client.get(
            f"/api/v1/clusters/{agent.cluster}", headers=bearer(read_token)
        )
        return listed.json()["items"][0]["stale"], detail.json()["stale"]

    assert await stale() == (True, True), "a cluster that never reported is stale"
    await agent.send_ok([kustomization("app")])
    assert await stale() == (False, False)

    clock.advance(seconds=600)
    assert await stale() == (False, False)
    clock.advance(seconds=1)
    assert await stale() == (True, True)

    await agent.send_ok([kustomization("app")])
    assert await stale() == (False, False)


async def test_register_rotate_revoke(
    client: httpx.AsyncClient, admin_token: str, read_token: str, clock: FakeClock
) -> None:
    registered = await register(client, admin_token, "drone-dev-1", environment="dev")
    assert registered.status_code == 201
    assert registered.json()["name"] == "drone-dev-1"
    first_token = registered.json()["token"]
    assert first_token.startswith("fmc_")
    agent = Agent(client=client, clock=clock, cluster="drone-dev-1", token=first_token)
    await agent.send_ok([kustomization("app")])

    rotated = await client.post("/api/v1/clusters/drone-dev-1/token", headers=bearer(admin_token))
    assert rotated.status_code == 200
    second_token = rotated.json()["token"]
    assert second_token.startswith("fmc_")
    assert second_token != first_token
    assert (await agent.send([kustomization("app")])).status_code == 401
    agent.token = second_token
    await agent.send_ok([kustomization("app")])

    revoked = await client.delete("/api/v1/clusters/drone-dev-1/token", headers=bearer(admin_token))
    assert revoked.status_code == 204
    assert (await agent.send([kustomization("app")])).status_code == 401
    (item,) = (await client.get("/api/v1/clusters", headers=bearer(read_token))).json()["items"]
    assert item["token_active"] is False

    # Rotating a revoked cluster gives it a working token again.
    agent.token = (
        await client.post("/api/v1/clusters/drone-dev-1/token", headers=bearer(admin_token))
    ).json()["token"]
    await agent.send_ok([kustomization("app")])


async def test_register_twice_is_a_conflict(client: httpx.AsyncClient, admin_token: str) -> None:
    await register(client, admin_token, "drone-dev-1")

    again = await register(client, admin_token, "drone-dev-1", environment="dev")

    assert again.status_code == 409
    assert again.json()["error"] == "already_exists"
    assert "'drone-dev-1' is already registered" in again.json()["detail"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "Drone_Dev_1"}, "name"),
        ({"name": "drone-dev-1", "environment": "Dev"}, "environment"),
        ({"name": "drone-dev-1", "cluster_type": "drone"}, "cluster_type"),
        ({"name": "drone-dev-1", "labels": {"region": 1}}, "labels.region"),
    ],
)
async def test_register_refuses_bad_input(
    client: httpx.AsyncClient, admin_token: str, fields: dict[str, Any], field: str
) -> None:
    response = await client.post("/api/v1/clusters", json=fields, headers=bearer(admin_token))

    assert response.status_code == 422
    assert field in response.json()["detail"]


@pytest.mark.parametrize("method", ["POST", "DELETE"])
async def test_token_of_unknown_cluster_is_404(
    client: httpx.AsyncClient, admin_token: str, method: str
) -> None:
    response = await client.request(
        method, "/api/v1/clusters/nowhere/token", headers=bearer(admin_token)
    )

    assert response.status_code == 404
    assert response.json()["error"] == "unknown_cluster"
