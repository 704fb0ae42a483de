"""Drift counted per environment and cluster type, and the drifted clusters by listing rank.

A drift query without filters counted every registered cluster's row of `cluster_drift` per
request (10,000 clusters: about 20 ms). The drift job now also sums them per environment and
cluster type into `drift_total`, with the ranks each such group takes in a listing; the query
counts from those few rows and the stale clusters, and pages through the clusters with
drifted objects by rank (ix_cluster_drift_drifted). Filled here from what is stored, as the
job fills it.

Revision ID: 0012_drift_totals
Revises: 0011_object_since
Create Date: 2026-11-25 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_drift_totals"
down_revision: str | None = "0011_object_since"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REASONS = (
    "behind",
    "diverged",
    "unknown_revision",
    "not_applied",
    "failing",
    "config_mismatch",
    "live_drift",
)


def upgrade() -> None:
    op.create_table(
        "drift_total",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("cluster_type_id", sa.Integer(), nullable=True),
        sa.Column("clusters", sa.Integer(), nullable=False),
        sa.Column("first_rank", sa.Integer(), nullable=False),
        sa.Column("last_rank", sa.Integer(), nullable=False),
        sa.Column("drifted", sa.Integer(), nullable=False),
        sa.Column("drifted_clusters", sa.Integer(), nullable=False),
        sa.Column("untracked", sa.Integer(), nullable=False),
        *(sa.Column(reason, sa.Integer(), nullable=False) for reason in REASONS),
        sa.ForeignKeyConstraint(
            ["cluster_type_id"],
            ["cluster_type.id"],
            name=op.f("fk_drift_total_cluster_type_id_cluster_type"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_drift_total_environment_id_environment"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_drift_total")),
    )
    op.create_index(
        "ix_cluster_drift_drifted",
        "cluster_drift",
        ["rank"],
        postgresql_where=sa.text("drifted > 0"),
    )
    op.execute(
        f"""
        INSERT INTO drift_total (
            environment_id, cluster_type_id, clusters, first_rank, last_rank, drifted,
            drifted_clusters, untracked, {", ".join(REASONS)})
        SELECT c.environment_id, c.cluster_type_id, count(*), min(d.rank), max(d.rank),
               sum(d.drifted), count(*) FILTER (WHERE d.drifted > 0), sum(d.untracked),
               {", ".join(f"sum(d.{reason})" for reason in REASONS)}
        FROM cluster_drift d JOIN cluster c ON c.id = d.cluster_id
        GROUP BY c.environment_id, c.cluster_type_id
        """
    )


def downgrade() -> None:
    op.drop_index("ix_cluster_drift_drifted", table_name="cluster_drift")
    op.drop_table("drift_total")
