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

What Grafana reads of them is in views of schema `grafana`.

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


def downgrade() -> None:
    op.drop_table("environment_diff_config")
    op.drop_table("environment_diff_cell")
    op.drop_table("gate_answer")
