"""GET /api/v1/drift and /api/v1/drift/history over HTTP: filters, pages with totals and counts,
and questions the hub refuses."""

from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from hub.drift.schemas import Reason
from hub.simulation import ARGO_ROOT, ROOT
from tests.hub.drifting import evaluate
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, bearer


@pytest.fixture
async def fleet_with_drift(
    fleet: Fleet,
    session: AsyncSession,
    clock: FakeClock,
    client: httpx.AsyncClient,
    read_token: str,
) -> Fleet:
    """dev: drone-01 behind, drone-02 at the head, large-01 failing; stage: drone-s1 at its
    head; judged by the drift job. The client asks with a read token."""
    first = fleet.platform_heads["dev"]
    newer = fleet.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await fleet.harvest()
    for name, cluster_type, environment in [
        ("drone-01", "drone", "dev"),
        ("drone-02", "drone", "dev"),
        ("large-01", "large", "dev"),
        ("drone-s1", "drone", "stage"),
    ]:
        cluster = await fleet.add(name, cluster_type, environment)
        cluster.run_platform(newer if environment == "dev" else fleet.platform_heads["stage"])
    fleet.clusters["drone-01"].run_platform(first)
    fleet.clusters["large-01"].run_platform(newer, ready=False, reason="SyncFailed")
    await fleet.report()
    await evaluate(session, clock)
    client.headers["Authorization"] = f"Bearer {read_token}"
    return fleet


def listed(body: dict) -> list[tuple[str, str | None, list[str]]]:
    return [
        (
            item["cluster"],
            None if item["object"] is None else item["object"]["name"],
            [reason["reason"] for reason in item["reasons"]],
        )
        for item in body["items"]
    ]


async def test_drift_with_reasons_totals_and_counts(
    fleet_with_drift: Fleet, client: httpx.AsyncClient
) -> None:
    response = await client.get("/api/v1/drift")

    assert response.status_code == 200, response.text
    body = response.json()
    assert listed(body) == [
        ("drone-01", ROOT, ["behind"]),
        ("large-01", ARGO_ROOT, ["failing"]),
    ]
    assert (body["total"], body["limit"], body["offset"]) == (2, 100, 0)
    summary = body["summary"]
    assert (summary["drifted_objects"], summary["drifted_clusters"]) == (2, 2)
    assert {name: count for name, count in summary["reasons"].items() if count} == {
        "behind": 1,
        "failing": 1,
    }
    assert [
        (row["environment"], row["objects"], row["clusters"]) for row in summary["environments"]
    ] == [("dev", 2, 2), ("stage", 0, 0)]
    behind = body["items"][0]["reasons"][0]
    assert behind["commits"] == 1
    assert body["items"][0]["desired"]["branch"] == "dev"


async def test_pages_and_filters(fleet_with_drift: Fleet, client: httpx.AsyncClient) -> None:
    second_page = (await client.get("/api/v1/drift", params={"limit": 1, "offset": 1})).json()
    failing = (await client.get("/api/v1/drift", params={"reason": "failing"})).json()
    either = (
        await client.get("/api/v1/drift", params={"reason": ["failing", "behind"], "limit": 1})
    ).json()
    everything = (
        await client.get("/api/v1/drift", params={"include_in_sync": "true", "limit": 2})
    ).json()
    stage = (
        await client.get(
            "/api/v1/drift", params={"include_in_sync": "true", "environment": "stage"}
        )
    ).json()
    drones = (await client.get("/api/v1/drift", params={"cluster_type": "drone"})).json()
    one = (await client.get("/api/v1/drift", params={"cluster": "large-01"})).json()

    assert (listed(second_page), second_page["total"]) == (
        [("large-01", ARGO_ROOT, ["failing"])],
        2,
    )
    assert (listed(failing), failing["total"]) == ([("large-01", ARGO_ROOT, ["failing"])], 1)
    assert failing["summary"]["reasons"]["behind"] == 0
    assert (listed(either), either["total"]) == ([("drone-01", ROOT, ["behind"])], 2)
    # Promotion order: dev before stage; in sync rows have no reasons.
    assert everything["total"] == 4
    assert listed(everything) == [("drone-01", ROOT, ["behind"]), ("drone-02", ROOT, [])]
    assert [env["environment"] for env in everything["summary"]["environments"]] == ["dev", "stage"]
    assert (listed(stage), stage["summary"]["drifted_objects"]) == ([("drone-s1", ROOT, [])], 0)
    assert listed(drones) == [("drone-01", ROOT, ["behind"])]
    assert listed(one) == [("large-01", ARGO_ROOT, ["failing"])]


