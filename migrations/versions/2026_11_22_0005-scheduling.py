"""Scheduling: the embedded scheduler's targets, the assignments it rendered and its errors.

- scheduling_target: one environment of one platform GitOps repository, with the render state
  (scheduler_core.state as JSON) of the platform tree it describes, so that the next run
  renders only what a control-plane change touches.
- scheduled_assignment: every pair the policies select, rendered, failed (previous output
  kept) or rejected, with the inputs that made it and the commit that last changed it.
- scheduling_error: one row per distinct problem of the last run, first and last seen.

Harvested desired state (assignment, assignment_revision) stays what the platform repository
holds; these tables are the scheduler's side. None is a hypertable.

Revision ID: 0005_scheduling
Revises: 0004_query_views
Create Date: 2026-11-22 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005_scheduling"
down_revision: str | None = "0004_query_views"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scheduling_target",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gitops_url", sa.String(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("control_plane_url", sa.String(), nullable=True),
        sa.Column("promoted_commit_sha", sa.String(length=64), nullable=True),
        sa.Column("last_commit_sha", sa.String(length=64), nullable=True),
        sa.Column("last_branch", sa.String(), nullable=True),
        sa.Column("tree_sha", sa.String(length=64), nullable=True),
        sa.Column("render_state", sa.LargeBinary(), nullable=True),
        sa.Column("scheduled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_scheduling_target_environment_id_environment"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduling_target")),
        sa.UniqueConstraint(
            "gitops_url",
            "environment_id",
            name=op.f("uq_scheduling_target_gitops_url_environment_id"),
        ),
    )
    op.create_index(
        op.f("ix_scheduling_target_environment_id"), "scheduling_target", ["environment_id"]
    )

    op.create_table(
        "scheduled_assignment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("cluster_type_name", sa.String(length=63), nullable=False),
        sa.Column("deployment_target_name", sa.String(length=253), nullable=False),
        sa.Column("workload_name", sa.String(length=253), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("policies", postgresql.ARRAY(sa.String()), server_default="{}", nullable=False),
        sa.Column(
            "config_maps", postgresql.ARRAY(sa.String()), server_default="{}", nullable=False
        ),
        sa.Column("files", postgresql.ARRAY(sa.String()), server_default="{}", nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=True),
        sa.Column("config_hash", sa.String(length=64), nullable=True),
        sa.Column("commit_sha", sa.String(length=64), nullable=True),
        sa.Column("branch", sa.String(), nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("scheduled_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('rendered', 'failed', 'rejected')",
            name=op.f("ck_scheduled_assignment_status"),
        ),
        sa.ForeignKeyConstraint(
            ["target_id"],
            ["scheduling_target.id"],
            name=op.f("fk_scheduled_assignment_target_id_scheduling_target"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduled_assignment")),
        sa.UniqueConstraint(
            "target_id",
            "cluster_type_name",
            "deployment_target_name",
            name=op.f("uq_scheduled_assignment_target_id_cluster_type_name_deployment_target_name"),
        ),
    )
    op.create_index(
        op.f("ix_scheduled_assignment_workload_name"), "scheduled_assignment", ["workload_name"]
    )

    op.create_table(
        "scheduling_error",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("cluster_type_name", sa.String(length=63), nullable=True),
        sa.Column("deployment_target_name", sa.String(length=253), nullable=True),
        sa.Column("template", sa.String(), nullable=True),
        sa.Column("source", sa.String(), nullable=True),
        sa.Column("file", sa.String(), nullable=True),
        sa.Column("document", sa.Integer(), nullable=True),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("field", sa.String(), nullable=True),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "kind IN ('load', 'scheduling', 'config', 'template', 'manifest', 'git')",
            name=op.f("ck_scheduling_error_kind"),
        ),
        sa.ForeignKeyConstraint(
            ["target_id"],
            ["scheduling_target.id"],
            name=op.f("fk_scheduling_error_target_id_scheduling_target"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduling_error")),
        sa.UniqueConstraint(
            "target_id", "fingerprint", name=op.f("uq_scheduling_error_target_id_fingerprint")
        ),
    )


def downgrade() -> None:
    op.drop_table("scheduling_error")
    op.drop_index(op.f("ix_scheduled_assignment_workload_name"), table_name="scheduled_assignment")
    op.drop_table("scheduled_assignment")
    op.drop_index(op.f("ix_scheduling_target_environment_id"), table_name="scheduling_target")
    op.drop_table("scheduling_target")
