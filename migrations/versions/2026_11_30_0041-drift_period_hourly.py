"""Drift periods started and ended per hour, environment and cluster type:
`drift_period_hourly`, so that the Drift dashboard counts a month of periods without reading
them.

The periods a range [F, T] shows are those that overlap it: started by T, and open or ended
at F or later. Their number is the periods open now, plus those ended since F, minus those
started after T; the two sums are this rollup's hours, the part of an hour before F or after T
a few raw rows. At 10,000 clusters a month holds some 4 million periods, which counting one by
one takes seconds.

Both kinds of period count: a cluster's (object_id NULL) and an object's. Under the placement
each cluster has when rolled up, decommissioned clusters left out as grafana.drift_period
leaves them: a table the hub's rollup job keeps as `placement_drift_hourly` (0030), the hours
before the watermark in `rollup_watermark`, the last three days of them recomputed each run,
and from the watermark on counted when asked. Kept for FLEETMARK_ROLLUP_RETENTION, as the
other rollups.

Revision ID: 0041_drift_period_hourly
Revises: 0040_dashboard_reads
Create Date: 2026-11-30 12:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0041_drift_period_hourly"
down_revision: str | None = "0040_dashboard_reads"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WATERMARK = "rollup_watermark_of('drift_period_hourly')"
_HOUR = "date_bin(INTERVAL '1 hour', {}, TIMESTAMPTZ '2000-01-01 UTC')"


def upgrade() -> None:
    op.execute(f"""
        CREATE TABLE drift_period_hourly_rollup (
            hour timestamptz NOT NULL,
            environment_id integer NOT NULL,
            cluster_type_id integer NOT NULL,
            started bigint NOT NULL,
            ended bigint NOT NULL,
            PRIMARY KEY (hour, environment_id, cluster_type_id)
        );
        INSERT INTO rollup_watermark (name) VALUES ('drift_period_hourly');
        CREATE VIEW drift_period_hourly AS
        SELECT hour, environment_id, cluster_type_id, started, ended
        FROM drift_period_hourly_rollup WHERE hour < {WATERMARK}
        UNION ALL
        SELECT x.hour, COALESCE(c.environment_id, 0)::integer AS environment_id,
               COALESCE(c.cluster_type_id, 0)::integer AS cluster_type_id,
               sum(x.started)::bigint AS started, sum(x.ended)::bigint AS ended
        FROM (
            -- Per cluster first: a commit opens a period for each of its objects at once.
            SELECT cluster_id, hour, sum(started) AS started, sum(ended) AS ended
            FROM (
                SELECT cluster_id, {_HOUR.format("started_at")} AS hour, 1 AS started,
                       0 AS ended
                FROM drift_period WHERE started_at >= {WATERMARK}
                UNION ALL
                SELECT cluster_id, {_HOUR.format("ended_at")}, 0, 1
                FROM drift_period WHERE ended_at >= {WATERMARK}
            ) AS x
            GROUP BY 1, 2
        ) AS x
        JOIN cluster c ON c.id = x.cluster_id AND c.decommissioned_at IS NULL
        GROUP BY 1, 2, 3;
        CREATE VIEW grafana.drift_period_hourly AS
        SELECT x.hour, e.name AS environment, e.position AS environment_position,
               ct.name AS cluster_type, x.started, x.ended
        FROM drift_period_hourly x
        LEFT JOIN environment e ON e.id = x.environment_id
        LEFT JOIN cluster_type ct ON ct.id = x.cluster_type_id;
        COMMENT ON VIEW grafana.drift_period_hourly IS
            'Drift periods (of clusters and of objects) started and ended per hour, '
            'environment and cluster type.';
    """)


def downgrade() -> None:
    op.execute("""
        DROP VIEW grafana.drift_period_hourly;
        DROP VIEW drift_period_hourly;
        DROP TABLE drift_period_hourly_rollup;
        DELETE FROM rollup_watermark WHERE name = 'drift_period_hourly';
    """)
