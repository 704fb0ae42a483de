"""Harvest: repository configuration and status, ancestry positions, deduplicated errors.

- repository: where to fetch from (`clone_url`), which branches, a credentials *reference*
  (never a secret), where the entry came from, whether it is harvested, and the outcome of
  the last fetch.
- branch_commit: `position` and `mainline` make "is C an ancestor of A?" one indexed lookup
  (see hub/git/ancestry.py).
- harvest_error: one row per distinct problem, counting how often it recurred, so an
  unreachable remote does not add a row every harvest interval.

None of these tables is a hypertable, so TimescaleDB's rules do not constrain them.

Revision ID: 0003_harvest
Revises: 0002_agent_skipped_kinds
Create Date: 2026-11-22 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_harvest"
down_revision: str | None = "0002_agent_skipped_kinds"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("repository", sa.Column("clone_url", sa.String(), nullable=True))
    op.execute("UPDATE repository SET clone_url = url")
    op.alter_column("repository", "clone_url", nullable=False)
    op.add_column(
        "repository",
        sa.Column("source", sa.String(length=16), server_default="discovered", nullable=False),
    )
    op.add_column("repository", sa.Column("branches", postgresql.ARRAY(sa.String()), nullable=True))
    op.add_column(
        "repository",
        sa.Column("credentials", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )
    op.add_column(
        "repository", sa.Column("enabled", sa.Boolean(), server_default="true", nullable=False)
    )
    op.add_column("repository", sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("repository", sa.Column("fetch_error", sa.String(), nullable=True))
    op.create_check_constraint(
        op.f("ck_repository_source"), "repository", "source IN ('file', 'api', 'discovered')"
    )
    op.create_check_constraint(
        op.f("ck_repository_role"), "repository", "role IN ('platform', 'app')"
    )

    # Nothing wrote branch_commit before the harvester existed; the defaults only let the
    # columns be added to a table that might hold rows, and are dropped at once.
    op.add_column(
        "branch_commit",
        sa.Column("position", sa.Integer(), server_default="0", nullable=False),
    )
    op.add_column(
        "branch_commit",
        sa.Column("mainline", sa.Boolean(), server_default="false", nullable=False),
    )
    op.alter_column("branch_commit", "position", server_default=None)
    op.alter_column("branch_commit", "mainline", server_default=None)
    op.create_index(
        op.f("ix_branch_commit_branch_id_position"),
        "branch_commit",
        ["branch_id", "position"],
        unique=False,
    )

    op.add_column(
        "harvest_error",
        sa.Column(
            "last_occurred_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
    )
    op.add_column(
        "harvest_error",
        sa.Column("occurrences", sa.Integer(), server_default="1", nullable=False),
    )
    op.create_index(
        op.f("ix_harvest_error_repository_id_commit_sha_path_message"),
        "harvest_error",
        ["repository_id", "commit_sha", "path", "message"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )


def downgrade() -> None:
    op.drop_index(
        op.f("ix_harvest_error_repository_id_commit_sha_path_message"), table_name="harvest_error"
    )
    op.drop_column("harvest_error", "occurrences")
    op.drop_column("harvest_error", "last_occurred_at")
    op.drop_index(op.f("ix_branch_commit_branch_id_position"), table_name="branch_commit")
    op.drop_column("branch_commit", "mainline")
    op.drop_column("branch_commit", "position")
    op.drop_constraint(op.f("ck_repository_role"), "repository", type_="check")
    op.drop_constraint(op.f("ck_repository_source"), "repository", type_="check")
    op.drop_column("repository", "fetch_error")
    op.drop_column("repository", "fetched_at")
    op.drop_column("repository", "enabled")
    op.drop_column("repository", "credentials")
    op.drop_column("repository", "branches")
    op.drop_column("repository", "source")
    op.drop_column("repository", "clone_url")
