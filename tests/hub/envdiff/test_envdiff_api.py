"""GET /api/v1/diff over HTTP: access, the wire shape, environments in the order asked for,
and errors that name what is wrong."""

from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.envdiff.tasks import refresh_deployed
from tests.hub.harvest import scenario
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, bearer

DIFF = "/api/v1/diff"


async def get(client: httpx.AsyncClient, token: str, **params: Any) -> httpx.Response:
    return await client.get(DIFF, params=params, headers=bearer(token))


@pytest.fixture
async def reported(
    fleet: Fleet, sessions: async_sessionmaker[AsyncSession], clock: FakeClock
) -> Fleet:
    """A drone in dev and one in stage, each running its environment's app head; the hub's
    job has summed up their reports."""
    for name, environment, target in [
        ("drone-01", "dev", "functional-test"),
        ("drone-s1", "stage", "uat-test"),
    ]:
        cluster = await fleet.add(name, "drone", environment)
        cluster.run_app(target, fleet.app_heads[environment])
    await fleet.report()
    await refresh_deployed(sessions, now=clock.now)
    return fleet


async def test_the_diff_needs_a_read_token(
    reported: Fleet, client: httpx.AsyncClient, read_token: str
) -> None:
    anonymous = await client.get(DIFF, params={"environment": ["dev", "stage"]})
    allowed = await get(client, read_token, environment=["dev", "stage"])

    assert anonymous.status_code == 401
    assert allowed.status_code == 200, allowed.text


async def test_rows_carry_every_environment_in_the_order_asked_for(
    reported: Fleet, client: httpx.AsyncClient, read_token: str
) -> None:
    response = await get(
        client, read_token, environment=["stage", "dev"], cluster_type="drone", limit=10
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["environments"] == ["stage", "dev"]
    # No declared positions: the order asked for is the promotion order too.
    assert body["promotion_order"] == ["stage", "dev"]
    assert body["filters"] == {
        "workload": None,
        "cluster_type": "drone",
        "deployment_target": None,
        "only_differences": True,
        "ignored_keys": [],
    }
    assert {key: body["rows"][key] for key in ("total", "limit", "offset")} == {
        "total": 1,
        "limit": 10,
        "offset": 0,
    }
    [row] = body["rows"]["items"]
    assert (row["workload"], row["cluster_type"], row["deployment_target"]) == (
        scenario.WORKLOAD,
        "drone",
        None,
    )
    stage, dev = row["environments"]
    assert (stage["environment"], dev["environment"]) == ("stage", "dev")
    assert stage["deployed"] == {
        "clusters": 1,
        "in_sync": 1,
        "drifted": 0,
        "failing": 0,
        "live_drift": 0,
        "not_reporting": 0,
        "versions": [{"version": "1.0.0", "commit": None, "clusters": 1}],
    }
    assert stage["desired"]["version"] == "1.0.0"
    assert stage["state"] == "in_sync"
    environment = next(item for item in row["differences"] if item["key"] == "ENVIRONMENT")
    assert environment == {
        "kind": "config",
        "reason": "config",
        "detail": "stage: 'Stage', dev: 'Dev'",
        "environment": None,
        "compared_with": None,
        "key": "ENVIRONMENT",
        "values": {"stage": "Stage", "dev": "Dev"},
    }
    assert body["deployed_at"] is not None


def _row_key(row: dict[str, Any]) -> tuple[str, str, str | None]:
    return row["workload"], row["cluster_type"], row["deployment_target"]


async def test_sorts_every_row_so_each_page_follows_the_last(
    reported: Fleet, client: httpx.AsyncClient, read_token: str
) -> None:
    asked = {"environment": ["dev", "stage"], "only_differences": "false"}
    own = (await get(client, read_token, **asked)).json()["rows"]
    pages = [
        (await get(client, read_token, **asked, sort="-cluster_type", limit=1, offset=at)).json()
        for at in range(own["total"])
    ]

    # Ties keep the diff's own order, as a stable sort of it does.
    expected = sorted(own["items"], key=lambda row: row["cluster_type"], reverse=True)
    assert len(pages) > 1
    assert [_row_key(row) for row in expected] != [_row_key(row) for row in own["items"]]
    assert [_row_key(row) for page in pages for row in page["rows"]["items"]] == [
        _row_key(row) for row in expected
    ]


@pytest.mark.parametrize(
    ("params", "status", "detail"),
    [
        ({"environment": ["dev"]}, 422, "environment: give at least two environments to compare"),
        (
            {"environment": ["dev", "stage", "dev"]},
            422,
            "environment: dev given more than once",
        ),
        ({}, 422, "query.environment: Field required"),
        (
            {"environment": ["dev", "qa", "uat"]},
            404,
            "environments 'qa', 'uat' are unknown (known: dev, stage)",
        ),
        ({"environment": ["dev", "stage"], "limit": 0}, 422, "query.limit: "),
        ({"environment": ["dev", "stage"], "limit": 1001}, 422, "query.limit: "),
        ({"environment": ["dev", "stage"], "offset": -1}, 422, "query.offset: "),
        (
            {"environment": ["dev", "stage"], "sort": "-size"},
            422,
            "query.sort: no column 'size' to sort by (columns: workload, cluster_type)",
        ),
    ],
)
async def test_what_is_refused_is_named(
    reported: Fleet,
    client: httpx.AsyncClient,
    read_token: str,
    params: dict[str, Any],
    status: int,
    detail: str,
) -> None:
    response = await get(client, read_token, **params)

    assert response.status_code == status, response.text
    assert response.json()["detail"].startswith(detail), response.json()
