"""Hourly rollups of the history, kept by the store: `heartbeat_hourly` (reports per cluster
and hour) and `transition_hourly` (state changes per cluster and hour: all of them, those with
an applied revision, those not Ready, those drifted). Dashboards read them over long ranges
instead of the raw rows.

On TimescaleDB (its Timescale-licensed build) each is a real-time continuous aggregate: the
hours its refresh policy has materialized (up to an hour ago, the last three days refreshed
each half hour, late rows included) plus the raw rows of the hours since. Elsewhere (plain
PostgreSQL, or the Apache-licensed build, which has no continuous aggregates) the same view
reads a table the hub's rollup job keeps the same way (hub/store.py: the hours before
`rollup_watermark.materialized_until`, the last three days of them recomputed each run) and the raw
rows from the watermark on. Either way the view answers what aggregating the raw rows would.

Both outlive the history they sum: a retention policy drops raw chunks, not the hours already
rolled up.

`drift_hourly` (minutes each cluster was drifted, per hour) is a plain view on both backends:
its source, `drift_period`, holds one row per drift episode (kept by the drift job), a span
whose minutes fall into many hours, which no continuous aggregate can split, and which is
small enough to spread over the hours when asked.

Revision ID: 0018_history_rollups
Revises: 0017_hypertable_integrity
Create Date: 2026-11-26 02:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_history_rollups"
down_revision: str | None = "0017_hypertable_integrity"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# view: (source table, its time column, the aggregates, their column types)
ROLLUPS = {
    "heartbeat_hourly": (
        "cluster_heartbeat",
        "bucket_at",
        {"reports": ("sum(report_count)", "bigint"), "objects": ("max(object_count)", "integer")},
    ),
    "transition_hourly": (
        "status_transition",
        "observed_at",
        {
            "transitions": ("count(*)", "bigint"),
            "applied": (
                "count(*) FILTER (WHERE applied_sha IS NOT NULL OR applied_version IS NOT NULL)",
                "bigint",
            ),
            "not_ready": ("count(*) FILTER (WHERE ready IS FALSE)", "bigint"),
            "drifted": ("count(*) FILTER (WHERE drifted)", "bigint"),
        },
    ),
}
REFRESHED = "INTERVAL '3 days'"
LAG = "INTERVAL '1 hour'"


def _continuous_aggregates() -> bool:
    """TimescaleDB keeps continuous aggregates here: its licensed build, hypertables made."""
    bind = op.get_bind()
    licensed = bind.execute(
        sa.text(
            "SELECT current_setting('timescaledb.license', true) = 'timescale' "
            "FROM pg_extension WHERE extname = 'timescaledb'"
        )
    ).scalar()
    if licensed is not True:
        return False
    hypertable = bind.execute(
        sa.text(
            "SELECT 1 FROM timescaledb_information.hypertables "
            "WHERE hypertable_name = 'status_transition'"
        )
    ).scalar()
    return hypertable is not None


def _aggregates(aggregates: dict[str, tuple[str, str]]) -> str:
    return ", ".join(f"{expression} AS {name}" for name, (expression, _) in aggregates.items())


def upgrade() -> None:
    op.execute(DRIFT_HOURLY)
    if _continuous_aggregates():
        for view, (source, column, aggregates) in ROLLUPS.items():
            bucket = f"time_bucket(INTERVAL '1 hour', {column})"
            op.execute(f"""
                CREATE MATERIALIZED VIEW {view}
                WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
                SELECT cluster_id, {bucket} AS hour, {_aggregates(aggregates)}
                FROM {source} GROUP BY cluster_id, {bucket}
                WITH NO DATA
            """)
        # The policies refresh the last three days only: the history before them is rolled
        # up once here, first (outside a transaction, as TimescaleDB requires).
        with op.get_context().autocommit_block():
            for view in ROLLUPS:
                op.execute(f"CALL refresh_continuous_aggregate('{view}', NULL, now() - {LAG})")
        for view in ROLLUPS:
            op.execute(
                f"SELECT add_continuous_aggregate_policy('{view}', start_offset => {REFRESHED}, "
                f"end_offset => {LAG}, schedule_interval => INTERVAL '30 minutes')"
            )
        return
    op.execute("""
        CREATE TABLE rollup_watermark (
            name text PRIMARY KEY,
            materialized_until timestamptz
        )
    """)
    for view, (source, column, aggregates) in ROLLUPS.items():
        columns = ", ".join(f"{name} {kind} NOT NULL" for name, (_, kind) in aggregates.items())
        names = ", ".join(aggregates)
        bucket = f"date_bin(INTERVAL '1 hour', {column}, TIMESTAMPTZ '2000-01-01 UTC')"
        watermark = (
            "(SELECT COALESCE(materialized_until, '-infinity') FROM rollup_watermark "
            f"WHERE name = '{view}')"
        )
        op.execute(f"""
            CREATE TABLE {view}_rollup (
                cluster_id integer NOT NULL,
                hour timestamptz NOT NULL,
                {columns},
                PRIMARY KEY (cluster_id, hour)
            );
            CREATE INDEX ix_{view}_rollup_hour ON {view}_rollup (hour);
            INSERT INTO rollup_watermark (name) VALUES ('{view}');
            CREATE VIEW {view} AS
            SELECT cluster_id, hour, {names} FROM {view}_rollup WHERE hour < {watermark}
            UNION ALL
            SELECT cluster_id, {bucket} AS hour, {_aggregates(aggregates)}
            FROM {source} WHERE {column} >= {watermark}
            GROUP BY cluster_id, {bucket};
        """)


DRIFT_HOURLY = """
CREATE VIEW drift_hourly AS
SELECT p.cluster_id, h.hour,
       sum(extract(epoch FROM LEAST(COALESCE(p.ended_at, now()), h.hour + INTERVAL '1 hour')
                              - GREATEST(p.started_at, h.hour)) / 60) AS minutes
FROM drift_period p
CROSS JOIN LATERAL generate_series(
    date_bin(INTERVAL '1 hour', p.started_at, TIMESTAMPTZ '2000-01-01 UTC'),
    COALESCE(p.ended_at, now()),
    INTERVAL '1 hour'
) AS h (hour)
WHERE p.object_id IS NULL AND h.hour < COALESCE(p.ended_at, now())
GROUP BY p.cluster_id, h.hour
"""


def downgrade() -> None:
    op.execute("DROP VIEW drift_hourly")
    if _continuous_aggregates():
        for view in ROLLUPS:
            op.execute(f"DROP MATERIALIZED VIEW {view}")
        return
    for view in ROLLUPS:
        op.execute(f"DROP VIEW {view}; DROP TABLE {view}_rollup")
    op.execute("DROP TABLE rollup_watermark")