@pytest.fixture
async def partly_silent(
    fleet_with_drift: Fleet,
    client: httpx.AsyncClient,
    clock: FakeClock,
    session: AsyncSession,
    admin_token: str,
) -> Fleet:
    """fleet_with_drift and a cluster placed nowhere, judged with the others; then two agents
    fall silent, and a cluster registered since the evaluation has never reported."""
    registered = await client.post(
        "/api/v1/clusters", json={"name": "lone"}, headers=bearer(admin_token)
    )
    assert registered.status_code == 201, registered.text
    await evaluate(session, clock)
    await fleet_with_drift.add("small-01", "small", "dev")
    clock.advance(minutes=11)
    await fleet_with_drift.report("drone-01", "large-01")
    return fleet_with_drift


@pytest.mark.usefixtures("partly_silent")
async def test_the_listing_without_filters_agrees_with_one_filtered_by_every_reason(
    client: httpx.AsyncClient,
) -> None:
    # Without filters the listing counts from the drift job's totals and adds staleness now;
    # filtered by reason it counts cluster by cluster.
    every = [reason.value for reason in Reason]

    for scope in ({}, {"environment": "dev"}, {"environment": "stage"}, {"cluster_type": "drone"}):
        plain = (await client.get("/api/v1/drift", params=scope)).json()
        filtered = (await client.get("/api/v1/drift", params=scope | {"reason": every})).json()
        pages = [
            (await client.get("/api/v1/drift", params=scope | {"limit": 1, "offset": at})).json()
            for at in range(plain["total"])
        ]

        assert plain["summary"] == filtered["summary"], scope
        assert listed(plain) == listed(filtered), scope
        assert [row for page in pages for row in listed(page)] == listed(plain), scope

    whole = (await client.get("/api/v1/drift")).json()
    assert [(cluster, reasons) for cluster, _, reasons in listed(whole)] == [
        ("drone-01", ["behind"]),
        ("drone-02", ["stale"]),
        ("large-01", ["failing"]),
        ("drone-s1", ["stale"]),
        ("lone", ["stale"]),
        # No rank before the next evaluation: last.
        ("small-01", ["stale"]),
    ]
    assert whole["summary"]["reasons"]["stale"] == 4
    assert [(row["environment"], row["objects"]) for row in whole["summary"]["environments"]] == [
        ("dev", 4),
        ("stage", 1),
        (None, 1),
    ]


def _since(item: dict[str, Any]) -> datetime | None:
    found = item["drifted_since"]
    return None if found is None else datetime.fromisoformat(found)


