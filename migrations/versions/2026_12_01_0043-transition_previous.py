"""Deployment history: a transition records the applied revision it changed from, so the view
looks it up only for transitions that lack it.

Each change of `deployment_history` looked up its object's previous applied revision in the
history. On TimescaleDB every lookup pays run-time chunk exclusion over all the history's
chunks (0.044 ms), so the hour under way that `deployment_hourly` and the History dashboard
read raw took 700-1,000 ms at 10,000 clusters, against 62 ms on plain PostgreSQL. Ingest now
writes the object's applied revision from before the change with the transition, where it
knows it to be what the lookup would find (hub/ingest/repository.py), and sets
`previous_recorded`; for those rows the view's lookup is skipped, never executed. Older rows
and the rest (an object's first state, a return after removal, removals) keep the lookup of
0021. Same columns and rows.

Revision ID: 0043_transition_previous
Revises: 0042_hypertable_time_brin
Create Date: 2026-12-01 18:00:00
"""

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import sqlalchemy as sa
from alembic import context, op
from alembic.script import ScriptDirectory

revision: str = "0043_transition_previous"
down_revision: str | None = "0042_hypertable_time_brin"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _columns() -> list[sa.Column[Any]]:
    """The new columns, typed as the applied revision's; NULL on the rows written before."""
    return [
        sa.Column("previous_recorded", sa.Boolean(), nullable=True),
        sa.Column("previous_revision", sa.String(), nullable=True),
        sa.Column("previous_sha", sa.String(length=64), nullable=True),
        sa.Column("previous_version", sa.String(), nullable=True),
    ]


# 0021's view with `p` taken from the row where it is recorded: only one branch of the union
# yields, and the gate on previous_recorded, the same for every row of the lookup, stops its
# scan before it starts.
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
    SELECT t.previous_revision AS applied_revision, t.previous_sha AS applied_sha,
           t.previous_version AS applied_version
    WHERE t.previous_recorded
    UNION ALL
    (SELECT s.applied_revision, s.applied_sha, s.applied_version
     FROM status_transition s
     WHERE t.previous_recorded IS NOT TRUE
       AND s.object_id = t.object_id
       AND (s.applied_sha IS NOT NULL OR s.applied_version IS NOT NULL)
       AND s.observed_at <= t.observed_at
       AND (s.observed_at, s.received_at) < (t.observed_at, t.received_at)
     ORDER BY s.observed_at DESC, s.received_at DESC
     LIMIT 1)
) p ON true
WHERE (t.applied_sha IS NOT NULL OR t.applied_version IS NOT NULL)
  AND (t.applied_sha, t.applied_version) IS DISTINCT FROM (p.applied_sha, p.applied_version)
"""


def _migration(revision: str) -> ModuleType:
    script = ScriptDirectory.from_config(context.config).get_revision(revision)
    assert script is not None
    module: ModuleType = script.module
    return module


def upgrade() -> None:
    for column in _columns():
        op.add_column("status_transition", column)
    # Replaced in place, so the comment and any grants to dashboard readers stay.
    op.execute(DEPLOYMENT_HISTORY)


def downgrade() -> None:
    # 0021's view, as that migration makes it; then nothing reads the columns.
    _migration("0021_history_lookup_bound").upgrade()
    for column in _columns():
        op.drop_column("status_transition", column.name)
