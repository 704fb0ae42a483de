"""Query views: fleet state and deployment history, read by the API and the dashboards alike.

- fleet_object_state: every live reconciler object of a registered cluster with one state out
  of ready, failing, progressing, suspended (drift is a separate flag: a Ready object can
  have drifted).
- fleet_cluster_state: per cluster, its placement, when it last reported and its objects
  counted by state. Staleness depends on "now" and a threshold, so the view leaves it to the
  reader (`last_seen_at < now() - interval '10 minutes'` in a dashboard; the hub passes its
  own clock).
- deployment_history: every change of what an object has applied, with the revision and
  version before and after. It needs the previous transition of the same object, a window
  function, so it is a plain view: a TimescaleDB continuous aggregate cannot hold one.

Revision ID: 0004_query_views
Revises: 0003_harvest
Create Date: 2026-11-22 14:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004_query_views"
down_revision: str | None = "0003_harvest"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FLEET_OBJECT_STATE = """
CREATE VIEW fleet_object_state AS
SELECT
    o.id AS object_id,
    o.cluster_id,
    c.name AS cluster,
    c.environment_id,
    e.name AS environment,
    e.position AS environment_position,
    c.cluster_type_id,
    ct.name AS cluster_type,
    o.reconciler,
    o.kind,
    o.namespace,
    o.name,
    o.source_url,
    o.source_ref,
    o.source_path,
    o.applied_revision,
    o.applied_sha,
    o.applied_version,
    o.ready,
    o.reason,
    o.message,
    o.health,
    o.drifted,
    o.suspended,
    CASE
        WHEN o.suspended THEN 'suspended'
        WHEN o.ready IS FALSE THEN 'failing'
        WHEN o.ready THEN 'ready'
        ELSE 'progressing'
    END AS state,
    o.changed_at
FROM object_state o
JOIN cluster c ON c.id = o.cluster_id
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
WHERE o.removed_at IS NULL AND c.decommissioned_at IS NULL
"""

FLEET_CLUSTER_STATE = """
CREATE VIEW fleet_cluster_state AS
SELECT
    c.id AS cluster_id,
    c.name AS cluster,
    c.environment_id,
    e.name AS environment,
    e.position AS environment_position,
    c.cluster_type_id,
    ct.name AS cluster_type,
    c.registered_at,
    c.first_seen_at,
    c.last_seen_at,
    count(o.object_id) AS objects,
    count(o.object_id) FILTER (WHERE o.state = 'ready') AS ready,
    count(o.object_id) FILTER (WHERE o.state = 'failing') AS failing,
    count(o.object_id) FILTER (WHERE o.state = 'progressing') AS progressing,
    count(o.object_id) FILTER (WHERE o.state = 'suspended') AS suspended,
    count(o.object_id) FILTER (WHERE o.drifted) AS drifted
FROM cluster c
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
LEFT JOIN fleet_object_state o ON o.cluster_id = c.id
WHERE c.decommissioned_at IS NULL
GROUP BY c.id, e.name, e.position, ct.name
"""

# Transitions that carry no applied revision (an object still reconciling its first one) are
# skipped before comparing, so a gap in what the agent saw is not a deployment. Objects are
# partitioned by (cluster_id, object_id), not object_id alone (which implies the cluster), so
# a filter on cluster_id is pushed below the window function into the scan.
DEPLOYMENT_HISTORY = """
CREATE VIEW deployment_history AS
SELECT
    d.observed_at AS deployed_at,
    d.cluster_id,
    c.name AS cluster,
    c.environment_id,
    e.name AS environment,
    e.position AS environment_position,
    c.cluster_type_id,
    ct.name AS cluster_type,
    d.object_id,
    o.reconciler,
    o.kind,
    o.namespace,
    o.name,
    d.source_url,
    d.source_ref,
    d.source_path,
    d.applied_revision,
    d.applied_sha,
    d.applied_version,
    d.previous_revision,
    d.previous_sha,
    d.previous_version,
    d.ready,
    d.reason
FROM (
    SELECT
        t.observed_at,
        t.cluster_id,
        t.object_id,
        t.source_url,
        t.source_ref,
        t.source_path,
        t.applied_revision,
        t.applied_sha,
        t.applied_version,
        t.ready,
        t.reason,
        lag(t.applied_revision) OVER previous AS previous_revision,
        lag(t.applied_sha) OVER previous AS previous_sha,
        lag(t.applied_version) OVER previous AS previous_version
    FROM status_transition t
    WHERE t.applied_sha IS NOT NULL OR t.applied_version IS NOT NULL
    WINDOW previous AS (
        PARTITION BY t.cluster_id, t.object_id ORDER BY t.observed_at, t.received_at
    )
) d
JOIN cluster c ON c.id = d.cluster_id
JOIN object_state o ON o.id = d.object_id
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
WHERE (d.applied_sha, d.applied_version) IS DISTINCT FROM (d.previous_sha, d.previous_version)
"""

COMMENTS = {
    "fleet_object_state": (
        "Live reconciler objects of registered clusters; state is one of ready, failing, "
        "progressing, suspended; drifted is a separate flag."
    ),
    "fleet_cluster_state": (
        "Per registered cluster: placement, last report (hub time) and objects by state. "
        "ready + failing + progressing + suspended = objects; drifted overlaps them. "
        "Stale: last_seen_at older than the hub's stale threshold; never reported: NULL."
    ),
    "deployment_history": (
        "Every change of the revision an object applied (sha or version). An object's first "
        "row has NULL previous_* columns: fleetmark first saw it applied then."
    ),
}


def upgrade() -> None:
    for statement in (FLEET_OBJECT_STATE, FLEET_CLUSTER_STATE, DEPLOYMENT_HISTORY):
        op.execute(statement)
    for view, comment in COMMENTS.items():
        quoted = comment.replace("'", "''")
        op.execute(f"COMMENT ON VIEW {view} IS '{quoted}'")


def downgrade() -> None:
    op.execute("DROP VIEW deployment_history")
    op.execute("DROP VIEW fleet_cluster_state")
    op.execute("DROP VIEW fleet_object_state")
