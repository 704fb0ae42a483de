"""Sign-ins to the pages: the browser's cookie holds a random id instead of the API token.

A row per sign-in: the id's keyed hash (the primary key a page looks up), the token it was made
from, and when it expires. Sign-out deletes the row, revoking the token deletes its rows, and
expired rows go when the next sign-in is made (the index on expires_at).

Revision ID: 0035_page_sign_in
Revises: 0034_requested_runs_kept
Create Date: 2026-11-29 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0035_page_sign_in"
down_revision: str | None = "0034_requested_runs_kept"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "page_sign_in",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("api_token_id", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["api_token_id"],
            ["api_token.id"],
            name=op.f("fk_page_sign_in_api_token_id_api_token"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_page_sign_in")),
    )
    op.create_index(op.f("ix_page_sign_in_api_token_id"), "page_sign_in", ["api_token_id"])
    op.create_index(op.f("ix_page_sign_in_expires_at"), "page_sign_in", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_page_sign_in_expires_at"), table_name="page_sign_in")
    op.drop_index(op.f("ix_page_sign_in_api_token_id"), table_name="page_sign_in")
    op.drop_table("page_sign_in")
