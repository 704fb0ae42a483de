"""Deployment history by lookup: each change finds the object's previous applied revision itself.

0004 took the previous revision from a window function over every transition of every object,
so a page of the newest changes waited for the whole history to be ordered and compared. Here
each transition that carries an applied sha or version looks up the object's latest earlier
such transition through an index, so `ORDER BY deployed_at DESC LIMIT n` walks the applied
transitions by time and stops once n changes are found; filters on cluster or object ids narrow
the walk the same way. Same name, columns and rows as before: dashboards read the view.

Both indexes are partial on the transitions that carry an applied revision (the only ones the
view reads) and not unique, which a TimescaleDB hypertable allows; the time index stands in for
the BRIN index, which cannot return rows in order, on a plain table.

Revision ID: 0009_history_lookup
Revises: 0008_dora
Create Date: 2026-11-23 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_history_lookup"
down_revision: str | None = "0008_dora"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = "applied_sha IS NOT NULL OR applied_version IS NOT NULL"

# The lookup compares (observed_at, received_at) as the window of 0004 ordered them; two
# transitions of one object equal in both compare against the same earlier one. previous_sha
# stays unbounded varchar, the type lag() gave it, so the columns are exactly those of 0004
# and the view can be replaced in place either way.
DEPLOYMENT_HISTORY = """
CREATE OR REPLACE VIEW deployment_history AS
SELECT
    t.observed_at AS deployed_at,
    t.cluster_id,
    c.name AS cluster,
    c.environment_id,
    e.name AS environment,
    e.position AS environment_position,
    c.cluster_type_id,
    ct.name AS cluster_type,
    t.object_id,
    o.reconciler,
    o.kind,
    o.namespace,
    o.name,
    t.source_url,
    t.source_ref,
    t.source_path,
    t.applied_revision,
    t.applied_sha,
    t.applied_version,
    p.applied_revision AS previous_revision,
    p.applied_sha::varchar AS previous_sha,
    p.applied_version AS previous_version,
    t.ready,
    t.reason
FROM status_transition t
JOIN cluster c ON c.id = t.cluster_id
JOIN object_state o ON o.id = t.object_id
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
LEFT JOIN LATERAL (
    SELECT s.applied_revision, s.applied_sha, s.applied_version
    FROM status_transition s
    WHERE s.object_id = t.object_id
      AND (s.applied_sha IS NOT NULL OR s.applied_version IS NOT NULL)
      AND (s.observed_at, s.received_at) < (t.observed_at, t.received_at)
    ORDER BY s.observed_at DESC, s.received_at DESC
    LIMIT 1
) p ON true
WHERE (t.applied_sha IS NOT NULL OR t.applied_version IS NOT NULL)
  AND (t.applied_sha, t.applied_version) IS DISTINCT FROM (p.applied_sha, p.applied_version)
"""

# 0004's definition, restated: a migration is a fixed step, not code shared with later ones.
WINDOWED_DEPLOYMENT_HISTORY = """
CREATE OR REPLACE VIEW deployment_history AS
SELECT
    d.observed_at AS deployed_at,
    d.cluster_id,
    c.name AS cluster,
    c.environment_id,
    e.name AS environment,
    e.position AS environment_position,
    c.cluster_type_id,
    ct.name AS cluster_type,
    d.object_id,
    o.reconciler,
    o.kind,
    o.namespace,
    o.name,
    d.source_url,
    d.source_ref,
    d.source_path,
    d.applied_revision,
    d.applied_sha,
    d.applied_version,
    d.previous_revision,
    d.previous_sha,
    d.previous_version,
    d.ready,
    d.reason
FROM (
    SELECT
        t.observed_at,
        t.cluster_id,
        t.object_id,
        t.source_url,
        t.source_ref,
        t.source_path,
        t.applied_revision,
        t.applied_sha,
        t.applied_version,
        t.ready,
        t.reason,
        lag(t.applied_revision) OVER previous AS previous_revision,
        lag(t.applied_sha) OVER previous AS previous_sha,
        lag(t.applied_version) OVER previous AS previous_version
    FROM status_transition t
    WHERE t.applied_sha IS NOT NULL OR t.applied_version IS NOT NULL
    WINDOW previous AS (
        PARTITION BY t.cluster_id, t.object_id ORDER BY t.observed_at, t.received_at
    )
) d
JOIN cluster c ON c.id = d.cluster_id
JOIN object_state o ON o.id = d.object_id
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
WHERE (d.applied_sha, d.applied_version) IS DISTINCT FROM (d.previous_sha, d.previous_version)
"""


def upgrade() -> None:
    op.create_index(
        "ix_status_transition_applied_observed_at",
        "status_transition",
        [sa.literal_column("observed_at DESC")],
        postgresql_where=sa.text(APPLIED),
    )
    op.create_index(
        "ix_status_transition_applied_object_id",
        "status_transition",
        ["object_id", sa.literal_column("observed_at DESC"), sa.literal_column("received_at DESC")],
        postgresql_where=sa.text(APPLIED),
    )
    # Replaced in place, so the comment and any grants to dashboard readers stay.
    op.execute(DEPLOYMENT_HISTORY)


def downgrade() -> None:
    op.execute(WINDOWED_DEPLOYMENT_HISTORY)
    op.drop_index("ix_status_transition_applied_object_id", table_name="status_transition")
    op.drop_index("ix_status_transition_applied_observed_at", table_name="status_transition")
