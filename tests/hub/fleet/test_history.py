"""GET /api/v1/history: every change of an applied revision per cluster and object."""

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.fleet import repository
from tests.conftest import MakeAgent
from tests.support import (
    PLATFORM_REPO,
    SHA_A,
    SHA_B,
    SHA_C,
    START,
    FakeClock,
    Store,
    bearer,
    kustomization,
)

V1 = f"dev@sha1:{SHA_A}"
V2 = f"dev@sha1:{SHA_B}"
V3 = f"dev@sha1:{SHA_C}"
APP = "hello-world-app-functional-test"


def at(minutes: int) -> datetime:
    return START + timedelta(minutes=minutes)


def helm_release(name: str, version: str, **fields: Any) -> dict[str, Any]:
    return kustomization(name, version, kind="HelmRelease", namespace="apps", **fields)


async def history(client: httpx.AsyncClient, token: str, **params: Any) -> dict[str, Any]:
    response = await client.get("/api/v1/history", params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def summary(page: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            datetime.fromisoformat(item["deployed_at"]),
            item["cluster"],
            item["name"],
            item["applied_sha"] or item["applied_version"],
            item["previous_sha"] or item["previous_version"],
        )
        for item in page["items"]
    ]


@pytest.fixture
async def deployments(make_agent: MakeAgent, clock: FakeClock) -> None:
    """dev: an app moves V1 -> V2 on drone-dev-1, a Helm chart 6.5.3 -> 6.5.4 on large-dev-1;
    stage: the app arrives at V1 on drone-stage-1. Other state changes happen in between."""
    drone = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")
    large = await make_agent("large-dev-1", environment="dev", cluster_type="large")
    stage = await make_agent("drone-stage-1", environment="stage", cluster_type="drone")

    await drone.send_ok([kustomization(APP, V1)])
    clock.advance(minutes=1)
    await drone.send_ok([kustomization(APP, V1, ready=False, reason="HealthCheckFailed")])
    await large.send_ok([helm_release("podinfo", "6.5.3")])
    clock.advance(minutes=1)
    await drone.send_ok([kustomization(APP, V2)])
    clock.advance(minutes=1)
    await drone.send_ok([kustomization(APP, V2, message="reconciled again")])
    clock.advance(minutes=1)
    await large.send_ok([helm_release("podinfo", "6.5.4", ready=None)])
    clock.advance(minutes=1)
    stage_source = {"url": PLATFORM_REPO, "ref": "stage", "path": f"drone/{APP}"}
    await stage.send_ok([kustomization(APP, V1, source=stage_source)])


EVERYTHING = [
    (at(5), "drone-stage-1", APP, SHA_A, None),
    (at(4), "large-dev-1", "podinfo", "6.5.4", "6.5.3"),
    (at(2), "drone-dev-1", APP, SHA_B, SHA_A),
    (at(1), "large-dev-1", "podinfo", "6.5.3", None),
    (at(0), "drone-dev-1", APP, SHA_A, None),
]


@pytest.mark.usefixtures("deployments")
async def test_lists_every_applied_revision_change_newest_first(
    client: httpx.AsyncClient, read_token: str
) -> None:
    page = await history(client, read_token)

    assert summary(page) == EVERYTHING
    assert (page["limit"], page["offset"], page["next_offset"]) == (100, 0, None)
    upgrade = page["items"][2]
    assert upgrade == {
        "deployed_at": upgrade["deployed_at"],
        "cluster": "drone-dev-1",
        "environment": "dev",
        "cluster_type": "drone",
        "reconciler": "flux",
        "kind": "Kustomization",
        "namespace": "flux-system",
        "name": APP,
        "source_url": "https://github.com/contoso/platform-gitops",
        "source_ref": "dev",
        "source_path": f"drone/{APP}",
        "applied_revision": V2,
        "applied_sha": SHA_B,
        "applied_version": None,
        "previous_revision": V1,
        "previous_sha": SHA_A,
        "previous_version": None,
        "ready": True,
        "reason": "ReconciliationSucceeded",
    }
    chart = page["items"][1]
    assert (chart["kind"], chart["applied_revision"], chart["previous_revision"]) == (
        "HelmRelease",
        "6.5.4",
        "6.5.3",
    )
    assert (chart["environment"], chart["cluster_type"], chart["ready"]) == ("dev", "large", None)
    assert page["items"][0]["source_ref"] == "stage"


