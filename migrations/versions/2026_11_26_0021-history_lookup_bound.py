"""Deployment history: the lookup of an object's previous applied revision also says, plainly,
that it is no newer than the change it precedes.

The lookup compared (observed_at, received_at) as a pair, which TimescaleDB cannot turn into a
bound on its chunks: every lookup probed each newer chunk of the hypertable, compressed ones
included, before it could stop at the nearest earlier one. `s.observed_at <= t.observed_at`,
which the pair comparison implies, is such a bound: chunks newer than the change are skipped
at run time. Same columns and rows; on plain PostgreSQL the index scan is the same.

Revision ID: 0021_history_lookup_bound
Revises: 0020_dora_rollouts
Create Date: 2026-11-26 03:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021_history_lookup_bound"
down_revision: str | None = "0020_dora_rollouts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

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
      AND s.observed_at <= t.observed_at
      AND (s.observed_at, s.received_at) < (t.observed_at, t.received_at)
    ORDER BY s.observed_at DESC, s.received_at DESC
    LIMIT 1
) p ON true
WHERE (t.applied_sha IS NOT NULL OR t.applied_version IS NOT NULL)
  AND (t.applied_sha, t.applied_version) IS DISTINCT FROM (p.applied_sha, p.applied_version)
"""

# 0009's definition, restated: a migration is a fixed step, not code shared with later ones.
PAIR_ONLY_DEPLOYMENT_HISTORY = """
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


def upgrade() -> None:
    # Replaced in place, so the comment and any grants to dashboard readers stay.
    op.execute(DEPLOYMENT_HISTORY)


def downgrade() -> None:
    op.execute(PAIR_ONLY_DEPLOYMENT_HISTORY)
