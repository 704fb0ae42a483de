"""What the judging jobs have announced, so that a restart neither announces it again nor loses
the pairing of an opening event with its closing one.

`event_state` holds one row per (kind, key) in a state that opens events: an environment's drift
(since it was first seen, announced once it outlived the grace), a stale cluster, an
environment whose scheduling fails. The row goes when the state closes.

Revision ID: 0046_event_state
Revises: 0045_deployment_hourly_cut
Create Date: 2026-12-03 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0046_event_state"
down_revision: str | None = "0045_deployment_hourly_cut"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "event_state",
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("announced", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "key", name=op.f("pk_event_state")),
    )


def downgrade() -> None:
    op.drop_table("event_state")
