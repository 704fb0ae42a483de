"""GET /api/v1/fleet: clusters and their objects by state, per environment and cluster type."""

from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, update
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import Environment
from tests.conftest import MakeAgent, RegisterCluster
from tests.support import FakeClock, bearer, kustomization


def counts(
    total: int, ready: int, failing: int, progressing: int, suspended: int, drifted: int
) -> dict[str, int]:
    return {
        "total": total,
        "ready": ready,
        "failing": failing,
        "progressing": progressing,
        "suspended": suspended,
        "drifted": drifted,
    }


def group(
    clusters: int,
    reporting: int,
    stale: int,
    never: int,
    objects: dict[str, int],
    silent: int = 0,
) -> dict[str, Any]:
    """A group's counts. Before any drift evaluation, its drift is that of its `silent`
    clusters (none of which has objects): a row each."""
    return {
        "clusters": clusters,
        "reporting": reporting,
        "stale": stale,
        "never_reported": never,
        "drift_clusters": silent,
        "objects": objects,
        "drift_total": silent,
        "drift_behind": 0,
        "drift_failing": 0,
        "drift_stale": silent,
        "drift_live": 0,
        "drift_other": 0,
    }


async def fleet(client: httpx.AsyncClient, token: str, **params: Any) -> dict[str, Any]:
    response = await client.get("/api/v1/fleet", params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
async def reporting_fleet(
    make_agent: MakeAgent, register_cluster: RegisterCluster, session: AsyncSession
) -> None:
    """dev: two drones and a large; stage: a drone and a large that never reported; prod is
    declared by the control plane, with no cluster yet. Promotion order dev, stage, prod."""
    drone_1 = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")
    await drone_1.send_ok(
        [
            kustomization("app"),
            kustomization("infra", ready=False, reason="BuildFailed"),
            kustomization("monitoring", ready=None, reason="Progressing"),
            kustomization("paused", ready=False, suspended=True),
            kustomization("hand-edited", drifted=True),
        ]
    )
    drone_2 = await make_agent("drone-dev-2", environment="dev", cluster_type="drone")
    await drone_2.send_ok([kustomization("app"), kustomization("infra")])
    large_dev = await make_agent("large-dev-1", environment="dev", cluster_type="large")
    await large_dev.send_ok([kustomization("app")])
    drone_stage = await make_agent("drone-stage-1", environment="stage", cluster_type="drone")
    await drone_stage.send_ok([kustomization("app", ready=False)])
    await register_cluster("large-stage-1", environment="stage", cluster_type="large")

    await session.execute(insert(Environment).values(name="prod", position=2))
    for name, position in (("dev", 0), ("stage", 1)):
        await session.execute(
            update(Environment).where(Environment.name == name).values(position=position)
        )
    await session.commit()


@pytest.mark.usefixtures("reporting_fleet")
async def test_counts_objects_by_state_per_environment_and_cluster_type(
    client: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> None:
    body = await fleet(client, read_token)

    assert datetime.fromisoformat(body["evaluated_at"]) == clock.now
    assert body["stale_after_seconds"] == 600
    drone_dev = counts(7, ready=4, failing=1, progressing=1, suspended=1, drifted=1)
    large_dev = counts(1, ready=1, failing=0, progressing=0, suspended=0, drifted=0)
    dev = counts(8, ready=5, failing=1, progressing=1, suspended=1, drifted=1)
    drone_stage = counts(1, ready=0, failing=1, progressing=0, suspended=0, drifted=0)
    nothing = counts(0, 0, 0, 0, 0, 0)
    assert body["environments"] == [
        {
            "name": "dev",
            "position": 0,
            **group(3, reporting=3, stale=0, never=0, objects=dev),
            "cluster_types": [
                {"name": "drone", **group(2, 2, 0, 0, drone_dev)},
                {"name": "large", **group(1, 1, 0, 0, large_dev)},
            ],
        },
        {
            "name": "stage",
            "position": 1,
            **group(2, reporting=1, stale=0, never=1, objects=drone_stage, silent=1),
            "cluster_types": [
                {"name": "drone", **group(1, 1, 0, 0, drone_stage)},
                {"name": "large", **group(1, 0, 0, 1, nothing, silent=1)},
            ],
        },
        {"name": "prod", "position": 2, **group(0, 0, 0, 0, nothing), "cluster_types": []},
    ]
    totals = counts(9, ready=5, failing=2, progressing=1, suspended=1, drifted=1)
    assert body["totals"] == group(5, reporting=4, stale=0, never=1, objects=totals, silent=1)


@pytest.mark.usefixtures("reporting_fleet")
async def test_lists_clusters_in_promotion_order_with_their_counts(
    client: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> None:
    page = (await fleet(client, read_token))["clusters"]

    assert (page["total"], page["limit"], page["offset"]) == (5, 100, 0)
    assert [
        (c["name"], c["environment"], c["cluster_type"], c["agent"]) for c in page["items"]
    ] == [
        ("drone-dev-1", "dev", "drone", "reporting"),
        ("drone-dev-2", "dev", "drone", "reporting"),
        ("large-dev-1", "dev", "large", "reporting"),
        ("drone-stage-1", "stage", "drone", "reporting"),
        ("large-stage-1", "stage", "large", "never_reported"),
    ]
    first, *_, never = page["items"]
    assert first["objects"] == counts(5, ready=2, failing=1, progressing=1, suspended=1, drifted=1)
    assert datetime.fromisoformat(first["last_seen_at"]) == clock.now
    assert never["objects"] == counts(0, 0, 0, 0, 0, 0)
    assert never["last_seen_at"] is None


@pytest.mark.usefixtures("reporting_fleet")
async def test_a_silent_cluster_turns_stale_when_the_threshold_passes(
    client: httpx.AsyncClient, read_token: str, clock: FakeClock, make_agent: MakeAgent
) -> None:
    clock.advance(minutes=10)
    assert (await fleet(client, read_token))["totals"]["stale"] == 0

    clock.advance(seconds=1)
    latecomer = await make_agent("small-dev-1", environment="dev", cluster_type="small")
    await latecomer.send_ok([kustomization("app")])
    body = await fleet(client, read_token, environment="dev")

    dev = body["environments"][0]
    assert (dev["clusters"], dev["reporting"], dev["stale"], dev["never_reported"]) == (4, 1, 3, 0)
    agents = {c["name"]: c["agent"] for c in body["clusters"]["items"]}
    assert agents == {
        "drone-dev-1": "stale",
        "drone-dev-2": "stale",
        "large-dev-1": "stale",
        "small-dev-1": "reporting",
    }
    # Stale clusters keep their last known objects.
    assert dev["objects"]["total"] == 9


@pytest.mark.usefixtures("reporting_fleet")
@pytest.mark.parametrize(
    ("params", "environments", "clusters"),
    [
        (
            {"environment": "stage"},
            {"stage": ["drone", "large"]},
            ["drone-stage-1", "large-stage-1"],
        ),
        (
            {"cluster_type": "large"},
            {"dev": ["large"], "stage": ["large"]},
            ["large-dev-1", "large-stage-1"],
        ),
        (
            {"environment": "dev", "cluster_type": "drone"},
            {"dev": ["drone"]},
            ["drone-dev-1", "drone-dev-2"],
        ),
        ({"environment": "prod"}, {"prod": []}, []),
    ],
)
async def test_filters_by_environment_and_cluster_type(
    client: httpx.AsyncClient,
    read_token: str,
    params: dict[str, str],
    environments: dict[str, list[str]],
    clusters: list[str],
) -> None:
    body = await fleet(client, read_token, **params)

    assert {
        env["name"]: [ct["name"] for ct in env["cluster_types"]] for env in body["environments"]
    } == environments
    assert [c["name"] for c in body["clusters"]["items"]] == clusters
    assert body["clusters"]["total"] == len(clusters)
    assert body["totals"]["clusters"] == len(clusters)


@pytest.mark.usefixtures("reporting_fleet")
async def test_pages_through_the_cluster_list(client: httpx.AsyncClient, read_token: str) -> None:
    everything = [c["name"] for c in (await fleet(client, read_token))["clusters"]["items"]]

    pages = []
    for offset in (0, 2, 4):
        page = (await fleet(client, read_token, limit=2, offset=offset))["clusters"]
        assert (page["total"], page["limit"], page["offset"]) == (5, 2, offset)
        pages.append([c["name"] for c in page["items"]])

    assert pages == [everything[0:2], everything[2:4], everything[4:]]
    # Summaries cover every cluster, whatever the page.
    assert (await fleet(client, read_token, limit=1))["totals"]["clusters"] == 5


_AGENT_RANK = {"never_reported": 0, "stale": 1, "reporting": 2}


@pytest.mark.usefixtures("reporting_fleet")
@pytest.mark.parametrize(
    ("sort", "column", "descending"),
    [
        ("-failing", lambda c: c["objects"]["failing"], True),
        ("cluster", lambda c: c["name"], False),
        ("agent", lambda c: _AGENT_RANK[c["agent"]], False),
    ],
)
async def test_sorts_the_whole_list_so_each_page_follows_the_last(
    client: httpx.AsyncClient,
    read_token: str,
    sort: str,
    column: Callable[[dict[str, Any]], Any],
    descending: bool,
) -> None:
    own = (await fleet(client, read_token))["clusters"]["items"]

    pages = [
        (await fleet(client, read_token, sort=sort, limit=2, offset=offset))["clusters"]
        for offset in (0, 2, 4)
    ]

    # Ties keep the list's own order, as a stable sort of it does.
    expected = [c["name"] for c in sorted(own, key=column, reverse=descending)]
    assert expected != [c["name"] for c in own]
    assert [c["name"] for page in pages for c in page["items"]] == expected
    assert [page["total"] for page in pages] == [5, 5, 5]


async def test_an_unknown_sort_column_is_refused_naming_the_columns(
    client: httpx.AsyncClient, read_token: str
) -> None:
    response = await client.get(
        "/api/v1/fleet", params={"sort": "-colour"}, headers=bearer(read_token)
    )

    assert response.status_code == 422
    body = response.json()
    assert body["detail"] == (
        "query.sort: no column 'colour' to sort by (columns: cluster, placement, agent, "
        "last_report, objects, ready, failing, progressing, suspended, live_drift)"
    )
    assert [(p["location"], p["field"]) for p in body["problems"]] == [("query", "sort")]


async def test_objects_gone_from_a_snapshot_are_not_counted(
    make_agent: MakeAgent, read_token: str, clock: FakeClock
) -> None:
    agent = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")
    await agent.send_ok([kustomization("app"), kustomization("old")], full_snapshot=True)
    clock.advance(minutes=1)
    await agent.send_ok([kustomization("app")], full_snapshot=True)

    body = await fleet(agent.client, read_token)

    assert body["totals"]["objects"]["total"] == 1


async def test_clusters_outside_any_environment_come_last(
    make_agent: MakeAgent, register_cluster: RegisterCluster, read_token: str
) -> None:
    placed = await make_agent("drone-dev-1", environment="dev")
    await placed.send_ok([kustomization("app")])
    await register_cluster("edge-vm-7")

    body = await fleet(placed.client, read_token)

    assert [(env["name"], env["clusters"]) for env in body["environments"]] == [
        ("dev", 1),
        (None, 1),
    ]
    # Placed in an environment but in no cluster type.
    assert [ct["name"] for ct in body["environments"][0]["cluster_types"]] == [None]
    assert [c["name"] for c in body["clusters"]["items"]] == ["drone-dev-1", "edge-vm-7"]


async def test_needs_a_read_token(client: httpx.AsyncClient, admin_token: str) -> None:
    assert (await client.get("/api/v1/fleet")).status_code == 401
    response = await client.get("/api/v1/fleet", headers=bearer(admin_token))
    assert response.status_code == 200


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"offset": -1}])
async def test_refuses_bad_paging(
    client: httpx.AsyncClient, read_token: str, params: dict[str, int]
) -> None:
    response = await client.get("/api/v1/fleet", params=params, headers=bearer(read_token))

    assert response.status_code == 422
    assert next(iter(params)) in response.json()["detail"]


@pytest.mark.usefixtures("reporting_fleet")
async def test_an_unknown_environment_is_404_naming_those_known(
    client: httpx.AsyncClient, read_token: str
) -> None:
    response = await client.get(
        "/api/v1/fleet", params={"environment": "qa"}, headers=bearer(read_token)
    )

    assert response.status_code == 404
    assert response.json() == {
        "error": "unknown_environment",
        "detail": "environment 'qa' is unknown (known: dev, stage, prod)",
    }