@pytest.mark.usefixtures("deployments")
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"environment": "stage"}, [EVERYTHING[0]]),
        ({"environment": "dev"}, EVERYTHING[1:]),
        ({"cluster_type": "drone"}, [EVERYTHING[0], EVERYTHING[2], EVERYTHING[4]]),
        ({"environment": "dev", "cluster_type": "drone"}, [EVERYTHING[2], EVERYTHING[4]]),
        ({"cluster": "large-dev-1"}, [EVERYTHING[1], EVERYTHING[3]]),
        ({"object": APP}, [EVERYTHING[0], EVERYTHING[2], EVERYTHING[4]]),
        ({"cluster": "drone-dev-1", "object": "podinfo"}, []),
        ({"since": at(2).isoformat()}, EVERYTHING[:3]),
        ({"until": at(2).isoformat()}, EVERYTHING[3:]),
        ({"since": at(1).isoformat(), "until": at(4).isoformat()}, EVERYTHING[2:4]),
    ],
)
async def test_filters(
    client: httpx.AsyncClient,
    read_token: str,
    params: dict[str, str],
    expected: list[tuple[Any, ...]],
) -> None:
    assert summary(await history(client, read_token, **params)) == expected


@pytest.mark.usefixtures("deployments")
@pytest.mark.parametrize(
    ("params", "error", "detail"),
    [
        ({"environment": "prod"}, "unknown_environment", "environment 'prod' is unknown ("),
        (
            {"cluster": "no-such-cluster"},
            "unknown_cluster",
            "cluster 'no-such-cluster' is unknown (",
        ),
    ],
)
async def test_an_unknown_name_is_404_naming_those_known(
    client: httpx.AsyncClient, read_token: str, params: dict[str, str], error: str, detail: str
) -> None:
    response = await client.get("/api/v1/history", params=params, headers=bearer(read_token))

    assert response.status_code == 404
    assert response.json()["error"] == error
    assert response.json()["detail"].startswith(detail)


@pytest.mark.usefixtures("deployments")
@pytest.mark.parametrize("listed", [0, 1])
async def test_an_object_name_on_many_objects_filters_alike(
    client: httpx.AsyncClient, read_token: str, monkeypatch: pytest.MonkeyPatch, listed: int
) -> None:
    # Past the number of objects listed by id, the name's ids stay in the database.
    monkeypatch.setattr(repository, "_LISTED_OBJECTS", listed)
    assert summary(await history(client, read_token, object=APP)) == [
        EVERYTHING[0],
        EVERYTHING[2],
        EVERYTHING[4],
    ]
    page = await history(client, read_token, object=APP, cluster="drone-dev-1", limit=1, offset=1)
    assert summary(page) == [EVERYTHING[4]]
    assert summary(await history(client, read_token, object="no-such-object")) == []


@pytest.mark.usefixtures("deployments")
async def test_pages(client: httpx.AsyncClient, read_token: str) -> None:
    seen = []
    offset: int | None = 0
    offsets = []
    while offset is not None:
        offsets.append(offset)
        page = await history(client, read_token, limit=2, offset=offset)
        seen.extend(summary(page))
        offset = page["next_offset"]

    assert offsets == [0, 2, 4]
    assert seen == EVERYTHING


async def test_gaps_and_returns_are_not_deployments(
    make_agent: MakeAgent, read_token: str, clock: FakeClock
) -> None:
    agent = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")
    # Reconciling its first revision: nothing applied yet, so nothing deployed.
    await agent.send_ok([kustomization(APP, applied_revision=None, ready=None)])
    clock.advance(minutes=1)
    await agent.send_ok([kustomization(APP, V1)], full_snapshot=True)
    clock.advance(minutes=1)
    # The reconciler loses its status for a while, then reports V1 again.
    await agent.send_ok([kustomization(APP, applied_revision=None, ready=None)])
    clock.advance(minutes=1)
    await agent.send_ok([kustomization(APP, V1)])
    clock.advance(minutes=1)
    # The object leaves the cluster and comes back at the same revision.
    await agent.send_ok([], full_snapshot=True)
    clock.advance(minutes=1)
    await agent.send_ok([kustomization(APP, V1)], full_snapshot=True)
    clock.advance(minutes=1)
    await agent.send_ok([kustomization(APP, V2)], full_snapshot=True)

    page = await history(agent.client, read_token)

    assert summary(page) == [
        (at(6), "drone-dev-1", APP, SHA_B, SHA_A),
        (at(1), "drone-dev-1", APP, SHA_A, None),
    ]


async def lookup_scans(session: AsyncSession) -> int:
    """How many times reading the whole history scanned for a previous revision."""
    plan = await session.scalar(
        text("EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM deployment_history")
    )
    assert plan is not None

    def scans(node: dict[str, Any]) -> int:
        own = node["Actual Loops"] if node.get("Alias") == "s" else 0
        return own + sum(scans(child) for child in node.get("Plans", []))

    return scans(plan[0]["Plan"])


