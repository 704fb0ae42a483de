"""The hourly rollups answer what aggregating the raw history answers: before they are
refreshed, after, and after rows arrive late into hours already rolled up. On TimescaleDB they
are continuous aggregates (refreshed as their policy does); elsewhere tables the hub's rollup
job keeps."""

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, create_async_engine

from hub import store
from hub.app import create_app
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.database import create_sessionmaker
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.support import SHA_A, SHA_B, SHA_C, START, FakeClock, bearer, kustomization, report

RAW = {
    "heartbeat_hourly": """
        SELECT cluster_id, date_bin(INTERVAL '1 hour', bucket_at, TIMESTAMPTZ '2000-01-01 UTC'),
               sum(report_count), max(object_count)
        FROM cluster_heartbeat GROUP BY 1, 2""",
    "transition_hourly": """
        SELECT cluster_id, date_bin(INTERVAL '1 hour', observed_at, TIMESTAMPTZ '2000-01-01 UTC'),
               count(*),
               count(*) FILTER (WHERE applied_sha IS NOT NULL OR applied_version IS NOT NULL),
               count(*) FILTER (WHERE ready IS FALSE), count(*) FILTER (WHERE drifted)
        FROM status_transition GROUP BY 1, 2""",
    "placement_hourly": """
        SELECT COALESCE(c.environment_id, 0), COALESCE(c.cluster_type_id, 0),
               date_bin(INTERVAL '1 hour', t.observed_at, TIMESTAMPTZ '2000-01-01 UTC'),
               count(*),
               count(*) FILTER (WHERE t.applied_sha IS NOT NULL OR t.applied_version IS NOT NULL),
               count(*) FILTER (WHERE t.ready IS FALSE), count(*) FILTER (WHERE t.drifted)
        FROM status_transition t JOIN cluster c ON c.id = t.cluster_id GROUP BY 1, 2, 3""",
    # The clusters' drift periods (whole minutes here), a minute at a time.
    "placement_drift_hourly": """
        SELECT COALESCE(c.environment_id, 0), COALESCE(c.cluster_type_id, 0),
               date_bin(INTERVAL '1 hour', m.minute, TIMESTAMPTZ '2000-01-01 UTC'), count(*)
        FROM drift_period x JOIN cluster c ON c.id = x.cluster_id
        CROSS JOIN LATERAL generate_series(
            x.started_at, x.ended_at - INTERVAL '1 minute', INTERVAL '1 minute') AS m (minute)
        WHERE x.object_id IS NULL GROUP BY 1, 2, 3""",
    "deployment_hourly": """
        SELECT COALESCE(environment_id, 0), COALESCE(cluster_type_id, 0),
               date_bin(INTERVAL '1 hour', deployed_at, TIMESTAMPTZ '2000-01-01 UTC'), name,
               COALESCE(previous_version, left(previous_sha, 12)),
               COALESCE(applied_version, left(applied_sha, 12)), count(*),
               count(DISTINCT cluster_id), count(*) FILTER (WHERE ready IS FALSE),
               min(deployed_at), max(deployed_at)
        FROM deployment_history GROUP BY 1, 2, 3, 4, 5, 6""",
    # Every drift period (the clusters' and the objects') counted at its start and its end.
    "drift_period_hourly": """
        SELECT COALESCE(c.environment_id, 0), COALESCE(c.cluster_type_id, 0),
               date_bin(INTERVAL '1 hour', x.at, TIMESTAMPTZ '2000-01-01 UTC'),
               count(*) FILTER (WHERE x.started), count(*) FILTER (WHERE NOT x.started)
        FROM (SELECT cluster_id, started_at, true FROM drift_period
              UNION ALL
              SELECT cluster_id, ended_at, false FROM drift_period WHERE ended_at IS NOT NULL
        ) AS x (cluster_id, at, started)
        JOIN cluster c ON c.id = x.cluster_id GROUP BY 1, 2, 3""",
}
VIEWS = {
    "heartbeat_hourly": "SELECT cluster_id, hour, reports, objects FROM heartbeat_hourly",
    "transition_hourly": (
        "SELECT cluster_id, hour, transitions, applied, not_ready, drifted FROM transition_hourly"
    ),
    "placement_hourly": (
        "SELECT environment_id, cluster_type_id, hour, transitions, applied, not_ready, drifted "
        "FROM placement_hourly"
    ),
    "placement_drift_hourly": (
        "SELECT environment_id, cluster_type_id, hour, minutes FROM placement_drift_hourly"
    ),
    "deployment_hourly": (
        "SELECT environment_id, cluster_type_id, hour, name, from_revision, to_revision, "
        "changes, clusters, not_ready, first_at, last_at FROM deployment_hourly"
    ),
    "drift_period_hourly": (
        "SELECT environment_id, cluster_type_id, hour, started, ended FROM drift_period_hourly"
    ),
}
# Three days back from now, so that the refresh (up to the hour under way) materializes them.
DAY0 = START.replace(minute=0, second=0, microsecond=0) - timedelta(days=3)


