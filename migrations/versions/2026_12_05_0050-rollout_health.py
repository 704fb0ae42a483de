"""Rollout health: the current rollout of each workload (and of the platform commits) in each
environment, as numbers (docs/concepts.md, "Rollout health").

`rollout_health` holds a row per (workload, environment), workload NULL for the platform
commits: the newest rollout the rollouts job keeps (the last started; of two started at once,
the later commit), with

- converged_clusters of expected_clusters and their ratio, failed_clusters;
- the time to converge across the clusters that reached it, from the target's commit time (for
  a version: the app commit that first carried it) to when the cluster ran it Ready: p50 and
  p95 (linear interpolation) and the max;
- max_open: true while it has not converged; the max is then the time so far, as of the DORA
  job's refresh (evaluated_at), and grows until it converges.

The API, /metrics and the gate read `rollout_health`; Grafana's read-only role reads
`grafana.rollout_health`, the same rows with the workload's workspace and the subject.

Revision ID: 0050_rollout_health
Revises: 0049_event_cluster_types
Create Date: 2026-12-05 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0050_rollout_health"
down_revision: str | None = "0049_event_cluster_types"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SECONDS = "CAST(extract(epoch FROM {0}) AS double precision)"

HEALTH = f"""
SELECT x.workload, x.environment, x.environment_position, x.revision, x.commit_sha,
       x.committed_at, x.started_at, x.state, x.expected_clusters,
       x.reached_clusters AS converged_clusters, x.failed_clusters,
       CAST(x.reached_clusters AS double precision) / NULLIF(x.expected_clusters, 0)
           AS converged_ratio,
       t.p50 AS time_to_converge_p50_seconds, t.p95 AS time_to_converge_p95_seconds,
       CASE WHEN x.converged_at IS NULL
            THEN {_SECONDS.format("x.evaluated_at - x.committed_at")} ELSE t.max
       END AS time_to_converge_max_seconds,
       x.converged_at IS NULL AS max_open,
       x.converged_at, x.failed_cluster, x.failure_reason, x.evaluated_at
FROM (
    SELECT DISTINCT ON (r.workload, r.environment) r.dora_rollup_id
    FROM rollout r
    ORDER BY r.workload, r.environment, r.started_at DESC, r.committed_at DESC,
             r.dora_rollup_id DESC
) current
JOIN rollout x ON x.dora_rollup_id = current.dora_rollup_id
JOIN dora_rollup d ON d.id = x.dora_rollup_id
CROSS JOIN LATERAL (
    SELECT q[1] AS p50, q[2] AS p95, max AS max
    FROM (
        SELECT percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY c.seconds) AS q,
               max(c.seconds) AS max
        FROM (
            SELECT {_SECONDS.format("greatest(r.reached_at, x.committed_at) - x.committed_at")}
                   AS seconds
            FROM unnest(d.reached_times) AS r (reached_at)
        ) c
    ) a
) t
"""

GRAFANA = """
SELECT x.workload, ws.name AS workspace,
       CASE WHEN x.workload IS NULL THEN 'platform commit' ELSE 'workload version' END
           AS subject,
       x.environment, x.environment_position, x.revision, x.commit_sha, x.committed_at,
       x.started_at, x.state, x.expected_clusters, x.converged_clusters, x.failed_clusters,
       x.converged_ratio, x.time_to_converge_p50_seconds, x.time_to_converge_p95_seconds,
       x.time_to_converge_max_seconds, x.max_open, x.converged_at, x.failed_cluster,
       x.failure_reason, x.evaluated_at
FROM rollout_health x
LEFT JOIN LATERAL (
    SELECT min(s.name) AS name FROM workload w JOIN workspace s ON s.id = w.workspace_id
    WHERE w.name = x.workload
) ws ON true
"""

COMMENT = (
    "The current rollout of each workload (and of the platform commits) per environment: "
    "clusters converged, time to converge (p50, p95, max; max_open: the time so far)."
)


def upgrade() -> None:
    op.execute(f"CREATE VIEW rollout_health AS {HEALTH}")
    op.execute(f"CREATE VIEW grafana.rollout_health AS {GRAFANA}")
    quoted = COMMENT.replace("'", "''")
    op.execute(f"COMMENT ON VIEW grafana.rollout_health IS '{quoted}'")


def downgrade() -> None:
    op.execute("DROP VIEW grafana.rollout_health")
    op.execute("DROP VIEW rollout_health")
