"""Full snapshots in parts: the hub applies a snapshot sent in several reports as one."""

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.ingest.repository import SNAPSHOT_PARTS_PER_CLUSTER
from hub.ingest.schemas import MAX_SNAPSHOT_PARTS
from tests.conftest import MakeClient
from tests.support import SHA_A, SHA_B, Agent, FakeClock, Store, bearer, kustomization, report

V1 = f"dev@sha1:{SHA_A}"
V2 = f"dev@sha1:{SHA_B}"
FLEET = ("a", "b", "c", "d", "e")


def part(index: int, count: int = 3, snapshot: str = "snap-1") -> dict[str, Any]:
    return {"id": snapshot, "index": index, "count": count}


async def removed(agent: Agent, store: Store) -> set[str]:
    objects = await store.objects(agent.cluster)
    return {name for name, row in objects.items() if row["removed_at"] is not None}


@pytest.fixture
async def fleet(agent: Agent, clock: FakeClock) -> Agent:
    """A cluster whose five objects the hub has from an ordinary full snapshot."""
    await agent.send_ok([kustomization(name, V1) for name in FLEET], full_snapshot=True)
    clock.advance(minutes=5)
    return agent


async def test_an_object_missing_from_every_part_is_removed_after_the_last_part(
    fleet: Agent, store: Store, clock: FakeClock
) -> None:
    # "e" is gone from the cluster; the snapshot comes in three parts.
    first = await fleet.send_ok(
        [kustomization("a", V2), kustomization("b", V1)], snapshot_part=part(0)
    )
    second = await fleet.send_ok([kustomization("c", V1)], snapshot_part=part(1))

    assert (first["accepted"], first["changed"], second["changed"]) == (2, 1, 0)
    objects = await store.objects(fleet.cluster)
    assert objects["a"]["applied_revision"] == V2, "a part's records apply at once"
    assert await removed(fleet, store) == set()

    last = await fleet.send_ok([kustomization("d", V1)], snapshot_part=part(2))

    assert last == {"accepted": 1, "changed": 1, "duplicate": False, "warnings": []}
    assert await removed(fleet, store) == {"e"}
    assert (await store.objects(fleet.cluster))["e"]["removed_at"] == clock.now
    removal = (await store.transitions(fleet.cluster))[-1]
    assert (removal["name"], removal["removed"]) == ("e", True)
    assert await store.snapshot_parts(fleet.cluster) == []


async def test_a_snapshot_with_a_part_lost_removes_nothing(
    fleet: Agent, store: Store, clock: FakeClock
) -> None:
    await fleet.send_ok([kustomization("a", V1), kustomization("b", V1)], snapshot_part=part(0))
    # Part 1 never arrives.
    await fleet.send_ok([kustomization("d", V1)], snapshot_part=part(2))

    assert await removed(fleet, store) == set()

    # The next snapshot comes whole; the one left open is dropped with it.
    clock.advance(minutes=5)
    await fleet.send_ok(
        [kustomization("a", V1), kustomization("b", V1)], snapshot_part=part(0, 2, "snap-2")
    )
    await fleet.send_ok([kustomization("c", V1)], snapshot_part=part(1, 2, "snap-2"))

    assert await removed(fleet, store) == {"d", "e"}
    assert await store.snapshot_parts(fleet.cluster) == []


async def test_a_replayed_part_is_a_duplicate_and_removes_nothing(
    fleet: Agent, store: Store
) -> None:
    await fleet.send_ok([kustomization("a", V1)], snapshot_part=part(0))
    await fleet.send_ok([kustomization("b", V1)], snapshot_part=part(1))

    # The agent sends part 1 again (its reply was lost), then part 0: both are duplicates.
    again = await fleet.send_ok([kustomization("b", V1)], sequence=3, snapshot_part=part(1))
    first = await fleet.send_ok([kustomization("a", V1)], sequence=2, snapshot_part=part(0))

    assert (again["duplicate"], first["duplicate"]) == (True, True)
    assert await removed(fleet, store) == set()
    assert await store.snapshot_parts(fleet.cluster) == [("snap-1", 0), ("snap-1", 1)]

    await fleet.send_ok([kustomization("c", V1)], sequence=4, snapshot_part=part(2))
    assert await removed(fleet, store) == {"d", "e"}
    replay = await fleet.send_ok([kustomization("c", V1)], sequence=4, snapshot_part=part(2))
    assert replay["duplicate"] is True
    assert await store.snapshot_parts(fleet.cluster) == []


async def test_parts_out_of_order_complete_with_the_last_to_arrive(
    fleet: Agent, store: Store
) -> None:
    await fleet.send_ok([kustomization("e", V1)], snapshot_part=part(2))
    await fleet.send_ok([kustomization("a", V1)], snapshot_part=part(0))
    assert await removed(fleet, store) == set()

    await fleet.send_ok([kustomization("c", V1)], snapshot_part=part(1))

    assert await removed(fleet, store) == {"b", "d"}


async def test_an_object_changed_after_the_first_part_is_kept(
    fleet: Agent, store: Store, clock: FakeClock
) -> None:
    snapshot_at = clock.now
    await fleet.send_ok(
        [kustomization(name, V1) for name in ("a", "b", "c")],
        snapshot_part=part(0, 2),
        observed_at=snapshot_at,
    )
    # A newer change report names "d" before the snapshot's last part arrives.
    clock.advance(seconds=30)
    await fleet.send_ok([kustomization("d", V2)])
    await fleet.send_ok([], snapshot_part=part(1, 2), observed_at=snapshot_at)

    assert await removed(fleet, store) == {"e"}
    assert (await store.objects(fleet.cluster))["e"]["removed_at"] == snapshot_at


