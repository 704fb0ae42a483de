"""The fleet's object counts per cluster, kept as object_state changes (migration 0019), are
the counts of the objects themselves: after ingest, changes, removals, returns, snapshots in
parts, a token rotated and a cluster deleted."""

from typing import Any

import httpx
import pytest
from sqlalchemy import delete, text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import Cluster
from tests.conftest import MakeAgent
from tests.support import SHA_A, SHA_B, Agent, FakeClock, bearer, kustomization

V1 = f"dev@sha1:{SHA_A}"
V2 = f"dev@sha1:{SHA_B}"

# The live answer, counted from the objects as fleet_cluster_state counted them before 0019.
LIVE = text("""
    SELECT o.cluster_id, count(*) AS objects,
           count(*) FILTER (WHERE NOT o.suspended AND o.ready) AS ready,
           count(*) FILTER (WHERE NOT o.suspended AND NOT o.ready) AS failing,
           count(*) FILTER (WHERE NOT o.suspended AND o.ready IS NULL) AS progressing,
           count(*) FILTER (WHERE o.suspended) AS suspended,
           count(*) FILTER (WHERE o.drifted) AS drifted
    FROM object_state o WHERE o.removed_at IS NULL
    GROUP BY o.cluster_id
""")
KEPT = text("""
    SELECT cluster_id, objects, ready, failing, progressing, suspended, drifted
    FROM cluster_object_count
    WHERE (objects, ready, failing, progressing, suspended, drifted) <> (0, 0, 0, 0, 0, 0)
""")


async def rows(session: AsyncSession, query: Any) -> set[tuple[int, ...]]:
    return {tuple(row) for row in (await session.execute(query)).all()}


async def assert_kept(session: AsyncSession) -> None:
    assert await rows(session, KEPT) == await rows(session, LIVE)


async def dev_objects(client: httpx.AsyncClient, token: str) -> dict[str, int]:
    response = await client.get("/api/v1/fleet", headers=bearer(token))
    assert response.status_code == 200, response.text
    counts: dict[str, int] = response.json()["totals"]["objects"]
    return counts


@pytest.fixture
async def drone(make_agent: MakeAgent) -> Agent:
    drone = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")
    await drone.send_ok(
        [
            kustomization("app", V1),
            kustomization("infra", V1, ready=False, reason="BuildFailed"),
            kustomization("monitoring", V1, ready=None, reason="Progressing"),
            kustomization("paused", V1, ready=False, suspended=True),
            kustomization("hand-edited", V1, drifted=True),
        ],
        full_snapshot=True,
    )
    return drone


async def test_counts_follow_changes_removals_and_returns(
    drone: Agent,
    make_agent: MakeAgent,
    session: AsyncSession,
    client: httpx.AsyncClient,
    read_token: str,
    clock: FakeClock,
) -> None:
    large = await make_agent("large-dev-1", environment="dev", cluster_type="large")
    await large.send_ok([kustomization("app", V1), kustomization("infra", V1)])
    await assert_kept(session)
    before = await dev_objects(client, read_token)
    assert (before["total"], before["ready"], before["failing"]) == (7, 4, 1)

    clock.advance(minutes=1)
    # infra recovers, app fails, monitoring drifts; the rest stays as it was.
    await drone.send_ok(
        [
            kustomization("infra", V2),
            kustomization("app", V2, ready=False, reason="HealthCheckFailed"),
            kustomization("monitoring", V1, ready=None, reason="Progressing", drifted=True),
        ]
    )
    await assert_kept(session)

    clock.advance(minutes=1)
    # A full snapshot without paused and hand-edited removes them.
    await drone.send_ok(
        [
            kustomization("infra", V2),
            kustomization("app", V2, ready=False, reason="HealthCheckFailed"),
            kustomization("monitoring", V1, ready=None, reason="Progressing", drifted=True),
        ],
        full_snapshot=True,
    )
    await assert_kept(session)
    after = await dev_objects(client, read_token)
    assert (after["total"], after["suspended"], after["drifted"]) == (5, 0, 1)

    clock.advance(minutes=1)
    # hand-edited comes back, now Ready and no longer drifted.
    await drone.send_ok([kustomization("hand-edited", V2)])
    await assert_kept(session)
    assert (await dev_objects(client, read_token))["total"] == 6


async def test_counts_follow_a_snapshot_in_parts(
    drone: Agent, session: AsyncSession, clock: FakeClock
) -> None:
    clock.advance(minutes=1)
    names = ("app", "infra", "monitoring")
    for index, name in enumerate(names):
        part = {"id": "snap-1", "index": index, "count": len(names)}
        await drone.send_ok([kustomization(name, V2)], snapshot_part=part)
        await assert_kept(session)

    kept = await rows(session, KEPT)
    assert [row[1:] for row in kept] == [(3, 3, 0, 0, 0, 0)]


async def test_counts_survive_a_new_token_and_go_with_a_deleted_cluster(
    drone: Agent,
    make_agent: MakeAgent,
    session: AsyncSession,
    client: httpx.AsyncClient,
    admin_token: str,
    clock: FakeClock,
) -> None:
    response = await client.post(
        f"/api/v1/clusters/{drone.cluster}/token", headers=bearer(admin_token)
    )
    assert response.status_code == 200, response.text
    drone.token = response.json()["token"]
    clock.advance(minutes=1)
    await drone.send_ok([kustomization("paused", V1, ready=True)])
    await assert_kept(session)

    other = await make_agent("drone-dev-2", environment="dev", cluster_type="drone")
    await other.send_ok([kustomization("app", V1)])
    await session.execute(delete(Cluster).where(Cluster.name == drone.cluster))
    await assert_kept(session)
    assert len(await rows(session, KEPT)) == 1
