"""Agent sessions keep the resource kinds their agent skipped (e.g. their CRD is absent).

Revision ID: 0002_agent_skipped_kinds
Revises: 0001_schema_v1
Create Date: 2026-11-22 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_agent_skipped_kinds"
down_revision: str | None = "0001_schema_v1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "agent_session",
        sa.Column(
            "skipped_kinds",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="[]",
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("agent_session", "skipped_kinds")
