"""The objects that follow a source, read from ix_object_state_source alone.

The promotion gate finds the objects that apply a branch by (source_url, url_ref) and reads,
for each, what its judgement needs: which cluster, path, commits applied and attempted, Ready,
and since when. At 7,000 clusters that is some 7,000 objects, one of the twenty or so of each
cluster, and mostly each on a heap page of its own: 4,500 pages read per answer, a quarter of
its time in the store. The index now carries those columns (INCLUDE), so that an index-only
scan reads them from some 260 index pages where the heap pages are all-visible. They change
only when an object's state does, never with a report that repeats it; such an update is then
one of this index too.

Revision ID: 0031_gate_covering_index
Revises: 0030_placement_drift_hourly
Create Date: 2026-11-28 13:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0031_gate_covering_index"
down_revision: str | None = "0030_placement_drift_hourly"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COVERED = [
    "id",
    "cluster_id",
    "source_path",
    "applied_revision",
    "applied_sha",
    "attempted_sha",
    "ready",
    "applied_since",
    "ready_since",
    "removed_at",
]


def upgrade() -> None:
    op.drop_index("ix_object_state_source", table_name="object_state")
    op.create_index(
        "ix_object_state_source",
        "object_state",
        ["source_url", "url_ref"],
        postgresql_include=COVERED,
    )


def downgrade() -> None:
    op.drop_index("ix_object_state_source", table_name="object_state")
    op.create_index("ix_object_state_source", "object_state", ["source_url", "url_ref"])
