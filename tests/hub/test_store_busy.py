"""The app's own database pools: an overloaded store answers 503 and loses nothing; ingest
waits for the WAL flush before answering unless configured not to; two hub workers applying one
agent's reports at once leave the newest state.

These tests run the app on its own pools against a database of their own (no test session),
and make the store slow the way a real one gets slow: another transaction holds the row
every report of the cluster must update; or, to show it does not hold reports up, a lock that
a job takes on what ingest writes.
"""

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, create_async_engine

from hub.app import create_app
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.database import create_statement_pool
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.support import SHA_A, SHA_B, START, bearer, blocked_backends, kustomization, report

POOL_TIMEOUT = 0.3


@pytest.fixture
def own_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@pytest.fixture
async def admin(own_database: str) -> AsyncIterator[AsyncConnection]:
    engine = create_async_engine(own_database)
    async with engine.connect() as connection:
        yield connection
    await engine.dispose()


@asynccontextmanager
async def running_hub(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """One hub worker: one engine connection (plus one overflow), two statement connections."""
    app = create_app(
        hub_settings(database_pool_size=1, database_pool_timeout=POOL_TIMEOUT), database_url
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://hub.test") as client:
            yield client


@pytest.fixture
async def hub(own_database: str) -> AsyncIterator[httpx.AsyncClient]:
    async with running_hub(own_database) as client:
        yield client


@pytest.fixture
async def other_worker(own_database: str) -> AsyncIterator[httpx.AsyncClient]:
    async with running_hub(own_database) as client:
        yield client


async def register(admin: AsyncConnection, name: str) -> str:
    async with admin.begin():
        registered = await cluster_service.register(
            AsyncSession(bind=admin),
            ClusterRegistration(name=name, environment="dev", cluster_type="drone"),
            token_secret=TOKEN_SECRET,
        )
    return registered.token


async def post(hub: httpx.AsyncClient, token: str, sequence: int) -> httpx.Response:
    body = report(
        "drone-01",
        sequence=sequence,
        observed_at=START,
        objects=[kustomization(f"app-{sequence}")],
    )
    return await hub.post("/api/v1/reports", json=body, headers=bearer(token))


async def test_report_gets_503_when_every_connection_is_busy_and_the_others_still_land(
    hub: httpx.AsyncClient, admin: AsyncConnection, own_database: str
) -> None:
    token = await register(admin, "drone-01")
    async with admin.begin():
        await admin.execute(text("SELECT 1 FROM cluster WHERE name = 'drone-01' FOR UPDATE"))
        # Two reports wait on the locked row, holding both statement connections.
        waiting = [asyncio.create_task(post(hub, token, sequence)) for sequence in (1, 2)]
        await blocked_backends(own_database, 2)
        refused = await post(hub, token, 3)
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "5"
    assert refused.json() == {
        "error": "store_busy",
        "detail": "every database connection is busy; retry later",
    }
    # The lock is gone: the waiting reports land, and the refused one is accepted on retry.
    assert [(await task).status_code for task in waiting] == [200, 200]
    retried = await post(hub, token, 3)
    assert retried.status_code == 200, retried.text
    names = (
        await admin.execute(
            text(
                "SELECT o.name FROM object_state o JOIN cluster c ON c.id = o.cluster_id "
                "WHERE c.name = 'drone-01' ORDER BY o.name"
            )
        )
    ).scalars()
    assert list(names) == ["app-1", "app-2", "app-3"]
    await admin.rollback()


async def test_api_read_gets_503_when_the_engine_pool_is_exhausted(
    hub: httpx.AsyncClient, admin: AsyncConnection, own_database: str
) -> None:
    async with admin.begin():
        created = await token_service.create(
            AsyncSession(bind=admin),
            TokenRequest(name="grafana", scope="read"),
            token_secret=TOKEN_SECRET,
        )
    headers = bearer(created.token)
    async with admin.begin():
        await admin.execute(text("LOCK TABLE cluster IN ACCESS EXCLUSIVE MODE"))
        # Two listings wait on the lock, holding the engine's connection and its overflow.
        waiting = [
            asyncio.create_task(hub.get("/api/v1/clusters", headers=headers)) for _ in range(2)
        ]
        await blocked_backends(own_database, 2)
        refused = await hub.get("/api/v1/clusters", headers=headers)
    assert refused.status_code == 503
    assert refused.json()["error"] == "store_busy"
    assert [(await task).status_code for task in waiting] == [200, 200]


async def send_app(
    worker: httpx.AsyncClient, token: str, sequence: int, revision: str
) -> httpx.Response:
    """drone-01's report of sequence `sequence`, observed that many seconds after START: its
    object "app" at `revision`."""
    body = report(
        "drone-01",
        sequence=sequence,
        observed_at=START + timedelta(seconds=sequence),
        objects=[kustomization("app", revision)],
    )
    return await worker.post("/api/v1/reports", json=body, headers=bearer(token))


async def test_two_workers_applying_one_agents_reports_at_once_keep_its_newest_state(
    hub: httpx.AsyncClient,
    other_worker: httpx.AsyncClient,
    admin: AsyncConnection,
    own_database: str,
) -> None:
    token = await register(admin, "drone-01")
    v1, v2 = f"dev@sha1:{SHA_A}", f"dev@sha1:{SHA_B}"

    assert (await send_app(hub, token, 1, v1)).status_code == 200
    async with admin.begin():
        await admin.execute(text("SELECT 1 FROM cluster WHERE name = 'drone-01' FOR UPDATE"))
        # Sequence 2 moves "app" to v2, then waits for the cluster row, holding the agent's
        # session row; sequence 3 (back at v1) starts on the other worker, so it reads the
        # state from before sequence 2, and waits for the session row.
        second = asyncio.create_task(send_app(hub, token, 2, v2))
        await blocked_backends(own_database, 1)
        third = asyncio.create_task(send_app(other_worker, token, 3, v1))
        await blocked_backends(own_database, 2)
    assert (await second).json()["changed"] == 1
    assert (await third).json()["changed"] == 1
    rows = await admin.execute(
        text(
            "SELECT t.applied_sha, t.observed_at FROM status_transition t "
            "JOIN cluster c ON c.id = t.cluster_id WHERE c.name = 'drone-01' "
            "ORDER BY t.observed_at"
        )
    )
    state = await admin.execute(
        text(
            "SELECT o.applied_sha, o.changed_at FROM object_state o "
            "JOIN cluster c ON c.id = o.cluster_id WHERE c.name = 'drone-01'"
        )
    )
    at = [START + timedelta(seconds=sequence) for sequence in (1, 2, 3)]
    assert [tuple(row) for row in rows] == list(zip([SHA_A, SHA_B, SHA_A], at, strict=True))
    assert tuple(state.one()) == (SHA_A, at[2])
    await admin.rollback()


async def test_a_drift_round_writing_verdicts_does_not_hold_up_changes_to_their_objects(
    hub: httpx.AsyncClient, admin: AsyncConnection
) -> None:
    token = await register(admin, "drone-01")
    assert (await send_app(hub, token, 1, f"dev@sha1:{SHA_A}")).status_code == 200
    async with admin.begin():
        # What a drift round holds on each object it judged until it commits: the lock the
        # foreign key of the verdict it wrote takes.
        await admin.execute(text("SELECT FROM object_state WHERE name = 'app' FOR KEY SHARE"))
        changed = await asyncio.wait_for(send_app(hub, token, 2, f"dev@sha1:{SHA_B}"), timeout=10)
    assert changed.status_code == 200, changed.text
    assert changed.json()["changed"] == 1


@pytest.mark.parametrize(("configured", "expected"), [(None, "on"), (False, "off")])
async def test_ingest_waits_for_the_wal_flush_unless_configured_not_to(
    own_database: str, configured: bool | None, expected: str
) -> None:
    overrides = {} if configured is None else {"ingest_synchronous_commit": configured}
    statements = create_statement_pool(own_database, hub_settings(**overrides))
    await statements.open()
    try:
        async with statements.connection() as connection:
            cursor = await connection.execute("SHOW synchronous_commit")
            assert await cursor.fetchone() == (expected,)
    finally:
        await statements.close()


async def test_a_cluster_registers_while_another_transaction_references_its_type(
    hub: httpx.AsyncClient, admin: AsyncConnection
) -> None:
    """Whatever references an environment or a cluster type (a cluster registered or placed,
    the drift job's totals) key-share locks its row until its transaction ends. Registering
    another cluster of that type must not wait for such a transaction: it did, locking the row
    as if to change its key, and the drift job, rewriting its totals while waiting on the
    registration in turn, made a deadlock of it."""
    await register(admin, "drone-01")
    async with admin.begin():
        created = await token_service.create(
            AsyncSession(bind=admin),
            TokenRequest(name="platform", scope="admin"),
            token_secret=TOKEN_SECRET,
        )
    async with admin.begin():
        await admin.execute(
            text(
                "SELECT FROM cluster_type t JOIN environment e ON e.id = t.environment_id "
                "WHERE e.name = 'dev' AND t.name = 'drone' FOR KEY SHARE"
            )
        )
        async with asyncio.timeout(5):
            registered = await hub.post(
                "/api/v1/clusters",
                json={"name": "drone-02", "environment": "dev", "cluster_type": "drone"},
                headers=bearer(created.token),
            )
    assert registered.status_code == 201, registered.text
    types = await admin.execute(
        text(
            "SELECT c.name, t.name FROM cluster c JOIN cluster_type t ON t.id = c.cluster_type_id "
            "ORDER BY c.name"
        )
    )
    assert types.all() == [("drone-01", "drone"), ("drone-02", "drone")]
