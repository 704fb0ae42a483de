"""Drift: the drift job's verdict per object, drift periods, and the view readers share.

- object_drift: per live reconciler object, how its applied revision compares with the head
  of the harvested branch it follows, and every reason it is drifted but staleness, with the
  evidence. Written by the drift job (hub/drift/), so that no request judges the fleet.
- cluster_drift: per registered cluster, its judged objects counted (in all, drifted, per
  reason, untracked) and its place in a drift listing (rank); cluster_drift_reasons: per
  cluster, how many objects have each set of reasons. Drift queries count and page with
  these, a row per cluster, and read the objects of the clusters on their page only: their
  cost follows the clusters, not the objects, even when a stale agent makes every object of
  its cluster drifted.
- drift_period: spans during which a cluster (object_id NULL) or an object was drifted,
  opened and closed by the same job; ended_at is NULL while a span is open.
- drift_evaluation: when the job last judged the fleet (one row).
- drift_object: the view the API and the dashboards read: every judged object of a
  registered cluster with its placement, plus one row without an object for each cluster
  the job has judged no object of (e.g. one whose agent never reported). Staleness depends
  on "now" and a threshold, so the view leaves it to the reader, as fleet_cluster_state does:
  an agent is stale when last_seen_at is NULL or older than the threshold, and then every row
  of its cluster is drifted for that reason too.

None of these tables is a hypertable and none refers to one, so TimescaleDB's rules hold with
or without the extension. drift_period grows with drift episodes, not with reports.

Revision ID: 0006_drift
Revises: 0005_scheduling
Create Date: 2026-11-23 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006_drift"
down_revision: str | None = "0005_scheduling"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Two branches, so a filter on reasons or cluster_id reaches object_drift's indexes: the judged
# objects, and a row without an object for every cluster that has none.
DRIFT_OBJECT = """
CREATE VIEW drift_object AS
SELECT
    d.cluster_id,
    c.name AS cluster,
    c.environment_id,
    e.name AS environment,
    e.position AS environment_position,
    c.cluster_type_id,
    ct.name AS cluster_type,
    c.last_seen_at,
    d.object_id,
    d.reconciler,
    d.kind,
    d.namespace,
    d.name,
    d.source_url,
    d.source_ref,
    d.source_path,
    r.url AS repository,
    b.name AS branch,
    d.revision,
    d.applied_revision,
    d.applied_sha,
    d.head_sha,
    d.commits_behind,
    d.behind_since,
    d.ready,
    d.reason,
    d.message,
    d.live_drift,
    d.suspended,
    d.config_mismatches,
    d.reasons,
    d.changed_at
FROM object_drift d
JOIN cluster c ON c.id = d.cluster_id
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
LEFT JOIN git_branch b ON b.id = d.branch_id
LEFT JOIN repository r ON r.id = b.repository_id
WHERE c.decommissioned_at IS NULL
UNION ALL
SELECT
    c.id,
    c.name,
    c.environment_id,
    e.name,
    e.position,
    c.cluster_type_id,
    ct.name,
    c.last_seen_at,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    '{}',
    NULL
FROM cluster c
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
WHERE c.decommissioned_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM object_drift d WHERE d.cluster_id = c.id)
"""

COMMENT = (
    "Per registered cluster, each reconciler object the drift job judged, with its reasons "
    "(behind, diverged, unknown_revision, not_applied, failing, config_mismatch, live_drift) "
    "and their evidence; one row with a NULL object_id for a cluster with no judged object. "
    "Stale is the reader's to add: last_seen_at NULL or older than the hub's stale threshold."
)


def upgrade() -> None:
    op.create_table(
        "object_drift",
        sa.Column("object_id", sa.BigInteger(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("reconciler", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("source_url", sa.String(), nullable=True),
        sa.Column("source_ref", sa.String(), nullable=True),
        sa.Column("source_path", sa.String(), nullable=True),
        sa.Column("branch_id", sa.Integer(), nullable=True),
        sa.Column("revision", sa.String(length=16), nullable=False),
        sa.Column("applied_revision", sa.String(), nullable=True),
        sa.Column("applied_sha", sa.String(length=64), nullable=True),
        sa.Column("head_sha", sa.String(length=64), nullable=True),
        sa.Column("commits_behind", sa.Integer(), nullable=True),
        sa.Column("behind_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ready", sa.Boolean(), nullable=True),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("live_drift", sa.Boolean(), nullable=False),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("config_mismatches", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "reasons", postgresql.ARRAY(sa.String(length=32)), server_default="{}", nullable=False
        ),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["branch_id"],
            ["git_branch.id"],
            name=op.f("fk_object_drift_branch_id_git_branch"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_object_drift_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["object_id"],
            ["object_state.id"],
            name=op.f("fk_object_drift_object_id_object_state"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("object_id", name=op.f("pk_object_drift")),
    )
    op.create_index(
        op.f("ix_object_drift_cluster_id"), "object_drift", ["cluster_id"], unique=False
    )
    op.create_table(
        "cluster_drift",
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        *(
            sa.Column(name, sa.Integer(), nullable=False)
            for name in (
                "objects",
                "drifted",
                "untracked",
                "behind",
                "diverged",
                "unknown_revision",
                "not_applied",
                "failing",
                "config_mismatch",
                "live_drift",
            )
        ),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_cluster_drift_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_id", name=op.f("pk_cluster_drift")),
    )
    op.create_table(
        "cluster_drift_reasons",
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("reasons", postgresql.ARRAY(sa.String(length=32)), nullable=False),
        sa.Column("objects", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_cluster_drift_reasons_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_id", "reasons", name=op.f("pk_cluster_drift_reasons")),
    )
    op.create_table(
        "drift_period",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("object_id", sa.BigInteger(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "reasons", postgresql.ARRAY(sa.String(length=32)), server_default="{}", nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_drift_period_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["object_id"],
            ["object_state.id"],
            name=op.f("fk_drift_period_object_id_object_state"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_drift_period")),
    )
    op.create_index(
        op.f("ix_drift_period_cluster_id_started_at"),
        "drift_period",
        ["cluster_id", "started_at"],
        unique=False,
    )
    op.create_index(
        op.f("ix_drift_period_object_id_started_at"),
        "drift_period",
        ["object_id", "started_at"],
        unique=False,
    )
    op.create_index(
        "ix_drift_period_open",
        "drift_period",
        ["cluster_id", "object_id"],
        unique=False,
        postgresql_where=sa.text("ended_at IS NULL"),
    )
    op.create_table(
        "drift_evaluation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("evaluated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_drift_evaluation_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_drift_evaluation")),
    )
    op.execute(DRIFT_OBJECT)
    quoted = COMMENT.replace("'", "''")
    op.execute(f"COMMENT ON VIEW drift_object IS '{quoted}'")


def downgrade() -> None:
    op.execute("DROP VIEW drift_object")
    op.drop_table("drift_evaluation")
    op.drop_index("ix_drift_period_open", table_name="drift_period")
    op.drop_index(op.f("ix_drift_period_object_id_started_at"), table_name="drift_period")
    op.drop_index(op.f("ix_drift_period_cluster_id_started_at"), table_name="drift_period")
    op.drop_table("drift_period")
    op.drop_table("cluster_drift_reasons")
    op.drop_table("cluster_drift")
    op.drop_index(op.f("ix_object_drift_cluster_id"), table_name="object_drift")
    op.drop_table("object_drift")
