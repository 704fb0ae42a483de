"""Promotion gate answers and the environment diff kept in the store, for dashboards and alert
rules.

The gate's policy is Python (hub/gate/policy.py): no SQL view can answer it. The promotion job
(hub/promotion/service.py, every `gate_answers_interval`) asks the gate, by the code the
endpoint runs, about the newest platform commits and workload versions of each environment and
keeps the answers in `gate_answer`, one row per commit or version: the verdict, the counts and
the clusters that block it.

Why a difference between environments is there (awaiting promotion, pinned, diverged, failed,
drifted) is also decided in Python (hub/envdiff/compare.py, versions compared as dotted
numbers). The environment diff job, after summing up what clusters run, keeps the diff of all
environments in promotion order as GET /api/v1/diff answers it: `environment_diff_cell`, one
row per workload, cluster type and environment, and `environment_diff_config`, one per value of
a config key that differs.

What Grafana reads of them, and of the DORA rollup (0020), is in views of schema `grafana`
(0023), so that its read-only role reads these and no table:

- gate_answer: the kept answers, the blocking clusters named in one column; gate_blocking: one
  row per blocking cluster with its state and why; promotable: per environment (and workload)
  the newest kept commit or version and its verdict, and the newest that passes;
- environment_diff: the kept cells, the deployed versions and the reasons in words;
  environment_diff_config: the config values that differ;
- dora_rollout: the rollouts as of the DORA job's last refresh, with lead time and time to
  restore in seconds and when that refresh was. A panel counts a range as GET /api/v1/dora
  does: facts at or after the earlier of the range's end and the refresh are not yet seen.

Workloads carry their workspace (workload.workspace_id), which the dashboards filter on.

Revision ID: 0027_promotion_gates
Revises: 0026_object_name_lookup
Create Date: 2026-11-26 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0027_promotion_gates"
down_revision: str | None = "0026_object_name_lookup"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A workload's workspace, joined onto rows whose workload column is `x.workload` (one row
# each: two workspaces may have a workload of the same name).
_WORKSPACE = """
LEFT JOIN LATERAL (
    SELECT min(s.name) AS name FROM workload w JOIN workspace s ON s.id = w.workspace_id
    WHERE w.name = x.workload
) ws ON true
"""


# One line per listed item of a JSON array `items`, in order.
def _listed(items: str, line: str, separator: str) -> str:
    return (
        f"(SELECT string_agg({line}, '{separator}' ORDER BY n) "
        f"FROM jsonb_array_elements({items}) WITH ORDINALITY AS i (item, n))"
    )


VIEWS = {
    "gate_answer": f"""
        SELECT x.environment, x.environment_position, x.workload, ws.name AS workspace,
               CASE WHEN x.workload IS NULL THEN 'platform commit' ELSE 'workload version'
               END AS subject,
               x.revision, x.newest, x.verdict, x.expected, x.compliant, x.stale,
               x.never_reported, x.blocking_count,
               {_listed("x.blocking", "i.item ->> 'cluster'", ", ")} AS blocking_clusters,
               array_to_string(x.reasons, '; ') AS reasons, x.earliest_pass_at, x.evaluated_at
        FROM gate_answer x {_WORKSPACE}
    """,
    "gate_blocking": f"""
        SELECT x.environment, x.environment_position, x.workload, ws.name AS workspace,
               x.revision, x.newest, x.verdict, b.n AS place, b.item ->> 'cluster' AS cluster,
               b.item ->> 'cluster_type' AS cluster_type, b.item ->> 'state' AS state,
               b.item ->> 'explanation' AS explanation
        FROM gate_answer x
        CROSS JOIN LATERAL jsonb_array_elements(x.blocking) WITH ORDINALITY AS b (item, n)
        {_WORKSPACE}
    """,
    "promotable": f"""
        SELECT x.environment, x.environment_position, x.workload, ws.name AS workspace,
               x.revision AS newest_revision, x.verdict AS newest_verdict,
               p.revision AS promotable_revision, p.newest AS promotable_newest,
               x.evaluated_at
        FROM gate_answer x
        LEFT JOIN LATERAL (
            SELECT a.revision, a.newest FROM gate_answer a
            WHERE a.environment = x.environment AND a.workload IS NOT DISTINCT FROM x.workload
              AND a.verdict = 'passed'
            ORDER BY a.newest LIMIT 1
        ) p ON true
        {_WORKSPACE}
        WHERE x.newest = 1
    """,
    "environment_diff": f"""
        SELECT x.workload, ws.name AS workspace, x.cluster_type, x.paired_target,
               x.environment, x.environment_position, x.environment_order, x.state,
               x.assigned, x.deployment_target, x.desired_version, x.pinned_ref,
               {
        _listed(
            "x.deployed",
            "COALESCE(i.item ->> 'version', left(i.item ->> 'commit', 12)) "
            "|| ' on ' || (i.item ->> 'clusters')",
            ", ",
        )
    } AS deployed_versions,
               x.clusters, x.in_sync, x.drifted, x.failing, x.not_reporting,
               array_to_string(x.reasons, ', ') AS reasons,
               array_to_string(x.details, '; ') AS details, x.evaluated_at
        FROM environment_diff_cell x {_WORKSPACE}
    """,
    "environment_diff_config": f"""
        SELECT x.workload, ws.name AS workspace, x.cluster_type, x.paired_target, x.key,
               x.environment, x.environment_order, x.value
        FROM environment_diff_config x {_WORKSPACE}
    """,
    "dora_rollout": f"""
        SELECT x.workload, ws.name AS workspace, r.environment, r.environment_position,
               r.revision, r.commit_sha, r.committed_at, r.started_at, r.completed_at,
               r.failed_at, r.restored_at, r.expected_clusters, r.reached_clusters,
               r.failed_clusters, r.failed_cluster, r.failure_reason,
               extract(epoch FROM r.completed_at - r.committed_at) AS lead_time_seconds,
               extract(epoch FROM r.restored_at - r.failed_at) AS restore_seconds,
               s.refreshed_at
        FROM dora_rollup r
        JOIN dora_refresh s ON s.workload = r.workload
        CROSS JOIN LATERAL (SELECT NULLIF(r.workload, '') AS workload) x
        {_WORKSPACE}
    """,
}

COMMENTS = {
    "gate_answer": "The promotion job's gate answers for the newest commits and versions.",
    "gate_blocking": "The clusters that block each kept gate answer, with their state.",
    "promotable": "Per environment and workload: the newest kept answer and the newest passed.",
    "environment_diff": "The diff of every environment, a row per cell, with its reasons.",
    "environment_diff_config": "Config key values that differ between environments.",
    "dora_rollout": "DORA rollouts as of the DORA job's last refresh (refreshed_at).",
}


def _row_columns() -> list[sa.Column[str]]:
    """What names a diff row."""
    return [
        sa.Column("workload", sa.String(), nullable=False),
        sa.Column("cluster_type", sa.String(), nullable=False),
        sa.Column("paired_target", sa.String(), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "gate_answer",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("environment", sa.String(), nullable=False),
        sa.Column("environment_position", sa.Integer(), nullable=True),
        sa.Column("workload", sa.String(length=253), nullable=True),
        sa.Column("revision", sa.String(), nullable=False),
        sa.Column("newest", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(), nullable=False),
        sa.Column("reasons", postgresql.ARRAY(sa.String()), nullable=False),
        sa.Column("expected", sa.Integer(), nullable=False),
        sa.Column("compliant", sa.Integer(), nullable=False),
        sa.Column("stale", sa.Integer(), nullable=False),
        sa.Column("never_reported", sa.Integer(), nullable=False),
        sa.Column("blocking", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("blocking_count", sa.Integer(), nullable=False),
        sa.Column("earliest_pass_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("evaluated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gate_answer")),
        sa.UniqueConstraint(
            "environment",
            "workload",
            "revision",
            name=op.f("uq_gate_answer_environment_workload_revision"),
            postgresql_nulls_not_distinct=True,
        ),
    )

    op.create_table(
        "environment_diff_cell",
        sa.Column("id", sa.Integer(), nullable=False),
        *_row_columns(),
        sa.Column("environment", sa.String(), nullable=False),
        sa.Column("environment_position", sa.Integer(), nullable=True),
        sa.Column("environment_order", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("assigned", sa.Boolean(), nullable=False),
        sa.Column("deployment_target", sa.String(), nullable=True),
        sa.Column("desired_version", sa.String(), nullable=True),
        sa.Column("pinned_ref", sa.String(), nullable=True),
        sa.Column("clusters", sa.Integer(), nullable=False),
        sa.Column("in_sync", sa.Integer(), nullable=False),
        sa.Column("drifted", sa.Integer(), nullable=False),
        sa.Column("failing", sa.Integer(), nullable=False),
        sa.Column("not_reporting", sa.Integer(), nullable=False),
        sa.Column("deployed", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("reasons", postgresql.ARRAY(sa.String()), nullable=False),
        sa.Column("details", postgresql.ARRAY(sa.String()), nullable=False),
        sa.Column("evaluated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environment_diff_cell")),
    )
    op.create_table(
        "environment_diff_config",
        sa.Column("id", sa.Integer(), nullable=False),
        *_row_columns(),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("environment", sa.String(), nullable=False),
        sa.Column("environment_order", sa.Integer(), nullable=False),
        sa.Column("value", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environment_diff_config")),
    )
    for view, query in VIEWS.items():
        op.execute(f"CREATE VIEW grafana.{view} AS {query}")
    for view, comment in COMMENTS.items():
        quoted = comment.replace("'", "''")
        op.execute(f"COMMENT ON VIEW grafana.{view} IS '{quoted}'")


def downgrade() -> None:
    for view in reversed(VIEWS):
        op.execute(f"DROP VIEW grafana.{view}")
    op.drop_table("environment_diff_config")
    op.drop_table("environment_diff_cell")
    op.drop_table("gate_answer")
