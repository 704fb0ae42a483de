"""The history and its hourly rollups are kept as long as the settings say, on each backend:
TimescaleDB's policies (replaced when the settings change), chunks dropped on its
Apache-licensed build, rows deleted on plain PostgreSQL."""

import asyncio
import atexit
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, create_async_engine

from hub import migrate, store
from hub.app import create_app
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.database import create_sessionmaker
from hub.embedded import TIMESCALEDB_SETTINGS, start_embedded_postgres
from tests.conftest import TEST_BACKEND, TOKEN_SECRET, DatabaseServer, hub_settings

NOW = datetime.now(UTC)
STALE_AFTER = timedelta(minutes=10)
AGES = [timedelta(days=days) for days in (200, 100, 40, 1)]


@pytest.fixture
def own_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[AsyncConnection]:
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            yield connection
    finally:
        await engine.dispose()


async def fill(admin: AsyncConnection) -> None:
    """One cluster with one object, a transition (a version applied), a heartbeat, ten minutes
    of drift, a readiness turn (kept by the readiness job) and a sample of the fleet's health
    at each of AGES ago."""
    await cluster_service.register(
        AsyncSession(bind=admin),
        ClusterRegistration(name="drone-01", environment="dev", cluster_type="drone"),
        token_secret=TOKEN_SECRET,
    )
    await admin.execute(
        text(
            "INSERT INTO object_state (cluster_id, reconciler, kind, namespace, name, "
            "changed_at, first_seen_at, applied_since) "
            "SELECT id, 'flux', 'Kustomization', 'flux-system', 'app', now(), now(), now() "
            "FROM cluster"
        )
    )
    for age in AGES:
        await admin.execute(
            text(
                "INSERT INTO status_transition (observed_at, cluster_id, object_id, "
                "applied_version, drifted, suspended) "
                "SELECT :at, cluster_id, id, :version, false, false FROM object_state"
            ),
            {"at": NOW - age, "version": f"1.{age.days}.0"},
        )
        await admin.execute(
            text(
                "INSERT INTO cluster_heartbeat (cluster_id, bucket_at, report_count, "
                "object_count) SELECT id, :at, 1, 1 FROM cluster"
            ),
            {"at": NOW - age},
        )
        await admin.execute(
            text(
                "INSERT INTO drift_period (cluster_id, started_at, ended_at) "
                "SELECT id, h.hour, h.hour + INTERVAL '10 minutes' "
                "FROM cluster, date_trunc('hour', CAST(:at AS timestamptz)) AS h (hour)"
            ),
            {"at": NOW - age},
        )
        await admin.execute(
            text(
                "INSERT INTO readiness_turn (bucket, cluster_id, regressed, failing, reasons) "
                "SELECT :at, id, true, true, ARRAY['HealthCheckFailed'] FROM cluster"
            ),
            {"at": NOW - age},
        )
        await store.sample_health(AsyncSession(bind=admin), NOW - age, NOW - age)


async def ages(admin: AsyncConnection, table: str, column: str) -> list[int]:
    rows = await admin.scalars(
        text(f"SELECT round(extract(epoch FROM :now - {column}) / 86400) FROM {table} ORDER BY 1"),
        {"now": NOW},
    )
    return [int(days) for days in rows]


async def keep(url: str, **settings: timedelta) -> None:
    engine = create_async_engine(url)
    try:
        await store.keep_history(create_sessionmaker(engine), hub_settings(**settings), NOW)
    finally:
        await engine.dispose()


async def run_retention_policies(admin: AsyncConnection) -> None:
    jobs = await admin.scalars(
        text("SELECT job_id FROM timescaledb_information.jobs WHERE proc_name = 'policy_retention'")
    )
    for job in list(jobs):
        await admin.execute(text("CALL run_job(:job)"), {"job": job})


