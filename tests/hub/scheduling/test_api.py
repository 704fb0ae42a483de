"""GET /api/v1/assignments and /api/v1/scheduling/errors: read scope, filters, pages."""

import httpx
import pytest

from tests.hub.scheduling.conftest import Schedule
from tests.hub.scheduling.fleet import Platform
from tests.support import bearer

DEV = [
    ("dev", "drone", "hello-world-app-functional-test"),
    ("dev", "large", "hello-world-app-performance-test"),
]
STAGE = [
    ("stage", "drone", "hello-world-app-uat-test"),
    ("stage", "large", "hello-world-app-uat-test"),
]


@pytest.fixture
async def scheduled(schedule: Schedule) -> None:
    await schedule("dev")
    await schedule("stage")


def pairs(response: httpx.Response) -> list[tuple[str, str, str]]:
    assert response.status_code == 200, response.text
    return [
        (item["environment"], item["cluster_type"], item["deployment_target"])
        for item in response.json()["items"]
    ]


@pytest.mark.parametrize("path", ["/api/v1/assignments", "/api/v1/scheduling/errors"])
async def test_a_read_token_is_needed(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path)

    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"


@pytest.mark.usefixtures("scheduled")
async def test_assignments_carry_what_was_rendered_and_where(
    client: httpx.AsyncClient, read_token: str, platform: Platform
) -> None:
    response = await client.get(
        "/api/v1/assignments", params={"environment": "dev"}, headers=bearer(read_token)
    )

    assert pairs(response) == DEV
    drone = response.json()["items"][0]
    assert drone["namespace"] == "dev-drone-hello-world-app-functional-test"
    assert drone["workload"] == "hello-world-app"
    assert drone["status"] == "rendered"
    assert drone["policies"] == ["functional-test-policy"]
    assert drone["config_maps"] == [
        "dev-config",
        "drone-config",
        "east-us-config",
        "restricted-config",
    ]
    assert drone["files"] == ["namespace.yaml", "platform-config.yaml", "reconciler.yaml"]
    assert len(drone["content_hash"]) == len(drone["config_hash"]) == 64
    assert drone["branch"] == "dev"
    assert drone["commit_sha"] == platform.head("dev")
    assert drone["gitops_url"] == "file://" + str(platform.path).removesuffix(".git")


@pytest.mark.usefixtures("scheduled")
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, DEV + STAGE),
        ({"environment": "stage"}, STAGE),
        ({"cluster_type": "large"}, [DEV[1], STAGE[1]]),
        ({"workload": "hello-world-app", "environment": "dev", "cluster_type": "drone"}, DEV[:1]),
        ({"workload": "another-app"}, []),
    ],
)
async def test_assignments_filter_by_environment_cluster_type_and_workload(
    client: httpx.AsyncClient,
    read_token: str,
    params: dict[str, str],
    expected: list[tuple[str, str, str]],
) -> None:
    response = await client.get("/api/v1/assignments", params=params, headers=bearer(read_token))

    assert pairs(response) == expected
    assert response.json()["total"] == len(expected)


@pytest.mark.usefixtures("scheduled")
async def test_assignments_come_in_pages(client: httpx.AsyncClient, read_token: str) -> None:
    response = await client.get(
        "/api/v1/assignments", params={"limit": 2, "offset": 1}, headers=bearer(read_token)
    )

    assert pairs(response) == [DEV[1], STAGE[0]]
    assert response.json() | {"items": None} == {
        "items": None,
        "total": 4,
        "limit": 2,
        "offset": 1,
    }


@pytest.mark.usefixtures("scheduled")
async def test_errors_filter_by_kind_and_refuse_unknown_kinds(
    client: httpx.AsyncClient, read_token: str
) -> None:
    empty = await client.get(
        "/api/v1/scheduling/errors", params={"kind": "template"}, headers=bearer(read_token)
    )
    unknown = await client.get(
        "/api/v1/scheduling/errors", params={"kind": "typo"}, headers=bearer(read_token)
    )

    assert empty.json() == {"items": [], "total": 0, "limit": 100, "offset": 0}
    assert unknown.status_code == 422
    assert unknown.json()["error"] == "invalid_input"
    assert "kind" in unknown.json()["detail"]
