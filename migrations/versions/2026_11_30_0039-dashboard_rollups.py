"""Two hourly rollups the hub's rollup job keeps for the dashboards: the fleet's health per
environment (`fleet_health_hourly`) and what changed, from which revision to which
(`deployment_hourly`).

`fleet_health_hourly`: how many clusters of each environment and cluster type were failing (an
object not Ready and not suspended), drifted (an object with a drift reason, as the drift job
last judged) and stale (never reported, or silent for longer than
FLEETMARK_STALE_AFTER_SECONDS). No history says that of a past hour (a
drift period's reasons widen as it goes on; reconciler states are per object), so the rollup
job samples the fleet as it is at each of its runs (every 10 minutes) and adds the sample to
the hour's row: `samples` runs, and per state the clusters summed over them, so that a sum over
samples is an hour's average. A sample is never taken again; hours the hub did not run have
no row. Under the placement each cluster had when sampled.

`deployment_hourly`: the changes of `deployment_history` per hour, environment, cluster type,
object name (a workload's deployment target, or the platform's root) and from → to revision
(the version, else the commit's first 12 characters): how many changes, on how many clusters (a
cluster whose Flux source and Kustomization both change counts once), how many not Ready when
they changed, the first and the last. A prod rollout is then a few rows instead of a row per
cluster and object, and a dashboard reads a month of them without looking up each change's
previous revision. A table the rollup job keeps as `placement_hourly` (0029): the hours before
the watermark in `rollup_watermark`, the last three days of them recomputed each run, and from
the watermark on aggregated when asked (`rollup_watermark_of`, 0030, so that the history's time
index finds those changes). Clusters are counted per hour: a cluster making one change in two
hours (its source fetched at 10:59, applied at 11:01) counts in each. Under the placement each
cluster has when rolled up, clusters since decommissioned included.

Both are kept for FLEETMARK_ROLLUP_RETENTION, as the other rollups, and have a view in schema
`grafana` naming the environment and cluster type; fleet_health_hourly's gives each state's
average over the hour's samples.

Revision ID: 0039_dashboard_rollups
Revises: 0038_rollouts
Create Date: 2026-11-29 12:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0039_dashboard_rollups"
down_revision: str | None = "0038_rollouts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATES = ("failing", "drifted", "stale")
WATERMARK = "rollup_watermark_of('deployment_hourly')"
_PLACED = """
LEFT JOIN environment e ON e.id = x.environment_id
LEFT JOIN cluster_type ct ON ct.id = x.cluster_type_id
"""
_NAMES = "e.name AS environment, e.position AS environment_position, ct.name AS cluster_type"
CHANGES = (
    "changes bigint NOT NULL, clusters bigint NOT NULL, not_ready bigint NOT NULL, "
    "first_at timestamptz NOT NULL, last_at timestamptz NOT NULL"
)


def upgrade() -> None:
    sums = ", ".join(f"{state} bigint NOT NULL" for state in STATES)
    averages = ", ".join(f"x.{state}::numeric / x.samples AS {state}" for state in STATES)
    op.execute(f"""
        CREATE TABLE fleet_health_hourly (
            hour timestamptz NOT NULL,
            environment_id integer NOT NULL,
            cluster_type_id integer NOT NULL,
            samples integer NOT NULL,
            clusters bigint NOT NULL,
            {sums},
            PRIMARY KEY (hour, environment_id, cluster_type_id)
        );
        CREATE VIEW grafana.fleet_health_hourly AS
        SELECT x.hour, {_NAMES}, x.samples, x.clusters::numeric / x.samples AS clusters,
               {averages}
        FROM fleet_health_hourly x {_PLACED};
        COMMENT ON VIEW grafana.fleet_health_hourly IS
            'Clusters failing, drifted and stale per hour, environment and cluster type: the '
            'average over the rollup job''s samples of the hour.';

        CREATE TABLE deployment_hourly_rollup (
            hour timestamptz NOT NULL,
            environment_id integer NOT NULL,
            cluster_type_id integer NOT NULL,
            name text NOT NULL,
            from_revision text,
            to_revision text,
            {CHANGES}
        );
        CREATE INDEX ix_deployment_hourly_rollup_hour ON deployment_hourly_rollup (hour);
        INSERT INTO rollup_watermark (name) VALUES ('deployment_hourly');
        CREATE VIEW deployment_hourly AS
        SELECT hour, environment_id, cluster_type_id, name, from_revision, to_revision, changes,
               clusters, not_ready, first_at, last_at
        FROM deployment_hourly_rollup WHERE hour < {WATERMARK}
        UNION ALL
        SELECT date_bin(INTERVAL '1 hour', d.deployed_at, TIMESTAMPTZ '2000-01-01 UTC'),
               COALESCE(d.environment_id, 0)::integer, COALESCE(d.cluster_type_id, 0)::integer,
               d.name::text,
               COALESCE(d.previous_version, left(d.previous_sha, 12))::text,
               COALESCE(d.applied_version, left(d.applied_sha, 12))::text,
               count(*), count(DISTINCT d.cluster_id), count(*) FILTER (WHERE d.ready IS FALSE),
               min(d.deployed_at), max(d.deployed_at)
        FROM deployment_history d
        WHERE d.deployed_at >= {WATERMARK}
        GROUP BY 1, 2, 3, 4, 5, 6;
        CREATE VIEW grafana.deployment_hourly AS
        SELECT x.hour, {_NAMES}, x.name, x.from_revision, x.to_revision, x.changes, x.clusters,
               x.not_ready, x.first_at, x.last_at
        FROM deployment_hourly x {_PLACED};
        COMMENT ON VIEW grafana.deployment_hourly IS
            'Changes of applied revision per hour, environment, cluster type, object name and '
            'from/to revision, clusters since decommissioned included.';
    """)


def downgrade() -> None:
    op.execute("""
        DROP VIEW grafana.deployment_hourly;
        DROP VIEW deployment_hourly;
        DROP TABLE deployment_hourly_rollup;
        DELETE FROM rollup_watermark WHERE name = 'deployment_hourly';
        DROP VIEW grafana.fleet_health_hourly;
        DROP TABLE fleet_health_hourly;
    """)