async def test_history_older_than_its_retention_is_dropped(own_database: str) -> None:
    async with connected(own_database) as admin:
        await fill(admin)
        found = await store.backend(admin)
        await keep(
            own_database,
            history_retention=timedelta(days=60),
            heartbeat_retention=timedelta(days=20),
        )
        if found.licensed:
            await run_retention_policies(admin)
        # Chunks are dropped whole: a 7-day chunk goes once all of it is past the retention.
        assert await ages(admin, "status_transition", "observed_at") == [1, 40]
        assert await ages(admin, "cluster_heartbeat", "bucket_at") == [1]
        # Drift periods go with the history, by the row, once ended; so do readiness turns.
        assert await ages(admin, "drift_period", "started_at") == [1, 40]
        assert await ages(admin, "readiness_turn", "bucket") == [1, 40]


async def test_rollups_outlive_the_history_for_their_own_retention(own_database: str) -> None:
    async with connected(own_database) as admin:
        await fill(admin)
        found = await store.backend(admin)
        if found.continuous_aggregates:
            for view in store.ROLLUP_VIEWS:
                await admin.execute(
                    text("CALL refresh_continuous_aggregate(CAST(:view AS regclass), NULL, NULL)"),
                    {"view": view},
                )
        engine = create_async_engine(own_database)
        try:
            await store.refresh_rollups(create_sessionmaker(engine), NOW, STALE_AFTER)
        finally:
            await engine.dispose()
        await keep(
            own_database,
            history_retention=timedelta(days=20),
            heartbeat_retention=timedelta(days=20),
            rollup_retention=timedelta(days=60),
        )
        if found.licensed:
            await run_retention_policies(admin)
        assert await ages(admin, "status_transition", "observed_at") == [1]
        for view in store.ROLLUP_VIEWS:
            kept = await ages(admin, view, "hour")
            if found.continuous_aggregates:
                # Dropped in whole chunks of the aggregate (ten of its history's: 70 days).
                assert kept in ([1, 40], [1, 40, 100]), view
            else:
                assert kept == [1, 40], view
        # Tables on every backend: their hours go by the row.
        for view in store.PLACEMENT_ROLLUPS:
            assert await ages(admin, view, "hour") == [1, 40], view
        # The fleet's health, sampled at each age and by the rollup job now.
        assert await ages(admin, store.HEALTH_ROLLUP, "hour") == [0, 1, 40]


async def test_timescaledb_policies_follow_the_settings(own_database: str) -> None:
    async with connected(own_database) as admin:
        if not (await store.backend(admin)).licensed:
            pytest.skip("policies are the Timescale-licensed TimescaleDB's")

        async def policies(admin: AsyncConnection = admin) -> dict[tuple[str, str], str]:
            rows = await admin.execute(
                text(
                    "SELECT COALESCE(a.view_name, j.hypertable_name), j.proc_name, "
                    "COALESCE(j.config->>'drop_after', j.config->>'compress_after') "
                    "FROM timescaledb_information.jobs j "
                    "LEFT JOIN timescaledb_information.continuous_aggregates a "
                    "ON a.materialization_hypertable_name = j.hypertable_name "
                    "WHERE j.proc_name IN ('policy_retention', 'policy_compression')"
                )
            )
            return {(table, proc): value for table, proc, value in rows}

        await keep(own_database)
        assert await policies() == {
            ("status_transition", "policy_retention"): "400 days",
            ("status_transition", "policy_compression"): "14 days",
            ("cluster_heartbeat", "policy_retention"): "90 days",
            ("cluster_heartbeat", "policy_compression"): "14 days",
            ("heartbeat_hourly", "policy_retention"): "730 days",
            ("transition_hourly", "policy_retention"): "730 days",
        }
        await keep(
            own_database,
            history_retention=timedelta(days=30),
            rollup_retention=timedelta(days=400),
            compress_after=timedelta(hours=36),
        )
        assert await policies() == {
            ("status_transition", "policy_retention"): "30 days",
            ("status_transition", "policy_compression"): "1 day 12:00:00",
            ("cluster_heartbeat", "policy_retention"): "90 days",
            ("cluster_heartbeat", "policy_compression"): "1 day 12:00:00",
            ("heartbeat_hourly", "policy_retention"): "400 days",
            ("transition_hourly", "policy_retention"): "400 days",
        }


