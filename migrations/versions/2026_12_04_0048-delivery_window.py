"""A delivery's retry window counts from when it was made, or retried by hand.

`event_delivery.retried_at` is when a dead delivery was last retried by hand: its new retry
window counts from then; a delivery never retried counts from `created_at`. The time of a
delivery's first attempt, which the window counted from before, goes.

Revision ID: 0048_delivery_window
Revises: 0047_commit_status
Create Date: 2026-12-04 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0048_delivery_window"
down_revision: str | None = "0047_commit_status"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "event_delivery", sa.Column("retried_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.drop_column("event_delivery", "first_attempt_at")


def downgrade() -> None:
    op.add_column(
        "event_delivery",
        sa.Column("first_attempt_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.drop_column("event_delivery", "retried_at")
