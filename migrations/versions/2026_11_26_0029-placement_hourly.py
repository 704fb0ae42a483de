"""Hourly state changes per environment and cluster type: `placement_hourly`, for the
dashboards' panels over the whole fleet.

A panel that sums the fleet's state changes per hour and environment over 30 days read every
cluster's hours of `transition_hourly` (0018): 1.9 million rows at 10,000 clusters, seconds
of work. `placement_hourly` holds the same sums per environment and cluster type (0 for a
cluster placed in none), some ten rows an hour.

Its hours are summed from `transition_hourly` under the placement each cluster has when they
are rolled up, clusters since decommissioned included: what the environment went through. A
table the hub's rollup job keeps on every backend, as it keeps 0018's tables on plain
PostgreSQL (hub/store.py): the hours before the watermark in `rollup_watermark`, the last
three days of them recomputed each run, and from the watermark on summed when asked. On
TimescaleDB, where 0018 made continuous aggregates and no watermark table, the table is made
here. Kept for FLEETMARK_ROLLUP_RETENTION, as the other rollups.

`grafana.placement_hourly` names the environment and cluster type for the dashboards.

Revision ID: 0029_placement_hourly
Revises: 0028_requested_runs
Create Date: 2026-11-26 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029_placement_hourly"
down_revision: str | None = "0028_requested_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SUMS = ("transitions", "applied", "not_ready", "drifted")
WATERMARK = (
    "(SELECT COALESCE(materialized_until, '-infinity') FROM rollup_watermark "
    "WHERE name = 'placement_hourly')"
)


def upgrade() -> None:
    # 0018 made it where it made no continuous aggregates.
    op.execute(
        "CREATE TABLE IF NOT EXISTS rollup_watermark "
        "(name text PRIMARY KEY, materialized_until timestamptz)"
    )
    columns = ", ".join(f"{name} bigint NOT NULL" for name in SUMS)
    sums = ", ".join(f"sum(x.{name})::bigint AS {name}" for name in SUMS)
    names = ", ".join(SUMS)
    op.execute(f"""
        CREATE TABLE placement_hourly_rollup (
            hour timestamptz NOT NULL,
            environment_id integer NOT NULL,
            cluster_type_id integer NOT NULL,
            {columns},
            PRIMARY KEY (hour, environment_id, cluster_type_id)
        );
        INSERT INTO rollup_watermark (name) VALUES ('placement_hourly');
        CREATE VIEW placement_hourly AS
        SELECT hour, environment_id, cluster_type_id, {names}
        FROM placement_hourly_rollup WHERE hour < {WATERMARK}
        UNION ALL
        SELECT x.hour, COALESCE(c.environment_id, 0)::integer AS environment_id,
               COALESCE(c.cluster_type_id, 0)::integer AS cluster_type_id, {sums}
        FROM transition_hourly x
        JOIN cluster c ON c.id = x.cluster_id
        WHERE x.hour >= {WATERMARK}
        GROUP BY 1, 2, 3;
        CREATE VIEW grafana.placement_hourly AS
        SELECT x.hour, e.name AS environment, e.position AS environment_position,
               ct.name AS cluster_type, {", ".join(f"x.{name}" for name in SUMS)}
        FROM placement_hourly x
        LEFT JOIN environment e ON e.id = x.environment_id
        LEFT JOIN cluster_type ct ON ct.id = x.cluster_type_id;
        COMMENT ON VIEW grafana.placement_hourly IS
            'State changes per hour, environment and cluster type, clusters since '
            'decommissioned included.';
    """)


def downgrade() -> None:
    op.execute("""
        DROP VIEW grafana.placement_hourly;
        DROP VIEW placement_hourly;
        DROP TABLE placement_hourly_rollup;
        DELETE FROM rollup_watermark WHERE name = 'placement_hourly';
    """)
    # Made here (TimescaleDB) when no other rollup has a watermark in it.
    if op.get_bind().execute(sa.text("SELECT 1 FROM rollup_watermark LIMIT 1")).scalar() is None:
        op.execute("DROP TABLE rollup_watermark")