@pytest.fixture(scope="module")
def apache_timescaledb() -> Iterator[str]:
    """A server of the Apache-licensed TimescaleDB build: hypertables without compression,
    continuous aggregates or policies, as managed services offer it."""
    if os.environ.get(TEST_BACKEND) != "timescaledb":
        pytest.skip(f"needs TimescaleDB installed ({TEST_BACKEND}=timescaledb)")
    data_dir = Path(tempfile.mkdtemp(prefix="fleetmark-apache-"))
    # As the test server's: removed at exit, after the server (which stops itself then).
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    url = start_embedded_postgres(
        data_dir / "postgres", {**TIMESCALEDB_SETTINGS, "timescaledb.license": "apache"}
    )
    server = DatabaseServer(url)
    try:
        with server.migrated_database() as database:
            yield database
    finally:
        server.close()


async def test_the_apache_timescaledb_build_keeps_hypertables_and_drops_chunks_itself(
    apache_timescaledb: str,
) -> None:
    assert migrate.current_revision(apache_timescaledb) == migrate.head_revision()
    async with connected(apache_timescaledb) as admin:
        found = await store.backend(admin)
        assert (found.name, found.compression, found.continuous_aggregates) == (
            "timescaledb-apache",
            False,
            False,
        )
        await fill(admin)
        await keep(apache_timescaledb, history_retention=timedelta(days=60))
        assert await ages(admin, "status_transition", "observed_at") == [1, 40]
        assert await ages(admin, "cluster_heartbeat", "bucket_at") == [1, 40]
        # No continuous aggregates: the hub's job keeps the rollups, as on plain PostgreSQL.
        engine = create_async_engine(apache_timescaledb)
        try:
            refreshed = await store.refresh_rollups(create_sessionmaker(engine), NOW, STALE_AFTER)
        finally:
            await engine.dispose()
        assert refreshed == {
            "heartbeat_hourly": 2,
            "transition_hourly": 2,
            "placement_hourly": 2,
            "placement_drift_hourly": 2,
            "deployment_hourly": 2,
            "drift_period_hourly": 2,
            "fleet_health_hourly": 1,
        }


async def test_the_hub_applies_the_retention_at_start(own_database: str) -> None:
    app = create_app(hub_settings(history_retention=timedelta(days=30)), own_database)
    async with connected(own_database) as admin, app.router.lifespan_context(app):
        job = app.state.jobs.scheduler.get_job("retention")
        assert job.trigger.interval == timedelta(days=1)
        if not (await store.backend(admin)).licensed:
            return
        # The policies are set to the settings by the run at start.
        query = text(
            "SELECT config->>'drop_after' FROM timescaledb_information.jobs "
            "WHERE proc_name = 'policy_retention' AND hypertable_name = 'status_transition'"
        )
        async with asyncio.timeout(30):
            while True:
                if await admin.scalar(query) == "30 days":
                    break
                await asyncio.sleep(0.05)


async def test_parts_of_a_snapshot_never_completed_go_an_hour_after_they_came(
    own_database: str,
) -> None:
    async with connected(own_database) as admin:
        await fill(admin)
        for minutes in (90, 61, 59, 1):
            await admin.execute(
                text(
                    "INSERT INTO snapshot_part (cluster_id, snapshot_id, part_index, part_count, "
                    "observed_at, received_at, keys) "
                    "SELECT id, :snapshot, 0, 2, :at, :at, '[]' FROM cluster"
                ),
                {"snapshot": f"{minutes} min", "at": NOW - timedelta(minutes=minutes)},
            )
        await keep(own_database)
        kept = await admin.scalars(text("SELECT snapshot_id FROM snapshot_part ORDER BY 1"))
        assert list(kept) == ["1 min", "59 min"]
