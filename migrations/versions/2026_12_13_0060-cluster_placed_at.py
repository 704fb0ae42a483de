"""When a cluster was last placed: `cluster.placed_at`, for the drift job's rounds.

A round re-judges the objects of clusters placed elsewhere or brought back into service since
the last count, found by comparing the cluster type the count saw (`cluster_drift.cluster_type_id`)
with the cluster's. A placement that committed during a round, after the round looked for
what changed and before it counted, was counted already: the next rounds did not see it, and
the cluster's verdicts waited for the next full pass. The hub's time of a placement, of a
cluster's first placement by its own report, and of its coming back from decommissioning is
now kept, and a round reads it with the same overlap as the reports' (WRITTEN_OVERLAP).
Clusters placed before this revision have none: the count has seen them as they are.

Revision ID: 0060_cluster_placed_at
Revises: 0059_deployed_clusters
Create Date: 2026-12-13 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0060_cluster_placed_at"
down_revision: str | None = "0059_deployed_clusters"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("cluster", sa.Column("placed_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column("cluster", "placed_at")
