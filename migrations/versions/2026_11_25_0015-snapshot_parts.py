"""Full snapshots in parts: a table keeps the parts of a snapshot until its last arrives.

A cluster with thousands of objects sends its full snapshot in several reports, each under
the hub's body limit (report field `snapshot_part`). Each part's records are applied as a
change report's; a row per part keeps the keys of the objects it named, and the last part
to arrive removes the objects that no part named (hub/ingest/repository.py).

Revision ID: 0015_snapshot_parts
Revises: 0014_discovered_from
Create Date: 2026-11-25 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015_snapshot_parts"
down_revision: str | None = "0014_discovered_from"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "snapshot_part",
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("snapshot_id", sa.String(length=64), nullable=False),
        sa.Column("part_index", sa.Integer(), nullable=False),
        sa.Column("part_count", sa.Integer(), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("keys", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_snapshot_part_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "cluster_id", "snapshot_id", "part_index", name=op.f("pk_snapshot_part")
        ),
    )


def downgrade() -> None:
    op.drop_table("snapshot_part")
