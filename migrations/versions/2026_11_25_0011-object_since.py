"""Object state carries since when it runs its applied revision and since when it is Ready.

The promotion gate judges soak time from when each object's current run of its applied
revision began and when its current Ready period began. It looked both up in
status_transition per object and request (four index walks per object, seconds for an
environment of 7,000 clusters); ingest now keeps them on the object's row as the state
changes (hub/ingest/repository.py), and this migration fills them for what is stored, from
the history as the gate read it: a run ends at a transition that removed the object or
changed what the run is about, and the current run starts with the first transition after
the newest such end; the object's last change when the history no longer says.

Two indexes let the gate find the objects that follow a repository and branch without reading
every object of an environment's clusters: objects by the source they name (URL, ref), and
Flux objects by the source object they name. Neither is partial on removed_at, nor leads with
cluster_id: report ingest looks up and retires a cluster's live objects by those, and its
statement, prepared while the table is small, would otherwise plan a walk of every live
object through them.

Revision ID: 0011_object_since
Revises: 0010_deployed_parts
Create Date: 2026-11-25 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_object_since"
down_revision: str | None = "0010_deployed_parts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKFILL = """
WITH since AS (
    SELECT o.id,
           COALESCE(applied.since, o.changed_at) AS applied_since,
           CASE WHEN o.ready THEN COALESCE(ready.since, o.changed_at) END AS ready_since
    FROM object_state o
    LEFT JOIN LATERAL (
        SELECT b.observed_at, b.received_at FROM status_transition b
        WHERE b.object_id = o.id
          AND (b.removed OR b.applied_revision IS DISTINCT FROM o.applied_revision)
        ORDER BY b.observed_at DESC, b.received_at DESC LIMIT 1
    ) applied_end ON true
    LEFT JOIN LATERAL (
        SELECT min(t.observed_at) AS since FROM status_transition t
        WHERE t.object_id = o.id
          AND t.observed_at >= COALESCE(applied_end.observed_at, '-infinity')
          AND (applied_end.observed_at IS NULL
               OR (t.observed_at, t.received_at)
                  > (applied_end.observed_at, applied_end.received_at))
    ) applied ON true
    LEFT JOIN LATERAL (
        SELECT b.observed_at, b.received_at FROM status_transition b
        WHERE b.object_id = o.id AND (b.removed OR b.ready IS NOT TRUE)
        ORDER BY b.observed_at DESC, b.received_at DESC LIMIT 1
    ) ready_end ON o.ready
    LEFT JOIN LATERAL (
        SELECT min(t.observed_at) AS since FROM status_transition t
        WHERE t.object_id = o.id
          AND t.observed_at >= COALESCE(ready_end.observed_at, '-infinity')
          AND (ready_end.observed_at IS NULL
               OR (t.observed_at, t.received_at) > (ready_end.observed_at, ready_end.received_at))
    ) ready ON o.ready
    WHERE o.removed_at IS NULL
)
UPDATE object_state o SET applied_since = s.applied_since, ready_since = s.ready_since
FROM since s WHERE s.id = o.id
"""


def upgrade() -> None:
    op.add_column(
        "object_state", sa.Column("applied_since", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column(
        "object_state", sa.Column("ready_since", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute(BACKFILL)
    # Removed objects start anew when they come back.
    op.execute("UPDATE object_state SET applied_since = changed_at WHERE applied_since IS NULL")
    op.alter_column("object_state", "applied_since", nullable=False)
    op.create_index("ix_object_state_source", "object_state", ["source_url", "source_ref"])
    op.create_index(
        "ix_object_state_followers",
        "object_state",
        ["source_ref", "cluster_id"],
        postgresql_where=sa.text("reconciler = 'flux'"),
    )


def downgrade() -> None:
    op.drop_index("ix_object_state_followers", table_name="object_state")
    op.drop_index("ix_object_state_source", table_name="object_state")
    op.drop_column("object_state", "ready_since")
    op.drop_column("object_state", "applied_since")