async def test_a_restarted_agent_starts_a_new_snapshot_and_the_old_one_never_completes(
    fleet: Agent, store: Store, clock: FakeClock
) -> None:
    await fleet.send_ok([kustomization("a", V1)], snapshot_part=part(0, 2, "old"))
    clock.advance(minutes=1)
    fleet.boot_id, fleet.sequence = "boot-2", 0
    await fleet.send_ok(
        [kustomization(name, V1) for name in ("a", "b", "c")], snapshot_part=part(0, 2, "new")
    )
    await fleet.send_ok([kustomization("d", V1)], snapshot_part=part(1, 2, "new"))

    assert await removed(fleet, store) == {"e"}
    assert await store.snapshot_parts(fleet.cluster) == []

    # The old boot's last part turns up late: its snapshot is gone, so it removes nothing.
    fleet.boot_id, fleet.sequence = "boot-1", 2
    await fleet.send_ok([], snapshot_part=part(1, 2, "old"), observed_at=clock.now)
    assert await removed(fleet, store) == {"e"}


async def test_parts_older_than_an_hour_do_not_complete_a_snapshot(
    fleet: Agent, store: Store, clock: FakeClock
) -> None:
    observed_at = clock.now
    await fleet.send_ok([kustomization("a", V1)], snapshot_part=part(0, 2))
    clock.advance(minutes=61)

    await fleet.send_ok([kustomization("b", V1)], snapshot_part=part(1, 2), observed_at=observed_at)

    assert await removed(fleet, store) == set()
    assert await store.snapshot_parts(fleet.cluster) == [("snap-1", 1)]


async def _open_snapshot(
    session: AsyncSession, cluster: str, snapshot: str, parts: int, received_at: datetime
) -> None:
    """`parts` parts of a snapshot of MAX_SNAPSHOT_PARTS, as if sent at `received_at`."""
    await session.execute(
        text(
            "INSERT INTO snapshot_part (cluster_id, snapshot_id, part_index, part_count, "
            "observed_at, received_at, keys) "
            "SELECT c.id, :snapshot, n, :count, :at, :at, '[]' "
            "FROM cluster c, generate_series(0, :parts - 1) AS n WHERE c.name = :cluster"
        ),
        {
            "cluster": cluster,
            "snapshot": snapshot,
            "parts": parts,
            "count": MAX_SNAPSHOT_PARTS,
            "at": received_at,
        },
    )
    await session.commit()


async def _parts_kept(store: Store, cluster: str) -> dict[str, int]:
    return dict(Counter(snapshot for snapshot, _ in await store.snapshot_parts(cluster)))


async def test_a_part_past_the_clusters_bound_drops_the_oldest_open_snapshot(
    fleet: Agent, store: Store, session: AsyncSession, clock: FakeClock
) -> None:
    bound = SNAPSHOT_PARTS_PER_CLUSTER
    oldest, newer = bound // 2, bound // 2 - 1
    await _open_snapshot(
        session, fleet.cluster, "oldest", oldest, clock.now - timedelta(minutes=40)
    )
    await _open_snapshot(session, fleet.cluster, "newer", newer, clock.now - timedelta(minutes=20))

    await fleet.send_ok([kustomization("a", V1)], snapshot_part=part(0))
    assert await _parts_kept(store, fleet.cluster) == {
        "oldest": oldest,
        "newer": newer,
        "snap-1": 1,
    }

    # One part more than the bound: the snapshot sent least recently goes, whole.
    await fleet.send_ok([kustomization("b", V1)], snapshot_part=part(1))
    assert await _parts_kept(store, fleet.cluster) == {"newer": newer, "snap-1": 2}
    assert (await store.objects(fleet.cluster))["b"]["applied_revision"] == V1

    await fleet.send_ok([kustomization("c", V1)], snapshot_part=part(2))
    assert await removed(fleet, store) == {"d", "e"}
    assert await _parts_kept(store, fleet.cluster) == {}


async def test_decommissioning_drops_the_clusters_open_snapshots(
    fleet: Agent, store: Store, admin_token: str
) -> None:
    await fleet.send_ok([kustomization("a", V1)], snapshot_part=part(0))

    response = await fleet.client.post(
        f"/api/v1/clusters/{fleet.cluster}/decommission", headers=bearer(admin_token)
    )

    assert response.status_code == 200, response.text
    assert await store.snapshot_parts(fleet.cluster) == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"full_snapshot": True, "snapshot_part": part(0)}, "full_snapshot must be false"),
        ({"snapshot_part": part(3)}, "index 3 is not below count 3"),
        ({"snapshot_part": {"id": "", "index": 0, "count": 1}}, "snapshot_part.id"),
        ({"snapshot_part": {"id": "s", "index": 0, "count": 0}}, "snapshot_part.count"),
    ],
)
async def test_a_part_that_breaks_the_contract_is_refused(
    agent: Agent, store: Store, fields: dict[str, Any], message: str
) -> None:
    body = report(agent.cluster, sequence=1, observed_at=agent.clock.now) | fields

    response = await agent.client.post("/api/v1/reports", json=body, headers=bearer(agent.token))

    assert response.status_code == 422
    assert message in response.json()["detail"]
    assert await store.agent_sessions(agent.cluster) == {}


async def test_every_reply_states_the_hubs_body_limit(
    make_client: MakeClient, agent: Agent
) -> None:
    agent.client = await make_client(max_report_bytes=4096)

    taken = await agent.send([kustomization("a")])
    too_large = await agent.send([kustomization("a", message="x" * 4096)])

    assert taken.status_code == 200
    assert taken.headers["X-Fleetmark-Max-Report-Bytes"] == "4096"
    assert too_large.status_code == 413
    assert too_large.headers["X-Fleetmark-Max-Report-Bytes"] == "4096"
