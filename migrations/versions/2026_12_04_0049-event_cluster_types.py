"""The cluster types an event concerns, as a list: an event about an environment spans many
cluster types, so `outbox_event.cluster_type` (one, never set) becomes `cluster_types`, which a
subscription's cluster-type filter matches on overlap.

Revision ID: 0049_event_cluster_types
Revises: 0048_delivery_window
Create Date: 2026-12-04 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0049_event_cluster_types"
down_revision: str | None = "0048_delivery_window"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "outbox_event",
        sa.Column(
            "cluster_types", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False
        ),
    )
    op.execute(
        "UPDATE outbox_event SET cluster_types = ARRAY[cluster_type] WHERE cluster_type IS NOT NULL"
    )
    op.drop_column("outbox_event", "cluster_type")


def downgrade() -> None:
    op.add_column("outbox_event", sa.Column("cluster_type", sa.String(length=253), nullable=True))
    # One type survives where the event named exactly one.
    op.execute(
        "UPDATE outbox_event SET cluster_type = cluster_types[1] "
        "WHERE cardinality(cluster_types) = 1"
    )
    op.drop_column("outbox_event", "cluster_types")