@pytest.mark.usefixtures("partly_silent")
@pytest.mark.parametrize(
    ("sort", "column"),
    [
        ("-cluster", lambda item: item["cluster"]),
        ("reasons", lambda item: [list(Reason).index(r["reason"]) for r in item["reasons"]]),
        ("-drifted_since", _since),
        (
            "object",
            lambda item: item["object"] and (item["object"]["kind"], item["object"]["name"]),
        ),
    ],
)
async def test_sorts_every_row_so_each_page_follows_the_last(
    client: httpx.AsyncClient, sort: str, column: Callable[[dict[str, Any]], Any]
) -> None:
    own = (await client.get("/api/v1/drift")).json()
    pages = [
        (await client.get("/api/v1/drift", params={"sort": sort, "limit": 2, "offset": at})).json()
        for at in range(0, own["total"], 2)
    ]

    # Ties keep the listing's own order, as a stable sort of it does; None comes last.
    known = [item for item in own["items"] if column(item) is not None]
    expected = sorted(known, key=column, reverse=sort.startswith("-")) + [
        item for item in own["items"] if column(item) is None
    ]
    assert len(pages) > 1
    assert listed({"items": expected}) != listed(own)
    assert [row for page in pages for row in listed(page)] == listed({"items": expected})
    assert all(page["summary"] == own["summary"] for page in pages)


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        ({"reason": "gone"}, "query.reason.0: Input should be 'behind', 'diverged', "),
        ({"limit": 0}, "query.limit: Input should be greater than or equal to 1"),
        ({"offset": -1}, "query.offset: Input should be greater than or equal to 0"),
        ({"include_in_sync": "maybe"}, "query.include_in_sync: Input should be a valid boolean"),
        (
            {"sort": "-size"},
            "query.sort: no column 'size' to sort by (columns: cluster, placement, object, "
            "drifted_since, reasons)",
        ),
    ],
)
async def test_bad_parameters_are_refused_naming_them(
    fleet_with_drift: Fleet, client: httpx.AsyncClient, params: dict, detail: str
) -> None:
    response = await client.get("/api/v1/drift", params=params)

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_input"
    assert response.json()["detail"].startswith(detail)


async def test_unknown_names_are_refused_clearly(
    fleet_with_drift: Fleet, client: httpx.AsyncClient
) -> None:
    environment = await client.get("/api/v1/drift", params={"environment": "qa"})
    cluster_type = await client.get(
        "/api/v1/drift", params={"environment": "stage", "cluster_type": "large"}
    )
    cluster = await client.get("/api/v1/drift/history", params={"cluster": "drone-99"})

    assert environment.status_code == 404
    assert environment.json() == {
        "error": "unknown_environment",
        "detail": "environment 'qa' is unknown (known: dev, stage)",
    }
    assert cluster_type.status_code == 404
    assert cluster_type.json()["detail"] == (
        "cluster type 'large' is unknown in environment 'stage' (known: drone)"
    )
    assert cluster.status_code == 404
    assert cluster.json() == {
        "error": "unknown_cluster",
        "detail": "cluster 'drone-99' is unknown (known: drone-01, drone-02, drone-s1, large-01)",
    }


async def test_history_over_http(
    fleet_with_drift: Fleet, session: AsyncSession, clock: FakeClock, client: httpx.AsyncClient
) -> None:
    opened_at = clock.now
    clock.advance(minutes=2)
    await evaluate(session, clock)

    response = await client.get("/api/v1/drift/history", params={"environment": "dev"})
    refused = await client.get(
        "/api/v1/drift/history",
        params={"since": "2026-11-22T12:00:00Z", "until": "2026-11-22T11:00:00Z"},
    )
    naive = await client.get("/api/v1/drift/history", params={"since": "2026-11-22T12:00:00"})
    level = await client.get("/api/v1/drift/history", params={"level": "pod"})

    assert response.status_code == 200, response.text
    body = response.json()
    assert [(item["cluster"], item["drifted_seconds"], item["open"]) for item in body["items"]] == [
        ("drone-01", 120.0, True),
        ("large-01", 120.0, True),
    ]
    assert body["items"][0]["periods"] == [
        {
            "started_at": opened_at.isoformat().replace("+00:00", "Z"),
            "ended_at": None,
            "seconds": 120.0,
            "reasons": ["behind"],
        }
    ]
    assert (body["total"], body["level"], body["since"]) == (2, "cluster", None)
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("since: 2026-11-22T12:00:00+00:00 is not before")
    assert naive.status_code == 422
    assert naive.json()["detail"].startswith("query.since: Input should have timezone info")
    assert level.status_code == 422
    assert level.json()["detail"].startswith("query.level: Input should be 'cluster' or 'object'")


async def test_drift_needs_a_read_token(fleet_with_drift: Fleet, client: httpx.AsyncClient) -> None:
    del client.headers["Authorization"]

    assert (await client.get("/api/v1/drift")).status_code == 401
    assert (await client.get("/api/v1/drift/history")).status_code == 401
