"""Environment diff: the deployed summary refreshed a part of the fleet at a time.

0007 kept deployed_version as a materialized view, refreshed in one statement: a pass over
every live object of the fleet (about 0.1 s of a core per 1,000 clusters), which on a busy
hub took a core from report ingest at once and showed as a burst of slow reports every
refresh. Here the summary lives in `deployed_part`, one set of rows per part of the fleet
(a range of cluster ids), and `deployed_summary(first, end)` sums up one range; the hub
replaces one part per transaction with pauses between (hub/envdiff/repository.py), so a
refresh spreads over a few seconds and no statement holds a core for long. deployed_version
becomes a view adding up the parts: same name, columns and rows as before.

A cluster lies in one part, so "a cluster with two objects in one group counts once" holds
within its part, and the parts add up to the whole. refreshed_at: the oldest part's refresh.

Revision ID: 0010_deployed_parts
Revises: 0009_history_lookup
Create Date: 2026-11-25 12:00:00
"""

from collections.abc import Sequence
from types import ModuleType

from alembic import context, op
from alembic.script import ScriptDirectory

revision: str = "0010_deployed_parts"
down_revision: str | None = "0009_history_lookup"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEPLOYED_PART = """
CREATE TABLE deployed_part (
    part integer NOT NULL,
    environment_id integer,
    cluster_type varchar(63),
    source_url varchar,
    source_ref varchar,
    source_path text,
    applied_sha varchar,
    applied_version varchar,
    condition text NOT NULL,
    version varchar,
    clusters bigint NOT NULL,
    message text,
    refreshed_at timestamptz NOT NULL
)
"""

# The query of 0007's deployed_version over the clusters with first <= id < end.
DEPLOYED_SUMMARY = r"""
CREATE FUNCTION deployed_summary(first_cluster integer, end_cluster integer)
RETURNS TABLE (
    environment_id integer, cluster_type varchar, source_url varchar, source_ref varchar,
    source_path text, applied_sha varchar, applied_version varchar, condition text,
    version varchar, clusters bigint, message text, refreshed_at timestamptz
)
LANGUAGE sql STABLE AS $$
WITH followed AS (
    SELECT c.environment_id, t.name AS cluster_type, o.cluster_id,
           COALESCE(o.source_url, s.source_url) AS source_url,
           COALESCE(s.source_ref, o.source_ref) AS source_ref,
           btrim(regexp_replace('/' || COALESCE(o.source_path, '') || '/', '/(\.?/)+', '/', 'g'),
                 '/') AS source_path,
           o.applied_sha, o.applied_version,
           CASE
               WHEN o.ready IS FALSE AND NOT o.suspended THEN 'failing'
               WHEN o.suspended THEN 'suspended'
               WHEN o.drifted THEN 'live_drift'
               ELSE 'applied'
           END AS condition,
           COALESCE(o.message, o.reason) AS message
    FROM object_state o
    JOIN cluster c ON c.id = o.cluster_id AND c.decommissioned_at IS NULL
    JOIN cluster_type t ON t.id = c.cluster_type_id
    LEFT JOIN object_state s
      ON o.reconciler = 'flux' AND s.cluster_id = o.cluster_id AND s.reconciler = 'flux'
     AND s.kind = split_part(o.source_ref, '/', 1)
     AND s.namespace = split_part(o.source_ref, '/', 2)
     AND s.name = split_part(o.source_ref, '/', 3)
     AND s.kind IN ('GitRepository', 'OCIRepository', 'Bucket', 'HelmRepository', 'HelmChart')
     AND s.removed_at IS NULL
    WHERE o.cluster_id >= first_cluster AND o.cluster_id < end_cluster
      AND o.removed_at IS NULL
      AND NOT (o.reconciler = 'flux'
               AND o.kind IN ('GitRepository', 'OCIRepository', 'Bucket', 'HelmRepository',
                              'HelmChart'))
),
per_cluster AS (
    SELECT environment_id, cluster_type, source_url, source_ref, source_path, applied_sha,
           applied_version, condition, cluster_id, min(message) AS message
    FROM followed
    GROUP BY environment_id, cluster_type, source_url, source_ref, source_path, applied_sha,
             applied_version, condition, cluster_id
),
grouped AS (
    SELECT environment_id, cluster_type, source_url, source_ref, source_path, applied_sha,
           applied_version, condition, count(*) AS clusters, min(message) AS message
    FROM per_cluster
    GROUP BY environment_id, cluster_type, source_url, source_ref, source_path, applied_sha,
             applied_version, condition
)
SELECT g.environment_id, g.cluster_type, g.source_url, g.source_ref, g.source_path,
       g.applied_sha, g.applied_version, g.condition,
       COALESCE(v.version, g.applied_version) AS version, g.clusters, g.message,
       now() AS refreshed_at
FROM grouped g
LEFT JOIN LATERAL (
    SELECT m.workload_version AS version
    FROM git_branch b
    JOIN git_commit gc ON gc.repository_id = b.repository_id AND gc.sha = g.applied_sha
    JOIN branch_commit p ON p.branch_id = b.id AND p.commit_id = gc.id AND p.mainline
    JOIN manifest_revision m ON m.branch_id = b.id AND m.path = g.source_path
    JOIN branch_commit f ON f.branch_id = b.id AND f.commit_id = m.valid_from_commit_id
    LEFT JOIN branch_commit u ON u.branch_id = b.id AND u.commit_id = m.valid_until_commit_id
    WHERE b.name = regexp_replace(g.source_ref, '^refs/heads/', '') AND b.deleted_at IS NULL
      AND f.position <= p.position AND (u.position IS NULL OR p.position < u.position)
    LIMIT 1
) v ON g.applied_sha IS NOT NULL
UNION ALL
SELECT c.environment_id, t.name, NULL, NULL, NULL, NULL, NULL, 'member', NULL,
       count(*), NULL, now()
FROM cluster c
JOIN cluster_type t ON t.id = c.cluster_type_id
WHERE c.id >= first_cluster AND c.id < end_cluster AND c.decommissioned_at IS NULL
GROUP BY c.environment_id, t.name
$$
"""

