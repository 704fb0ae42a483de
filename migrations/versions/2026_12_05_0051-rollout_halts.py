"""Halts: the platform commits and workload versions whose promotion out of an environment stops
because they are clear suspects there (`rollout_halt`, hub/models/halt.py).

Revision ID: 0051_rollout_halts
Revises: 0050_rollout_health
Create Date: 2026-12-05 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0051_rollout_halts"
down_revision: str | None = "0050_rollout_health"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rollout_halt",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("environment", sa.String(), nullable=False),
        sa.Column("workload", sa.String(length=253), nullable=True),
        sa.Column("revision", sa.String(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("evidence", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_how", sa.String(length=16), nullable=True),
        sa.Column("superseded_by", sa.String(), nullable=True),
        sa.Column("cleared_by", sa.String(), nullable=True),
        sa.Column("clear_reason", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "ended_how IS NULL OR ended_how IN ('superseded', 'cleared')",
            name=op.f("ck_rollout_halt_known_ending"),
        ),
        sa.CheckConstraint(
            "(ended_at IS NULL) = (ended_how IS NULL)", name=op.f("ck_rollout_halt_ended_together")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollout_halt")),
        sa.UniqueConstraint(
            "environment",
            "workload",
            "revision",
            name=op.f("uq_rollout_halt_environment_workload_revision"),
            postgresql_nulls_not_distinct=True,
        ),
    )


def downgrade() -> None:
    op.drop_table("rollout_halt")
