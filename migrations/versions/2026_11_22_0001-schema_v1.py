"""Schema v1: fleet dimensions, git facts, desired state, observed state.

Transitions and heartbeats become TimescaleDB hypertables when the extension can be created;
otherwise they stay plain tables with BRIN indexes. How they are compressed is set by
migration 0017; compression and retention policies are applied by the hub at start
(hub/store.py), from its settings.

Revision ID: 0001_schema_v1
Revises:
Create Date: 2026-11-22 02:24:42.323009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_schema_v1"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


HYPERTABLES = {
    # table: (time column, chunk interval)
    "status_transition": ("observed_at", "7 days"),
    "cluster_heartbeat": ("bucket_at", "7 days"),
}


def timescaledb_available() -> bool:
    """The extension is installed and preloaded, so CREATE EXTENSION will work. Preloaded:
    its loader's setting exists, which any role may read (shared_preload_libraries only one
    with pg_read_all_settings, which the hub's role need not have)."""
    row = op.get_bind().execute(
        sa.text(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb' "
            "AND current_setting('timescaledb.disable_load', true) IS NOT NULL"
        )
    )
    return row.scalar() is not None


def upgrade() -> None:
    op.create_table(
        "api_token",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("scope IN ('admin', 'read')", name=op.f("ck_api_token_scope")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_token")),
        sa.UniqueConstraint("name", name=op.f("uq_api_token_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_token_token_hash")),
    )
    op.create_table(
        "environment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environment")),
        sa.UniqueConstraint("name", name=op.f("uq_environment_name")),
    )
    op.create_table(
        "repository",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repository")),
        sa.UniqueConstraint("url", name=op.f("uq_repository_url")),
    )
    op.create_table(
        "workspace",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspace")),
        sa.UniqueConstraint("name", name=op.f("uq_workspace_name")),
    )
    op.create_table(
        "cluster_type",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column(
            "labels", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("reconciler", sa.String(), nullable=True),
        sa.Column("namespace_service", sa.String(), nullable=True),
        sa.Column("config_type", sa.String(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_cluster_type_environment_id_environment"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_type")),
        sa.UniqueConstraint(
            "environment_id", "name", name=op.f("uq_cluster_type_environment_id_name")
        ),
    )
    op.create_table(
        "git_commit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=False),
        sa.Column(
            "parent_shas",
            postgresql.ARRAY(sa.String(length=64)),
            server_default="{}",
            nullable=False,
        ),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("author_name", sa.String(), nullable=True),
        sa.Column("author_email", sa.String(), nullable=True),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("message", sa.String(), nullable=True),
        sa.Column("promoted_commit_sha", sa.String(length=64), nullable=True),
        sa.Column("reachable", sa.Boolean(), server_default="true", nullable=False),
        sa.Column(
            "harvested_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repository.id"],
            name=op.f("fk_git_commit_repository_id_repository"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_git_commit")),
        sa.UniqueConstraint("repository_id", "sha", name=op.f("uq_git_commit_repository_id_sha")),
    )
    op.create_index(
        op.f("ix_git_commit_repository_id_committed_at"),
        "git_commit",
        ["repository_id", "committed_at"],
        unique=False,
    )
    op.create_table(
        "harvest_error",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("commit_sha", sa.String(length=64), nullable=True),
        sa.Column("path", sa.String(), nullable=True),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column(
            "occurred_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repository.id"],
            name=op.f("fk_harvest_error_repository_id_repository"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_harvest_error")),
    )
    op.create_index(
        op.f("ix_harvest_error_repository_id"), "harvest_error", ["repository_id"], unique=False
    )
    op.create_table(
        "workload",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column(
            "labels", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("source_url", sa.String(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"],
            ["workspace.id"],
            name=op.f("fk_workload_workspace_id_workspace"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workload")),
        sa.UniqueConstraint("workspace_id", "name", name=op.f("uq_workload_workspace_id_name")),
    )
    op.create_table(
        "cluster",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("cluster_type_id", sa.Integer(), nullable=True),
        sa.Column(
            "labels", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("token_hash", sa.String(length=64), nullable=True),
        sa.Column(
            "registered_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("token_revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decommissioned_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["cluster_type_id"],
            ["cluster_type.id"],
            name=op.f("fk_cluster_cluster_type_id_cluster_type"),
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_cluster_environment_id_environment"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster")),
        sa.UniqueConstraint("name", name=op.f("uq_cluster_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_cluster_token_hash")),
    )
    op.create_index(
        op.f("ix_cluster_cluster_type_id"), "cluster", ["cluster_type_id"], unique=False
    )
    op.create_index(op.f("ix_cluster_environment_id"), "cluster", ["environment_id"], unique=False)
    op.create_table(
        "deployment_target",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column(
            "labels", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("manifests_repository_id", sa.Integer(), nullable=True),
        sa.Column("manifests_branch", sa.String(), nullable=True),
        sa.Column("manifests_path", sa.String(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_deployment_target_environment_id_environment"),
        ),
        sa.ForeignKeyConstraint(
            ["manifests_repository_id"],
            ["repository.id"],
            name=op.f("fk_deployment_target_manifests_repository_id_repository"),
        ),
        sa.ForeignKeyConstraint(
            ["workload_id"],
            ["workload.id"],
            name=op.f("fk_deployment_target_workload_id_workload"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployment_target")),
        sa.UniqueConstraint(
            "workload_id", "name", name=op.f("uq_deployment_target_workload_id_name")
        ),
    )
    op.create_index(
        op.f("ix_deployment_target_environment_id"),
        "deployment_target",
        ["environment_id"],
        unique=False,
    )
    op.create_table(
        "git_branch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("head_commit_id", sa.Integer(), nullable=True),
        sa.Column("harvested_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_git_branch_environment_id_environment"),
        ),
        sa.ForeignKeyConstraint(
            ["head_commit_id"],
            ["git_commit.id"],
            name=op.f("fk_git_branch_head_commit_id_git_commit"),
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repository.id"],
            name=op.f("fk_git_branch_repository_id_repository"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_git_branch")),
        sa.UniqueConstraint("repository_id", "name", name=op.f("uq_git_branch_repository_id_name")),
    )
    op.create_table(
        "agent_session",
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("boot_id", sa.String(length=64), nullable=False),
        sa.Column("agent_version", sa.String(length=64), nullable=False),
        sa.Column("instance", sa.String(length=253), nullable=False),
        sa.Column("max_sequence", sa.BigInteger(), nullable=False),
        sa.Column("seen_window", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_report_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("report_count", sa.BigInteger(), server_default="1", nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_agent_session_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_id", "boot_id", name=op.f("pk_agent_session")),
    )
    op.create_table(
        "assignment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("branch_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("cluster_type_name", sa.String(length=63), nullable=False),
        sa.Column("deployment_target_name", sa.String(length=253), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["branch_id"],
            ["git_branch.id"],
            name=op.f("fk_assignment_branch_id_git_branch"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environment.id"],
            name=op.f("fk_assignment_environment_id_environment"),
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repository.id"],
            name=op.f("fk_assignment_repository_id_repository"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignment")),
        sa.UniqueConstraint(
            "repository_id",
            "branch_id",
            "cluster_type_name",
            "deployment_target_name",
            name=op.f(
                "uq_assignment_repository_id_branch_id_cluster_type_name_deployment_target_name"
            ),
        ),
    )
    op.create_index(
        op.f("ix_assignment_environment_id"), "assignment", ["environment_id"], unique=False
    )
    op.create_table(
        "branch_commit",
        sa.Column("branch_id", sa.Integer(), nullable=False),
        sa.Column("commit_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["branch_id"],
            ["git_branch.id"],
            name=op.f("fk_branch_commit_branch_id_git_branch"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["commit_id"],
            ["git_commit.id"],
            name=op.f("fk_branch_commit_commit_id_git_commit"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("branch_id", "commit_id", name=op.f("pk_branch_commit")),
    )
    op.create_index(
        op.f("ix_branch_commit_commit_id"), "branch_commit", ["commit_id"], unique=False
    )
    op.create_table(
        "cluster_heartbeat",
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("bucket_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("report_count", sa.Integer(), nullable=False),
        sa.Column("object_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_cluster_heartbeat_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_id", "bucket_at", name=op.f("pk_cluster_heartbeat")),
    )
    op.create_table(
        "manifest_revision",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository_id", sa.Integer(), nullable=False),
        sa.Column("branch_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(), nullable=False),
        sa.Column("valid_from_commit_id", sa.Integer(), nullable=False),
        sa.Column("valid_until_commit_id", sa.Integer(), nullable=True),
        sa.Column("workload_version", sa.String(), nullable=True),
        sa.Column("version_source", sa.String(length=16), nullable=True),
        sa.Column("images", postgresql.ARRAY(sa.String()), server_default="{}", nullable=False),
        sa.Column("manifest_digest", sa.String(length=71), nullable=True),
        sa.ForeignKeyConstraint(
            ["branch_id"],
            ["git_branch.id"],
            name=op.f("fk_manifest_revision_branch_id_git_branch"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repository.id"],
            name=op.f("fk_manifest_revision_repository_id_repository"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["valid_from_commit_id"],
            ["git_commit.id"],
            name=op.f("fk_manifest_revision_valid_from_commit_id_git_commit"),
        ),
        sa.ForeignKeyConstraint(
            ["valid_until_commit_id"],
            ["git_commit.id"],
            name=op.f("fk_manifest_revision_valid_until_commit_id_git_commit"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_manifest_revision")),
        sa.UniqueConstraint(
            "branch_id",
            "path",
            "valid_from_commit_id",
            name=op.f("uq_manifest_revision_branch_id_path_valid_from_commit_id"),
        ),
    )
    op.create_table(
        "object_state",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("reconciler", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("source_url", sa.String(), nullable=True),
        sa.Column("source_ref", sa.String(), nullable=True),
        sa.Column("source_path", sa.String(), nullable=True),
        sa.Column("applied_revision", sa.String(), nullable=True),
        sa.Column("applied_sha", sa.String(length=64), nullable=True),
        sa.Column("applied_version", sa.String(), nullable=True),
        sa.Column("attempted_revision", sa.String(), nullable=True),
        sa.Column("attempted_sha", sa.String(length=64), nullable=True),
        sa.Column("ready", sa.Boolean(), nullable=True),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("health", sa.String(length=32), nullable=True),
        sa.Column("drifted", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("suspended", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("last_transition_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_object_state_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_object_state")),
        sa.UniqueConstraint(
            "cluster_id",
            "reconciler",
            "kind",
            "namespace",
            "name",
            name=op.f("uq_object_state_cluster_id_reconciler_kind_namespace_name"),
        ),
    )
    op.create_table(
        "assignment_revision",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("valid_from_commit_id", sa.Integer(), nullable=False),
        sa.Column("valid_until_commit_id", sa.Integer(), nullable=True),
        sa.Column("namespace", sa.String(length=63), nullable=True),
        sa.Column(
            "config", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("config_hash", sa.String(length=64), nullable=True),
        sa.Column("reconciler_kind", sa.String(), nullable=True),
        sa.Column("app_repository_id", sa.Integer(), nullable=True),
        sa.Column("app_branch", sa.String(), nullable=True),
        sa.Column("app_path", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(
            ["app_repository_id"],
            ["repository.id"],
            name=op.f("fk_assignment_revision_app_repository_id_repository"),
        ),
        sa.ForeignKeyConstraint(
            ["assignment_id"],
            ["assignment.id"],
            name=op.f("fk_assignment_revision_assignment_id_assignment"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["valid_from_commit_id"],
            ["git_commit.id"],
            name=op.f("fk_assignment_revision_valid_from_commit_id_git_commit"),
        ),
        sa.ForeignKeyConstraint(
            ["valid_until_commit_id"],
            ["git_commit.id"],
            name=op.f("fk_assignment_revision_valid_until_commit_id_git_commit"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignment_revision")),
    )
    op.create_index(
        op.f("ix_assignment_revision_assignment_id"),
        "assignment_revision",
        ["assignment_id"],
        unique=False,
    )
    op.create_table(
        "status_transition",
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("object_id", sa.BigInteger(), nullable=False),
        sa.Column("source_url", sa.String(), nullable=True),
        sa.Column("source_ref", sa.String(), nullable=True),
        sa.Column("source_path", sa.String(), nullable=True),
        sa.Column("applied_revision", sa.String(), nullable=True),
        sa.Column("applied_sha", sa.String(length=64), nullable=True),
        sa.Column("applied_version", sa.String(), nullable=True),
        sa.Column("attempted_revision", sa.String(), nullable=True),
        sa.Column("attempted_sha", sa.String(length=64), nullable=True),
        sa.Column("ready", sa.Boolean(), nullable=True),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("health", sa.String(length=32), nullable=True),
        sa.Column("drifted", sa.Boolean(), nullable=False),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("removed", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_status_transition_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["object_id"],
            ["object_state.id"],
            name=op.f("fk_status_transition_object_id_object_state"),
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        op.f("ix_status_transition_cluster_id"),
        "status_transition",
        ["cluster_id", sa.literal_column("observed_at DESC")],
        unique=False,
    )
    op.create_index(
        op.f("ix_status_transition_object_id"),
        "status_transition",
        ["object_id", sa.literal_column("observed_at DESC")],
        unique=False,
    )

    if timescaledb_available():
        op.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
        for table, (column, chunk) in HYPERTABLES.items():
            op.execute(
                f"SELECT create_hypertable('{table}', by_range('{column}', INTERVAL '{chunk}'), "
                "create_default_indexes => false)"
            )
    else:
        for table, (column, *_) in HYPERTABLES.items():
            op.create_index(f"ix_{table}_{column}_brin", table, [column], postgresql_using="brin")


def downgrade() -> None:
    op.drop_index(op.f("ix_status_transition_object_id"), table_name="status_transition")
    op.drop_index(op.f("ix_status_transition_cluster_id"), table_name="status_transition")
    op.drop_table("status_transition")
    op.drop_index(op.f("ix_assignment_revision_assignment_id"), table_name="assignment_revision")
    op.drop_table("assignment_revision")
    op.drop_table("object_state")
    op.drop_table("manifest_revision")
    op.drop_table("cluster_heartbeat")
    op.drop_index(op.f("ix_branch_commit_commit_id"), table_name="branch_commit")
    op.drop_table("branch_commit")
    op.drop_index(op.f("ix_assignment_environment_id"), table_name="assignment")
    op.drop_table("assignment")
    op.drop_table("agent_session")
    op.drop_table("git_branch")
    op.drop_index(op.f("ix_deployment_target_environment_id"), table_name="deployment_target")
    op.drop_table("deployment_target")
    op.drop_index(op.f("ix_cluster_environment_id"), table_name="cluster")
    op.drop_index(op.f("ix_cluster_cluster_type_id"), table_name="cluster")
    op.drop_table("cluster")
    op.drop_table("workload")
    op.drop_index(op.f("ix_harvest_error_repository_id"), table_name="harvest_error")
    op.drop_table("harvest_error")
    op.drop_index(op.f("ix_git_commit_repository_id_committed_at"), table_name="git_commit")
    op.drop_table("git_commit")
    op.drop_table("cluster_type")
    op.drop_table("workspace")
    op.drop_table("repository")
    op.drop_table("environment")
    op.drop_table("api_token")
