"""Dashboard views of what the hub keeps already: each cluster's drifted objects counted per
reason, and the versions the environment diff found deployed (when its jobs last ran is
grafana.job_run, 0037).

- cluster_drift: per registered cluster, its judged objects, those drifted, and per reason the
  objects with it, as the drift job counted them (0006's `cluster_drift`), with the cluster's
  last report: the drift job leaves staleness to the reader;
- environment_diff_version: per cell of the kept environment diff (0027), one row per version
  (else commit) its clusters run, with how many clusters run it.

Revision ID: 0040_dashboard_reads
Revises: 0039_dashboard_rollups
Create Date: 2026-11-29 12:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0040_dashboard_reads"
down_revision: str | None = "0039_dashboard_rollups"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The drift reasons cluster_drift counts, as of this migration.
REASONS = (
    "behind",
    "diverged",
    "unknown_revision",
    "not_applied",
    "failing",
    "config_mismatch",
    "live_drift",
)

VIEWS = {
    "cluster_drift": f"""
        SELECT x.cluster_id, c.name AS cluster, e.name AS environment,
               e.position AS environment_position, ct.name AS cluster_type, c.last_seen_at,
               x.objects, x.drifted, {", ".join(f"x.{reason}" for reason in REASONS)}
        FROM cluster_drift x
        JOIN cluster c ON c.id = x.cluster_id AND c.decommissioned_at IS NULL
        LEFT JOIN environment e ON e.id = c.environment_id
        LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
    """,
    "environment_diff_version": """
        SELECT x.workload, ws.name AS workspace, x.cluster_type, x.paired_target,
               x.environment, x.environment_position, x.environment_order,
               COALESCE(i.item ->> 'version', left(i.item ->> 'commit', 12)) AS version,
               (i.item ->> 'clusters')::integer AS clusters, x.evaluated_at
        FROM environment_diff_cell x
        CROSS JOIN LATERAL jsonb_array_elements(x.deployed) AS i (item)
        LEFT JOIN LATERAL (
            SELECT min(s.name) AS name FROM workload w JOIN workspace s ON s.id = w.workspace_id
            WHERE w.name = x.workload
        ) ws ON true
    """,
}
COMMENTS = {
    "cluster_drift": "Per cluster, its judged objects, the drifted ones and those per reason.",
    "environment_diff_version": "Per environment diff cell, the versions run and on how many.",
}


def upgrade() -> None:
    for view, query in VIEWS.items():
        op.execute(f"CREATE VIEW grafana.{view} AS {query}")
    for view, comment in COMMENTS.items():
        op.execute(f"COMMENT ON VIEW grafana.{view} IS '{comment}'")


def downgrade() -> None:
    for view in reversed(VIEWS):
        op.execute(f"DROP VIEW grafana.{view}")