@pytest.fixture
def own_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@pytest.fixture
async def admin(own_database: str) -> AsyncIterator[AsyncConnection]:
    engine = create_async_engine(own_database, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            yield connection
    finally:
        await engine.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(DAY0)


@pytest.fixture
async def hub(own_database: str, clock: FakeClock) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(hub_settings(), own_database, clock=clock)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://hub.test") as client:
            yield client


async def rows(admin: AsyncConnection, query: str) -> list[tuple[object, ...]]:
    return sorted((tuple(row) for row in await admin.execute(text(query))), key=repr)


async def assert_rollups_equal_the_raw_history(admin: AsyncConnection) -> None:
    for view, query in VIEWS.items():
        expected = await rows(admin, RAW[view])
        assert expected, f"no history behind {view}"
        assert await rows(admin, query) == expected, view


async def drifted(admin: AsyncConnection, cluster: str, since: timedelta, until: timedelta) -> None:
    """A drift period of the cluster (and one of its object, which is not the cluster's)."""
    await admin.execute(
        text(
            "INSERT INTO drift_period (cluster_id, object_id, started_at, ended_at) "
            "SELECT c.id, o.id, :since, :until FROM cluster c "
            "CROSS JOIN LATERAL (VALUES (NULL), ((SELECT min(id) FROM object_state "
            "                                     WHERE cluster_id = c.id))) AS o (id) "
            "WHERE c.name = :cluster"
        ),
        {"cluster": cluster, "since": DAY0 + since, "until": DAY0 + until},
    )


async def refresh(admin: AsyncConnection, own_database: str, clock: FakeClock) -> dict[str, int]:
    """What keeps the rollups, run now: the continuous aggregates' policy, and the hub's job
    (for the rollups that are tables). The rows the job rolled up per rollup."""
    if (await store.backend(admin)).continuous_aggregates:
        for view in store.ROLLUP_VIEWS:
            await admin.execute(
                text(
                    f"CALL refresh_continuous_aggregate('{view}', NULL, now() - INTERVAL '1 hour')"
                )
            )
    engine = create_async_engine(own_database)
    try:
        refreshed = await store.refresh_rollups(
            create_sessionmaker(engine), clock(), timedelta(minutes=10)
        )
    finally:
        await engine.dispose()
    return refreshed


Send = Callable[..., Awaitable[None]]


async def fleet(admin: AsyncConnection, hub: httpx.AsyncClient, clock: FakeClock) -> Send:
    """Two clusters of dev, drone-01 (cluster type drone) and drone-02 (large), and what sends
    a report of one at a time from DAY0: its kustomization "app" at a revision."""
    tokens = {}
    for name, cluster_type in (("drone-01", "drone"), ("drone-02", "large")):
        registered = await cluster_service.register(
            AsyncSession(bind=admin),
            ClusterRegistration(name=name, environment="dev", cluster_type=cluster_type),
            token_secret=TOKEN_SECRET,
        )
        tokens[name] = registered.token
    sequence = 0

    async def send(cluster: str, at: timedelta, revision: str, **fields: object) -> None:
        nonlocal sequence
        sequence += 1
        clock.now = DAY0 + at
        body = report(
            cluster,
            sequence=sequence,
            observed_at=DAY0 + at,
            objects=[kustomization("app", f"dev@sha1:{revision}", **fields)],
        )
        reply = await hub.post("/api/v1/reports", json=body, headers=bearer(tokens[cluster]))
        assert reply.status_code == 200, reply.text

    return send


async def test_the_hourly_rollups_answer_as_the_raw_history_does(
    admin: AsyncConnection, hub: httpx.AsyncClient, own_database: str, clock: FakeClock
) -> None:
    send = await fleet(admin, hub, clock)
    # Two days of reports: deployments, a failure, a drift, and reports that change nothing.
    for hour in range(0, 48, 3):
        revision = (SHA_A, SHA_B, SHA_C)[hour // 12 % 3]
        await send("drone-01", timedelta(hours=hour), revision)
        await send("drone-01", timedelta(hours=hour, minutes=20), revision)
        await send(
            "drone-02",
            timedelta(hours=hour, minutes=40),
            revision,
            ready=hour % 9 != 0,
            drifted=hour % 7 == 0,
        )
    # Drifted within an hour, over a day of them, and twice in one hour.
    hours = timedelta(hours=1)
    await drifted(admin, "drone-01", 1 * hours + timedelta(minutes=15), 3 * hours)
    await drifted(admin, "drone-01", 30 * hours, 30 * hours + timedelta(minutes=45))
    await drifted(
        admin, "drone-02", 2 * hours + timedelta(minutes=30), 26 * hours + timedelta(minutes=10)
    )
    await drifted(
        admin, "drone-02", 27 * hours + timedelta(minutes=5), 27 * hours + timedelta(minutes=20)
    )
    await drifted(admin, "drone-02", 27 * hours + timedelta(minutes=40), 28 * hours)

    await assert_rollups_equal_the_raw_history(admin)
    clock.now = DAY0 + timedelta(days=3)
    refreshed = await refresh(admin, own_database, clock)
    assert all(count > 0 for count in refreshed.values()), refreshed
    await assert_rollups_equal_the_raw_history(admin)

    # A spool delivers late: a transition into an hour rolled up already, which the next
    # refresh takes in.
    await send("drone-02", timedelta(hours=47, minutes=50), SHA_A, ready=False)
    await drifted(
        admin, "drone-02", 47 * hours + timedelta(minutes=10), 47 * hours + timedelta(minutes=50)
    )
    clock.now = DAY0 + timedelta(days=3)
    refreshed = await refresh(admin, own_database, clock)
    assert all(count > 0 for count in refreshed.values()), refreshed
    await assert_rollups_equal_the_raw_history(admin)

    # The environment went through what it went through: hours rolled up stay summed under
    # the placement of then, a cluster moved or decommissioned since included.
    before = {view: await rows(admin, VIEWS[view]) for view in store.PLACEMENT_ROLLUPS}
    await admin.execute(
        text(
            "UPDATE cluster SET cluster_type_id = NULL, decommissioned_at = :now "
            "WHERE name = 'drone-02'"
        ),
        {"now": clock()},
    )
    assert {view: await rows(admin, VIEWS[view]) for view in store.PLACEMENT_ROLLUPS} == before


async def test_drift_minutes_per_hour_add_up_the_drift_periods(admin: AsyncConnection) -> None:
    registered = await cluster_service.register(
        AsyncSession(bind=admin),
        ClusterRegistration(name="drone-01", environment="dev", cluster_type="drone"),
        token_secret=TOKEN_SECRET,
    )
    assert registered.token
    cluster = await admin.scalar(text("SELECT id FROM cluster"))
    hour = DAY0
    # Drifted 10:15-12:00, again 12:30-12:45 (an hour split between two periods), and from
    # 14:50 until now (open); an object's own period is not the cluster's.
    periods = [
        (None, hour + timedelta(minutes=15), hour + timedelta(hours=2)),
        (None, hour + timedelta(hours=2, minutes=30), hour + timedelta(hours=2, minutes=45)),
        (None, hour + timedelta(hours=4, minutes=50), None),
    ]
    for object_id, started, ended in periods:
        await admin.execute(
            text(
                "INSERT INTO drift_period (cluster_id, object_id, started_at, ended_at) "
                "VALUES (:cluster, :object, :started, :ended)"
            ),
            {"cluster": cluster, "object": object_id, "started": started, "ended": ended},
        )
    found = await admin.execute(
        text("SELECT hour, minutes FROM drift_hourly WHERE hour < :until ORDER BY hour"),
        {"until": hour + timedelta(hours=6)},
    )
    assert [(at - hour, float(minutes)) for at, minutes in found] == [
        (timedelta(hours=0), 45.0),
        (timedelta(hours=1), 60.0),
        (timedelta(hours=2), 15.0),
        (timedelta(hours=4), 10.0),
        (timedelta(hours=5), 60.0),
    ]


async def test_the_hour_under_way_is_rolled_up_to_a_cut_before_the_run(
    admin: AsyncConnection, hub: httpx.AsyncClient, own_database: str, clock: FakeClock
) -> None:
    """Dashboards read the changes since the rollup job's last run raw, not those of the whole
    hour under way; an hour's rows before and after the cut add up to its changes."""
    send = await fleet(admin, hub, clock)
    hour = timedelta(days=3)
    await send("drone-01", hour + timedelta(minutes=5), SHA_A)
    await send("drone-02", hour + timedelta(minutes=6), SHA_A)
    await send("drone-01", hour + timedelta(minutes=20), SHA_B)
    clock.now = DAY0 + hour + timedelta(minutes=30)
    await refresh(admin, own_database, clock)
    cut = DAY0 + hour + timedelta(minutes=30) - store.ROLLUP_CUT_BEFORE
    assert (
        await admin.scalar(
            text("SELECT materialized_until FROM rollup_watermark WHERE name = 'deployment_hourly'")
        )
        == cut
    )
    rolled_up = "SELECT sum(changes) FROM deployment_hourly_rollup WHERE hour = :hour"
    assert await admin.scalar(text(rolled_up), {"hour": DAY0 + hour}) == 3

    # After the cut, read raw; a report from before the cut that came in after the run, taken
    # in by the next run.
    await send("drone-02", hour + timedelta(minutes=35), SHA_B)
    await send("drone-01", hour + timedelta(minutes=25), SHA_C)
    summed = """
        SELECT environment_id, cluster_type_id, hour, name, from_revision, to_revision,
               sum(changes), sum(clusters), sum(not_ready), min(first_at), max(last_at)
        FROM deployment_hourly GROUP BY 1, 2, 3, 4, 5, 6"""
    changes = "SELECT sum(changes) FROM deployment_hourly WHERE hour = :hour"
    assert await admin.scalar(text(changes), {"hour": DAY0 + hour}) == 4
    clock.now = DAY0 + hour + timedelta(minutes=40)
    await refresh(admin, own_database, clock)
    assert await rows(admin, summed) == await rows(admin, RAW["deployment_hourly"])
    assert await admin.scalar(text(rolled_up), {"hour": DAY0 + hour}) == 5
