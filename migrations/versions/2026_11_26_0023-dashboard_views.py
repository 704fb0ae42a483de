"""Dashboard views: the schema `grafana`, all that Grafana's read-only role may read.

Grafana reads the store through a PostgreSQL datasource as a role of its own, granted USAGE on
this schema and SELECT on its views by `fleetmark db grant-readonly ROLE` and nothing else: no
table of `public`, so no token hashes and no repository credentials. The views are owned by
the migrating user, so they read the tables for that role; a view answers exactly the columns
a panel may show.

Each view is a thin layer over what the API already reads (fleet_cluster_state,
fleet_object_state, drift_object, deployment_history, the hourly rollups of 0018, the DORA
rollup), with the names a panel filters on (environment, cluster_type, cluster): a
dashboard's filters are plain comparisons on those columns, and its time filter a range on
the view's time column, which reaches the rollups' and the history's indexes. Nothing here
takes a staleness threshold; the panels do, as the API does.

- environment, workspace: the values of the dashboards' variables, environments with their
  promotion position;
- placement: which workload (and workspace, where the hub's scheduler recorded one) each
  environment's cluster types carry, from desired_version: how a workload filter selects
  clusters;
- cluster: fleet_cluster_state with the drift job's count of drifted objects and when the
  cluster's open drift period started;
- object: fleet_object_state with the drift job's verdict (head of the followed branch,
  commits behind, reasons);
- drift, deployment: drift_object and deployment_history as they are;
- drift_period: drift periods with placement and object names. A range's periods are those
  with `(ended_at IS NULL OR ended_at >= from) AND started_at <= to`: an index on ended_at
  (new here) finds them instead of a read of every period of the history;
- drift_hourly: each cluster's drift periods spread over the hours as 0018's drift_hourly
  spreads them, a row per period and hour, with the period's `started_at` and `ended_at`: a
  panel's filter on those finds its range's periods by that index before spreading them,
  where 0018's view spreads every period of the history first;
- transition_hourly, heartbeat_hourly: the hourly rollups with placement names;
- repository: per GitOps repository, its URL and role and how its harvest goes (last fetch,
  its error, newest harvested commit, errors recorded), never its clone URL or credentials.

Revision ID: 0023_dashboard_views
Revises: 0022_open_drift_by_object
Create Date: 2026-11-26 14:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023_dashboard_views"
down_revision: str | None = "0022_open_drift_by_object"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A cluster's placement names, joined onto rows that carry a cluster_id as `x`.
_PLACED = """
JOIN cluster c ON c.id = x.cluster_id AND c.decommissioned_at IS NULL
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
"""
_NAMES = "c.name AS cluster, e.name AS environment, e.position AS environment_position, " + (
    "ct.name AS cluster_type"
)

VIEWS = {
    "environment": "SELECT name, position FROM environment",
    "workspace": "SELECT name FROM workspace",
    "placement": """
        SELECT d.environment, d.environment_position, d.cluster_type, d.workload,
               ws.name AS workspace, d.deployment_target
        FROM desired_version d
        LEFT JOIN workload w ON w.name = d.workload
        LEFT JOIN workspace ws ON ws.id = w.workspace_id
    """,
    "cluster": """
        SELECT s.*, COALESCE(d.drifted, 0) AS drifted_objects, p.started_at AS drifted_since
        FROM fleet_cluster_state s
        LEFT JOIN cluster_drift d ON d.cluster_id = s.cluster_id
        LEFT JOIN drift_period p
          ON p.cluster_id = s.cluster_id AND p.object_id IS NULL AND p.ended_at IS NULL
    """,
    "object": """
        SELECT o.*, d.revision AS revision_state, d.head_sha, d.commits_behind, d.behind_since,
               d.reasons AS drift_reasons
        FROM fleet_object_state o
        LEFT JOIN object_drift d ON d.object_id = o.object_id
    """,
    "drift": "SELECT * FROM drift_object",
    "deployment": "SELECT * FROM deployment_history",
    "drift_period": f"""
        SELECT x.cluster_id, {_NAMES}, x.object_id, o.kind, o.namespace, o.name, x.started_at,
               x.ended_at, x.reasons
        FROM drift_period x {_PLACED}
        LEFT JOIN object_state o ON o.id = x.object_id
    """,
    "drift_hourly": f"""
        SELECT x.cluster_id, h.hour, {_NAMES}, x.started_at, x.ended_at,
               extract(epoch FROM LEAST(COALESCE(x.ended_at, now()), h.hour + INTERVAL '1 hour')
                                  - GREATEST(x.started_at, h.hour)) / 60 AS minutes
        FROM drift_period x {_PLACED}
        CROSS JOIN LATERAL generate_series(
            date_bin(INTERVAL '1 hour', x.started_at, TIMESTAMPTZ '2000-01-01 UTC'),
            COALESCE(x.ended_at, now()),
            INTERVAL '1 hour'
        ) AS h (hour)
        WHERE x.object_id IS NULL AND h.hour < COALESCE(x.ended_at, now())
    """,
    "transition_hourly": f"""
        SELECT x.cluster_id, x.hour, {_NAMES}, x.transitions, x.applied, x.not_ready, x.drifted
        FROM transition_hourly x {_PLACED}
    """,
    "heartbeat_hourly": f"""
        SELECT x.cluster_id, x.hour, {_NAMES}, x.reports, x.objects
        FROM heartbeat_hourly x {_PLACED}
    """,
    "repository": """
        SELECT r.url, r.role, r.source, r.enabled, r.fetched_at, r.fetch_error,
               h.harvested_at, h.newest_commit_at,
               (SELECT count(*) FROM harvest_error he WHERE he.repository_id = r.id) AS errors
        FROM repository r
        LEFT JOIN LATERAL (
            SELECT max(b.harvested_at) AS harvested_at, max(gc.committed_at) AS newest_commit_at
            FROM git_branch b
            LEFT JOIN git_commit gc ON gc.id = b.head_commit_id
            WHERE b.repository_id = r.id AND b.deleted_at IS NULL
        ) h ON true
    """,
}

COMMENTS = {
    "environment": "Environments, position = their promotion order (NULL: undeclared).",
    "placement": "Per environment and cluster type, the workloads its assignments carry.",
    "cluster": "Per registered cluster: fleet_cluster_state, drifted objects, drifted since.",
    "object": "Live reconciler objects with the drift job's verdict.",
    "repository": "GitOps repositories and their harvest; no clone URL, no credentials.",
}


def upgrade() -> None:
    op.create_index(op.f("ix_drift_period_ended_at"), "drift_period", ["ended_at"])
    op.execute("CREATE SCHEMA grafana")
    for view, query in VIEWS.items():
        op.execute(f"CREATE VIEW grafana.{view} AS {query}")
    for view, comment in COMMENTS.items():
        quoted = comment.replace("'", "''")
        op.execute(f"COMMENT ON VIEW grafana.{view} IS '{quoted}'")


def downgrade() -> None:
    for view in reversed(VIEWS):
        op.execute(f"DROP VIEW grafana.{view}")
    op.execute("DROP SCHEMA grafana")
    op.drop_index(op.f("ix_drift_period_ended_at"), table_name="drift_period")