DEPLOYED_VERSION = """
CREATE VIEW deployed_version AS
SELECT environment_id, cluster_type, source_url, source_ref, source_path, applied_sha,
       applied_version, condition, version, sum(clusters)::bigint AS clusters,
       min(message) AS message, min(refreshed_at) AS refreshed_at
FROM deployed_part
GROUP BY environment_id, cluster_type, source_url, source_ref, source_path, applied_sha,
         applied_version, condition, version
"""

COMMENTS = {
    "TABLE deployed_part": (
        "deployed_version of the clusters of one part of the fleet (a range of cluster ids), "
        "as the hub last refreshed that part; deployed_version adds the parts up."
    ),
    "VIEW deployed_version": (
        "Live reconciler objects of registered clusters summed up per environment, cluster "
        "type, source (url as reported, ref, normalised path), applied commit and condition "
        "(failing, suspended, live_drift, applied): clusters counts them; version is the one "
        "the applied commit carries on that branch and path. condition member: the clusters "
        "of the cluster type. As of refreshed_at; the hub refreshes it periodically."
    ),
}


def _environment_diff() -> ModuleType:
    """0007's migration, whose materialized view the way back restores."""
    script = ScriptDirectory.from_config(context.config).get_revision("0007_environment_diff")
    assert script is not None
    return script.module


def upgrade() -> None:
    op.execute("DROP MATERIALIZED VIEW deployed_version")
    op.execute(DEPLOYED_PART)
    op.execute("CREATE INDEX ix_deployed_part_part ON deployed_part (part)")
    op.execute(DEPLOYED_SUMMARY)
    op.execute(DEPLOYED_VERSION)
    for target, comment in COMMENTS.items():
        quoted = comment.replace("'", "''")
        op.execute(f"COMMENT ON {target} IS '{quoted}'")


def downgrade() -> None:
    op.execute("DROP VIEW deployed_version")
    op.execute("DROP FUNCTION deployed_summary(integer, integer)")
    op.execute("DROP TABLE deployed_part")
    environment_diff = _environment_diff()
    op.execute(environment_diff.DEPLOYED_VERSION)
    op.execute(environment_diff.DEPLOYED_VERSION_KEY)
