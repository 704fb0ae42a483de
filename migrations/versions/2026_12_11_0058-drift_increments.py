"""The drift job judges what changed since its last run, not every object of the fleet.

A round re-judges the objects a report wrote (`object_state.written_at`, the hub's time of the
report that wrote the row, found through its index), those following a repository whose
branches the harvest moved (`git_branch.changed_at`), and those of clusters placed, registered
again or decommissioned since the last count (`cluster_drift.cluster_type_id`, the cluster
type the count saw). `drift_evaluation.full_at` is when the job last judged every object: it
does so again every FULL_PASS_EVERY (hub/drift/service.py) to find what the increments missed.

Ingest writes an object's row only when its state changed; then it costs one more index entry
(most of those writes change an indexed column already, so they were no HOT update before
either). A report that changes nothing writes nothing, as before.

Revision ID: 0058_drift_increments
Revises: 0057_readiness_lookup
Create Date: 2026-12-11 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0058_drift_increments"
down_revision: str | None = "0057_readiness_lookup"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("object_state", sa.Column("written_at", sa.DateTime(timezone=True)))
    op.create_index("ix_object_state_written_at", "object_state", ["written_at"])
    op.add_column("git_branch", sa.Column("changed_at", sa.DateTime(timezone=True)))
    op.add_column("cluster_drift", sa.Column("cluster_type_id", sa.Integer()))
    op.add_column("drift_evaluation", sa.Column("full_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column("drift_evaluation", "full_at")
    op.drop_column("cluster_drift", "cluster_type_id")
    op.drop_column("git_branch", "changed_at")
    op.drop_index("ix_object_state_written_at", table_name="object_state")
    op.drop_column("object_state", "written_at")
