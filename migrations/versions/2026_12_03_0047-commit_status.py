"""Commit statuses on control-plane commits.

`commit_status` holds, per control-plane repository, commit and context
(`fleetmark/promotion/<environment>`), the status last posted to GitHub or GitLab and, while a
change is not yet posted, its failed attempts and when it is tried again.

Revision ID: 0047_commit_status
Revises: 0046_event_state
Create Date: 2026-12-02 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0047_commit_status"
down_revision: str | None = "0046_event_state"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "commit_status",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("repository", sa.String(), nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=False),
        sa.Column("context", sa.String(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=True),
        sa.Column("description", sa.String(), nullable=True),
        sa.Column("target_url", sa.String(), nullable=True),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_commit_status")),
        sa.UniqueConstraint(
            "repository", "sha", "context", name=op.f("uq_commit_status_repository_sha_context")
        ),
    )


def downgrade() -> None:
    op.drop_table("commit_status")
