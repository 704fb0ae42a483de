"""What a cluster's agent claims about its placement, kept apart from the placement itself; the
cluster types the control plane declares.

Placement is the operator's: a report's environment and cluster type no longer place a
cluster, they are kept on it (`claimed_environment`, `claimed_cluster_type`, the latest
report's) so that its page shows a claim that disagrees. Where the operator lets first
reports place clusters (FLEETMARK_AGENT_PLACEMENT=first-report), a claim places one only into
a declared environment and cluster type: `scheduling_target.cluster_types` holds the
ClusterTypes the control plane declares for the environment, as last scheduled.

Revision ID: 0033_claimed_placement
Revises: 0032_object_state_vacuum
Create Date: 2026-11-29 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision: str = "0033_claimed_placement"
down_revision: str | None = "0032_object_state_vacuum"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("cluster", sa.Column("claimed_environment", sa.String(63)))
    op.add_column("cluster", sa.Column("claimed_cluster_type", sa.String(63)))
    op.add_column("scheduling_target", sa.Column("cluster_types", ARRAY(sa.String())))


def downgrade() -> None:
    op.drop_column("scheduling_target", "cluster_types")
    op.drop_column("cluster", "claimed_cluster_type")
    op.drop_column("cluster", "claimed_environment")