async def test_transitions_record_the_revision_they_change_from_where_the_history_agrees(
    make_agent: MakeAgent, read_token: str, clock: FakeClock, store: Store, session: AsyncSession
) -> None:
    agent = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")
    chart = "podinfo"
    await agent.send_ok([kustomization(APP, V1)])
    clock.advance(minutes=1)
    await agent.send_ok(
        [
            kustomization(APP, V1, ready=False, reason="HealthCheckFailed"),
            helm_release(chart, "6.5.3"),
        ]
    )
    clock.advance(minutes=1)
    await agent.send_ok([kustomization(APP, V2)])
    clock.advance(minutes=1)
    await agent.send_ok([helm_release(chart, "6.5.4")])
    clock.advance(minutes=1)
    # The app leaves the cluster and comes back at the revision it had.
    await agent.send_ok([helm_release(chart, "6.5.4")], full_snapshot=True)
    clock.advance(minutes=1)
    await agent.send_ok([kustomization(APP, V2), helm_release(chart, "6.5.4")], full_snapshot=True)
    clock.advance(minutes=1)
    # The reconciler loses its status, then reports a rollback to V1.
    await agent.send_ok([kustomization(APP, applied_revision=None, ready=None)])
    clock.advance(minutes=1)
    await agent.send_ok([kustomization(APP, V1)])
    clock.advance(minutes=2)
    # A spooled report arrives after a newer one: its state of the app is older than the one
    # stored, its new object is taken.
    await agent.send_ok([kustomization(APP, V3)], sequence=agent.sequence + 2)
    await agent.send_ok(
        [kustomization(APP, V2), kustomization("late", V1)],
        sequence=agent.sequence + 1,
        observed_at=at(8),
    )

    expected = [
        (at(9), "drone-dev-1", APP, SHA_C, SHA_A),
        (at(8), "drone-dev-1", "late", SHA_A, None),
        (at(7), "drone-dev-1", APP, SHA_A, SHA_B),
        (at(3), "drone-dev-1", chart, "6.5.4", "6.5.3"),
        (at(2), "drone-dev-1", APP, SHA_B, SHA_A),
        (at(1), "drone-dev-1", chart, "6.5.3", None),
        (at(0), "drone-dev-1", APP, SHA_A, None),
    ]
    assert summary(await history(agent.client, read_token)) == expected
    recorded = {
        (t["observed_at"], t["name"]): t["previous_sha"] or t["previous_version"]
        for t in await store.transitions(agent.cluster)
        if t["previous_recorded"]
    }
    # Not recorded: the first states, the removal and the return, and the change from no
    # applied revision, whose previous one the history holds further back.
    assert recorded == {
        (at(1), APP): SHA_A,
        (at(2), APP): SHA_A,
        (at(3), chart): "6.5.3",
        (at(6), APP): SHA_B,
        (at(9), APP): SHA_A,
    }
    # Only the changes that carry an applied revision and no recorded previous one look it up.
    assert await lookup_scans(session) == 6

    # Looked up everywhere, as before the transitions recorded it, the history is the same.
    await session.execute(text("UPDATE status_transition SET previous_recorded = NULL"))
    await session.commit()
    assert summary(await history(agent.client, read_token)) == expected
    assert await lookup_scans(session) == 10


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        (
            {"since": at(2).isoformat(), "until": at(1).isoformat()},
            f"since: {at(2).isoformat()} is not before until {at(1).isoformat()}",
        ),
        (
            {"since": at(1).isoformat(), "until": at(1).isoformat()},
            f"since: {at(1).isoformat()} is not before until {at(1).isoformat()}",
        ),
        ({"since": "2026-11-22T12:00:00"}, "query.since: Input should have timezone info"),
        ({"until": "yesterday"}, "query.until: Input should be a valid datetime"),
        ({"limit": 0}, "query.limit: Input should be greater than or equal to 1"),
        ({"offset": -1}, "query.offset: Input should be greater than or equal to 0"),
    ],
    ids=["reversed", "empty", "naive-since", "unparsable-until", "zero-limit", "negative-offset"],
)
async def test_refuses_bad_filters_naming_them(
    client: httpx.AsyncClient, read_token: str, params: dict[str, Any], detail: str
) -> None:
    response = await client.get("/api/v1/history", params=params, headers=bearer(read_token))

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_input"
    assert response.json()["detail"].startswith(detail)


async def test_needs_a_read_token(client: httpx.AsyncClient, admin_token: str) -> None:
    assert (await client.get("/api/v1/history")).status_code == 401
    response = await client.get("/api/v1/history", headers=bearer(admin_token))
    assert response.status_code == 200
