"""Drift: the open drift periods of objects are indexed by object.

A drift page reads the open period of each object it shows (and of each of its clusters,
whose own periods have no object). The index of open periods leads with the cluster, so the
lookup by object read every open period: some 130,000 when a fleet's agents had gone silent
together, 15 to 35 ms of every page. This index finds them by object. It leaves out the
clusters' own periods, so that a lookup of those (`object_id IS NULL`) still goes by cluster
to ix_drift_period_open, also when the drift tables have not been analysed yet and a plan
prepared for any ids would guess that few periods have no object. The drift job reads every
open period through ix_drift_period_open, as before.

Revision ID: 0022_open_drift_by_object
Revises: 0021_history_lookup_bound
Create Date: 2026-11-26 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022_open_drift_by_object"
down_revision: str | None = "0021_history_lookup_bound"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_drift_period_open_object_id",
        "drift_period",
        ["object_id"],
        unique=False,
        postgresql_where=sa.text("ended_at IS NULL AND object_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_drift_period_open_object_id", table_name="drift_period")
