"""Drift minutes per hour, environment and cluster type: `placement_drift_hourly`; and the
drift periods by start.

A fleet's drift periods are many: every commit an environment's branch takes makes each
cluster that follows it drifted, and each of its objects, until they apply it. At 10,000
clusters that is some 130,000 periods a day, 12 million over 90 days. 0018's `drift_hourly`
spreads every period over its hours when asked, which for the fleet's drift minutes over 30
days is 2 million periods spread, seconds of work. `placement_drift_hourly` holds the minutes
the clusters of each environment and cluster type (0 for a cluster placed in none) were
drifted, per hour: some ten rows an hour.

Its hours are summed from the clusters' drift periods (object_id NULL) under the placement
each cluster has when they are rolled up, clusters since decommissioned included, as
`placement_hourly` (0029): a table the hub's rollup job keeps on every backend, the hours
before the watermark in `rollup_watermark`, the last three days of them recomputed each run,
and from the watermark on spread when asked, from the periods that reach past it. Kept for
FLEETMARK_ROLLUP_RETENTION, as the other rollups.

`ix_drift_period_started_at_cluster_id_object_id`: the newest periods of a range, found
newest first (the dashboards' list of drift periods) instead of every period of the range
sorted; ties broken by cluster and object within the index, for the periods one evaluation
opens together (a commit on prod's branch opens some 80,000 at one instant).

`grafana.placement_drift_hourly` names the environment and cluster type for the dashboards.

Revision ID: 0030_placement_drift_hourly
Revises: 0029_placement_hourly
Create Date: 2026-11-28 01:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0030_placement_drift_hourly"
down_revision: str | None = "0029_placement_hourly"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Through a stable function, which the planner calls when it plans (a subquery it would not):
# the periods that reach past the watermark are then the few they are, found by the ended_at
# and open-period indexes, not a third of all periods, read whole. SECURITY DEFINER: the
# dashboards' role reads the view, not rollup_watermark.
WATERMARK = "rollup_watermark_of('placement_drift_hourly')"


def upgrade() -> None:
    op.create_index(
        op.f("ix_drift_period_started_at_cluster_id_object_id"),
        "drift_period",
        ["started_at", "cluster_id", "object_id"],
    )
    op.execute(f"""
        CREATE FUNCTION rollup_watermark_of(rollup text) RETURNS timestamptz
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
            SELECT COALESCE(
                (SELECT materialized_until FROM rollup_watermark WHERE name = rollup),
                '-infinity')
        $$;
        CREATE TABLE placement_drift_hourly_rollup (
            hour timestamptz NOT NULL,
            environment_id integer NOT NULL,
            cluster_type_id integer NOT NULL,
            minutes numeric NOT NULL,
            PRIMARY KEY (hour, environment_id, cluster_type_id)
        );
        INSERT INTO rollup_watermark (name) VALUES ('placement_drift_hourly');
        CREATE VIEW placement_drift_hourly AS
        SELECT hour, environment_id, cluster_type_id, minutes
        FROM placement_drift_hourly_rollup WHERE hour < {WATERMARK}
        UNION ALL
        SELECT h.hour, COALESCE(c.environment_id, 0)::integer AS environment_id,
               COALESCE(c.cluster_type_id, 0)::integer AS cluster_type_id,
               sum(extract(epoch FROM LEAST(COALESCE(x.ended_at, now()),
                                            h.hour + INTERVAL '1 hour')
                                      - GREATEST(x.started_at, h.hour)) / 60) AS minutes
        FROM (
            SELECT cluster_id, started_at, ended_at FROM drift_period
            WHERE object_id IS NULL AND ended_at IS NULL
            UNION ALL
            SELECT cluster_id, started_at, ended_at FROM drift_period
            WHERE object_id IS NULL AND ended_at > {WATERMARK}
        ) AS x
        JOIN cluster c ON c.id = x.cluster_id
        -- Called once, not for every period.
        CROSS JOIN (SELECT {WATERMARK} OFFSET 0) AS w (since)
        CROSS JOIN LATERAL generate_series(
            date_bin(INTERVAL '1 hour', GREATEST(x.started_at, w.since),
                     TIMESTAMPTZ '2000-01-01 UTC'),
            COALESCE(x.ended_at, now()),
            INTERVAL '1 hour'
        ) AS h (hour)
        WHERE h.hour < COALESCE(x.ended_at, now())
        GROUP BY 1, 2, 3;
        CREATE VIEW grafana.placement_drift_hourly AS
        SELECT x.hour, e.name AS environment, e.position AS environment_position,
               ct.name AS cluster_type, x.minutes
        FROM placement_drift_hourly x
        LEFT JOIN environment e ON e.id = x.environment_id
        LEFT JOIN cluster_type ct ON ct.id = x.cluster_type_id;
        COMMENT ON VIEW grafana.placement_drift_hourly IS
            'Minutes drifted per hour, environment and cluster type, clusters since '
            'decommissioned included.';
    """)


def downgrade() -> None:
    op.execute("""
        DROP VIEW grafana.placement_drift_hourly;
        DROP VIEW placement_drift_hourly;
        DROP TABLE placement_drift_hourly_rollup;
        DELETE FROM rollup_watermark WHERE name = 'placement_drift_hourly';
        DROP FUNCTION rollup_watermark_of(text);
    """)
    op.drop_index(
        op.f("ix_drift_period_started_at_cluster_id_object_id"), table_name="drift_period"
    )
