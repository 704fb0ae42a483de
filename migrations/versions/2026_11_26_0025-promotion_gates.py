"""Promotion gate answers kept in the store, for dashboards and alert rules.

The gate's policy is Python (hub/gate/policy.py): no SQL view can answer it. The promotion job
(hub/promotion/service.py, every `gate_answers_interval`) asks the gate, by the code the
endpoint runs, about the newest platform commits and workload versions of each environment and
keeps the answers in `gate_answer`, one row per commit or version: the verdict, the counts and
the clusters that block it. What Grafana reads of it is in views of schema `grafana`.

Revision ID: 0025_promotion_gates
Revises: 0022_open_drift_by_object
Create Date: 2026-11-26 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0025_promotion_gates"
down_revision: str | None = "0022_open_drift_by_object"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


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


def downgrade() -> None:
    op.drop_table("gate_answer")
