"""Reports that cross into new chunks of the history while others are being applied all land.

On TimescaleDB a chunk is created by the first row of its time range. When the history tables
had foreign keys, creating a chunk locked the `cluster` table against the concurrent reports
that had written cluster rows, and one side deadlocked (HTTP 500) at every chunk boundary.
Here the chunks are a minute wide and every round of concurrent reports starts a new one; the
history's integrity (a transition names an object of its cluster, deleting a cluster deletes
its history) still holds. On plain PostgreSQL the same reports run without chunks. A report
that waits for another of the same object records, as the revision it changed from, the one
the other left.
"""

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, create_async_engine

from hub.app import create_app
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.support import (
    SHA_A,
    SHA_B,
    SHA_C,
    START,
    bearer,
    blocked_backends,
    kustomization,
    report,
)

CLUSTERS = 6
ROUNDS = 5
WORKERS = 3


@pytest.fixture
def own_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@pytest.fixture
async def admin(own_database: str) -> AsyncIterator[AsyncConnection]:
    engine = create_async_engine(own_database, isolation_level="AUTOCOMMIT")
    async with engine.connect() as connection:
        yield connection
    await engine.dispose()


@pytest.fixture
async def workers(own_database: str) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Hub workers of their own pools, as replicas behind a load balancer."""
    clients: list[httpx.AsyncClient] = []
    apps = [create_app(hub_settings(), own_database) for _ in range(WORKERS)]
    lifespans = [app.router.lifespan_context(app) for app in apps]
    for app, lifespan in zip(apps, lifespans, strict=True):
        await lifespan.__aenter__()
        transport = httpx.ASGITransport(app=app)
        clients.append(httpx.AsyncClient(transport=transport, base_url="http://hub.test"))
    yield clients
    for client, lifespan in zip(clients, lifespans, strict=True):
        await client.aclose()
        await lifespan.__aexit__(None, None, None)


async def timescaledb(admin: AsyncConnection) -> bool:
    query = text("SELECT 1 FROM timescaledb_information.hypertables LIMIT 1")
    extension = text("SELECT 1 FROM pg_extension WHERE extname = 'timescaledb'")
    return (await admin.scalar(extension)) is not None and (await admin.scalar(query)) == 1


async def chunks(admin: AsyncConnection) -> int:
    query = text("SELECT count(*) FROM show_chunks('status_transition')")
    return int(await admin.scalar(query) or 0)


async def register(admin: AsyncConnection, name: str) -> str:
    registered = await cluster_service.register(
        AsyncSession(bind=admin),
        ClusterRegistration(name=name, environment="dev", cluster_type="drone"),
        token_secret=TOKEN_SECRET,
    )
    return registered.token


async def test_concurrent_reports_across_chunk_boundaries_all_land(
    admin: AsyncConnection, workers: list[httpx.AsyncClient]
) -> None:
    on_timescaledb = await timescaledb(admin)
    if on_timescaledb:
        await admin.execute(
            text("SELECT set_chunk_time_interval('status_transition', INTERVAL '1 minute')")
        )
    tokens = {f"drone-{n:02d}": await register(admin, f"drone-{n:02d}") for n in range(CLUSTERS)}

    async def send(index: int, cluster: str, round_: int) -> httpx.Response:
        revision = f"dev@sha1:{(SHA_A, SHA_B)[round_ % 2]}"
        body = report(
            cluster,
            sequence=round_ + 1,
            # Each round a minute later: the first row of each round opens a new chunk.
            observed_at=START + timedelta(minutes=round_, seconds=index),
            objects=[kustomization(f"app-{n}", revision) for n in range(4)],
        )
        worker = workers[index % WORKERS]
        return await worker.post("/api/v1/reports", json=body, headers=bearer(tokens[cluster]))

    statuses = []
    for round_ in range(ROUNDS):
        replies = await asyncio.gather(
            *(send(index, cluster, round_) for index, cluster in enumerate(tokens))
        )
        statuses += [reply.status_code for reply in replies]

    assert statuses == [200] * CLUSTERS * ROUNDS
    transitions = await admin.scalar(text("SELECT count(*) FROM status_transition"))
    assert transitions == CLUSTERS * ROUNDS * 4
    if on_timescaledb:
        assert await chunks(admin) >= ROUNDS


async def test_a_report_that_waited_for_another_records_the_revision_that_one_left(
    own_database: str, admin: AsyncConnection, workers: list[httpx.AsyncClient]
) -> None:
    token = await register(admin, "drone-01")

    async def send(worker: int, sequence: int, minutes: int, sha: str) -> httpx.Response:
        body = report(
            "drone-01",
            sequence=sequence,
            observed_at=START + timedelta(minutes=minutes),
            objects=[kustomization("app", f"dev@sha1:{sha}")],
        )
        return await workers[worker].post("/api/v1/reports", json=body, headers=bearer(token))

    assert (await send(0, 1, 0, SHA_A)).status_code == 200
    # Both next reports take their snapshot while the object is held, at SHA_A; the later
    # one applies after the earlier one has moved it to SHA_B.
    engine = create_async_engine(own_database)
    try:
        async with engine.connect() as holder, holder.begin():
            await holder.execute(text("SELECT 1 FROM object_state FOR UPDATE"))
            earlier = asyncio.create_task(send(0, 2, 1, SHA_B))
            await blocked_backends(own_database, 1)
            later = asyncio.create_task(send(1, 3, 2, SHA_C))
            await blocked_backends(own_database, 2)
        assert [(await earlier).status_code, (await later).status_code] == [200, 200]
    finally:
        await engine.dispose()

    recorded = await admin.execute(
        text(
            "SELECT applied_sha, previous_sha FROM status_transition "
            "WHERE previous_recorded ORDER BY observed_at"
        )
    )
    assert recorded.all() == [(SHA_B, SHA_A), (SHA_C, SHA_B)]


async def test_the_history_keeps_to_its_objects_and_clusters(
    admin: AsyncConnection, workers: list[httpx.AsyncClient]
) -> None:
    tokens = {name: await register(admin, name) for name in ("drone-01", "drone-02")}
    for name, token in tokens.items():
        body = report(name, sequence=1, observed_at=START, objects=[kustomization("app")])
        reply = await workers[0].post("/api/v1/reports", json=body, headers=bearer(token))
        assert reply.status_code == 200, reply.text
    first = await admin.scalar(text("SELECT id FROM cluster WHERE name = 'drone-01'"))
    second = await admin.scalar(text("SELECT id FROM cluster WHERE name = 'drone-02'"))
    object_of_second = await admin.scalar(
        text("SELECT id FROM object_state WHERE cluster_id = :c"), {"c": second}
    )

    # A transition must name an object of its own cluster, and a heartbeat a cluster.
    with pytest.raises(IntegrityError, match="no object"):
        await admin.execute(
            text(
                "INSERT INTO status_transition (observed_at, cluster_id, object_id, drifted, "
                "suspended) VALUES (:at, :cluster, :object, false, false)"
            ),
            {"at": START, "cluster": first, "object": object_of_second},
        )
    with pytest.raises(IntegrityError, match="no cluster"):
        await admin.execute(
            text(
                "INSERT INTO cluster_heartbeat (cluster_id, bucket_at, report_count, "
                "object_count) VALUES (-1, :at, 1, 1)"
            ),
            {"at": START},
        )

    # Deleting a cluster deletes its objects' history and its heartbeats, and no other's.
    await admin.execute(text("DELETE FROM cluster WHERE id = :c"), {"c": first})
    left = await admin.execute(
        text(
            "SELECT (SELECT array_agg(DISTINCT cluster_id) FROM status_transition), "
            "(SELECT array_agg(DISTINCT cluster_id) FROM cluster_heartbeat)"
        )
    )
    assert left.one() == ([second], [second])


async def test_a_report_replayed_into_a_compressed_chunk_lands_and_is_answered(
    admin: AsyncConnection, workers: list[httpx.AsyncClient]
) -> None:
    if not await timescaledb(admin):
        pytest.skip("chunks and their compression are TimescaleDB's")
    license_ = await admin.scalar(text("SELECT current_setting('timescaledb.license')"))
    if license_ != "timescale":
        pytest.skip("the Apache-licensed TimescaleDB does not compress")
    token = await register(admin, "drone-01")
    month_ago = START - timedelta(days=30)

    async def send(sequence: int, day: int, revision: str) -> None:
        body = report(
            "drone-01",
            sequence=sequence,
            observed_at=month_ago + timedelta(days=day),
            objects=[kustomization("app", f"dev@sha1:{revision}")],
        )
        reply = await workers[0].post("/api/v1/reports", json=body, headers=bearer(token))
        assert reply.status_code == 200, reply.text

    await send(1, 0, SHA_A)
    compressed = await admin.scalar(
        text("SELECT count(compress_chunk(c)) FROM show_chunks('status_transition') c")
    )
    assert compressed == 1
    # The cluster was cut off for a month; its spool now delivers what it saw a day after
    # the first report, into the chunk that has been compressed meanwhile.
    await send(2, 1, SHA_B)
    await send(3, 10, SHA_A)

    reader = await token_service.create(
        AsyncSession(bind=admin),
        TokenRequest(name="reader", scope="read"),
        token_secret=TOKEN_SECRET,
    )
    history = await workers[0].get(
        "/api/v1/history", params={"cluster": "drone-01"}, headers=bearer(reader.token)
    )
    assert history.status_code == 200, history.text
    assert [
        (datetime.fromisoformat(item["deployed_at"]), item["applied_sha"], item["previous_sha"])
        for item in history.json()["items"]
    ] == [
        (month_ago + timedelta(days=10), SHA_A, SHA_B),
        (month_ago + timedelta(days=1), SHA_B, SHA_A),
        (month_ago, SHA_A, None),
    ]
