"""Rollouts: one definition of a rollout and its state, kept for every reader.

A rollout is a platform commit or a workload version moving through one environment. The
DORA job already judges each one from the transitions into `dora_rollup` (0020): the clusters
it expected, those that reached it and those that failed on it, when it started, completed
and failed. The rollouts job (hub/rollouts, every minute) adds its state as of that same
refresh, by the rules of hub/rollouts/policy.py, into `rollout`, a row per row of
`dora_rollup` (deleted with it):

- state: in_progress, converged (every expected cluster reached it), failed (an expected
  cluster failed on it before it converged) or stalled (no expected cluster reached it for
  FLEETMARK_ROLLOUT_STALL_AFTER), and state_since;
- the DORA job's facts under the names a rollout's reader expects (converged_at for
  completed_at), last_progress_at (its start or the last time an expected cluster reached
  it), stalled (the periods in which it was stalled, a multirange, the last open while it is),
  stall_after (what it was judged with), evaluated_at (the DORA job's refresh).

Why a table the job keeps and not a view: the stall-after is the hub's setting, and a state
with its times, kept, is what alert rules, the dashboards, and later the event stream read
alike, without judging again.

For Grafana's read-only role (schema `grafana`, granted by `fleetmark db grant-readonly`):

- rollout: a row per rollout with its workspace, `subject` ('platform commit' or 'workload
  version'), stalled_at (when its current stall began) and stalls (how many it had);
- rollout_period: a row per period of a rollout in one state, from `since` to `until` (NULL:
  it is in it still): in_progress, stalled, failed, then converged for good. At any time from
  its start a rollout is in exactly one period, so a range's first state is the period that
  holds its start.

Revision ID: 0038_rollouts
Revises: 0037_job_run_view
Create Date: 2026-11-30 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0038_rollouts"
down_revision: str | None = "0037_job_run_view"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A workload's workspace, joined onto rows whose workload column is `x.workload` (as 0027).
_WORKSPACE = """
LEFT JOIN LATERAL (
    SELECT min(s.name) AS name FROM workload w JOIN workspace s ON s.id = w.workspace_id
    WHERE w.name = x.workload
) ws ON true
"""
_NAMES = """x.workload, ws.name AS workspace,
               CASE WHEN x.workload IS NULL THEN 'platform commit' ELSE 'workload version'
               END AS subject,
               x.environment, x.environment_position"""

VIEWS = {
    "rollout": f"""
        SELECT {_NAMES}, x.repository, x.branch, x.revision, x.commit_sha, x.committed_at,
               x.state, x.state_since, x.expected_clusters, x.reached_clusters,
               x.failed_clusters, x.started_at, x.last_progress_at, x.converged_at, x.failed_at,
               CASE WHEN x.state = 'stalled' THEN x.state_since END AS stalled_at,
               (SELECT count(*) FROM unnest(x.stalled)) AS stalls,
               x.failed_cluster, x.failure_reason, x.failure_message,
               extract(epoch FROM x.stall_after) AS stall_after_seconds, x.evaluated_at
        FROM rollout x {_WORKSPACE}
    """,
    "rollout_period": f"""
        SELECT {_NAMES}, x.revision, x.commit_sha, x.committed_at, x.started_at, p.state,
               lower(p.period) AS since, upper(p.period) AS until, x.evaluated_at
        FROM rollout x
        CROSS JOIN LATERAL (
            SELECT 'in_progress' AS state, s.period
            FROM unnest(
                tstzmultirange(tstzrange(x.started_at, COALESCE(x.failed_at, x.converged_at)))
                - x.stalled
            ) AS s (period)
            UNION ALL
            SELECT 'stalled', s.period FROM unnest(x.stalled) AS s (period)
            UNION ALL
            SELECT 'failed', tstzrange(x.failed_at, x.converged_at)
            WHERE x.failed_at IS NOT NULL
            UNION ALL
            SELECT 'converged', tstzrange(x.converged_at, NULL)
            WHERE x.converged_at IS NOT NULL
        ) p
        {_WORKSPACE}
    """,
}

COMMENTS = {
    "rollout": "Rollouts and their state as of the DORA job's refresh (evaluated_at).",
    "rollout_period": "Each rollout's periods in one state, since to until (NULL: still).",
}


def upgrade() -> None:
    op.create_table(
        "rollout",
        sa.Column("dora_rollup_id", sa.BigInteger(), nullable=False),
        sa.Column("workload", sa.String(length=253), nullable=True),
        sa.Column("environment", sa.String(), nullable=False),
        sa.Column("environment_position", sa.Integer(), nullable=True),
        sa.Column("repository", sa.String(), nullable=True),
        sa.Column("branch", sa.String(), nullable=True),
        sa.Column("revision", sa.String(), nullable=False),
        sa.Column("commit_sha", sa.String(length=64), nullable=False),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expected_clusters", sa.BigInteger(), nullable=False),
        sa.Column("reached_clusters", sa.BigInteger(), nullable=False),
        sa.Column("failed_clusters", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_progress_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("converged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failed_cluster", sa.String(), nullable=True),
        sa.Column("failure_reason", sa.String(), nullable=True),
        sa.Column("failure_message", sa.String(), nullable=True),
        sa.Column("stalled", postgresql.TSTZMULTIRANGE(), nullable=False),
        sa.Column("stall_after", sa.Interval(), nullable=False),
        sa.Column("evaluated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('in_progress', 'converged', 'failed', 'stalled')",
            name=op.f("ck_rollout_known_state"),
        ),
        sa.ForeignKeyConstraint(
            ["dora_rollup_id"],
            ["dora_rollup.id"],
            name=op.f("fk_rollout_dora_rollup_id_dora_rollup"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("dora_rollup_id", name=op.f("pk_rollout")),
    )
    op.create_index(op.f("ix_rollout_started_at"), "rollout", ["started_at"])
    for view, query in VIEWS.items():
        op.execute(f"CREATE VIEW grafana.{view} AS {query}")
    for view, comment in COMMENTS.items():
        quoted = comment.replace("'", "''")
        op.execute(f"COMMENT ON VIEW grafana.{view} IS '{quoted}'")


def downgrade() -> None:
    for view in reversed(VIEWS):
        op.execute(f"DROP VIEW grafana.{view}")
    op.drop_index(op.f("ix_rollout_started_at"), table_name="rollout")
    op.drop_table("rollout")
