"""Environment diff: what each assignment is meant to run, and what clusters run, per
environment and cluster type, for GET /api/v1/diff and the dashboards alike.

- assignment_revision gains `workload` (the Namespace's `workload` label, which Kalypso's
  namespace template sets) and `app_pinned_ref` (a commit or tag the reconciler follows
  instead of its branch head). The harvester fills both from the next commit it reads that
  changes the folder; `fleetmark harvest --backfill` fills them for what is stored.
- desired_version (view): per assignment at the head of its environment's live platform
  branch, the workload, namespace, composed platform config, the app repository/branch/path
  its reconciler follows and what that path's manifests carry at the head of the app branch
  (workload version, images, digest, since which app commit). Every join is an indexed
  lookup per assignment, so reading it costs what the number of assignments costs, whatever
  the length of the history.
- deployed_version (materialized view): the fleet's live reconciler objects summed up per
  environment, cluster type, source (URL as reported, ref, path normalised), applied commit
  and condition, with the workload version the applied commit carries on that branch and
  path; plus one `member` row per environment and cluster type counting its clusters. A diff
  row needs the state of every cluster of its cluster type, a hundred or more at 10,000
  clusters: read per request that is a pass over most of the fleet's objects, while this
  summary holds a few rows per assignment. The hub refreshes it (CONCURRENTLY, readers are
  not blocked) every `env_diff_interval`; `refreshed_at` says when.

Revision ID: 0007_environment_diff
Revises: 0006_drift
Create Date: 2026-11-23 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_environment_diff"
down_revision: str | None = "0006_drift"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The workload: the Namespace's label; else the hub's own scheduler's record of the pair; else
# the deployment target's name, which then stands for a workload of its own. A pinned
# assignment's version is not the branch head's, and tags are not harvested: left unknown.
DESIRED_VERSION = """
CREATE VIEW desired_version AS
SELECT
    a.environment_id,
    e.name AS environment,
    e.position AS environment_position,
    COALESCE(ar.workload, sa.workload_name, a.deployment_target_name) AS workload,
    a.deployment_target_name AS deployment_target,
    a.cluster_type_name AS cluster_type,
    a.id AS assignment_id,
    pr.url AS platform_repository,
    b.name AS platform_branch,
    ph.sha AS platform_commit,
    ar.namespace,
    ar.config,
    ar.config_hash,
    ar.reconciler_kind,
    ar.app_repository_id,
    apr.url AS app_repository,
    ar.app_branch,
    ar.app_path,
    ar.app_pinned_ref,
    ab.id AS app_branch_id,
    CASE WHEN ar.app_pinned_ref IS NULL THEN ah.sha END AS app_commit,
    m.workload_version AS version,
    m.version_source,
    m.images,
    m.manifest_digest,
    mc.sha AS manifests_commit,
    mc.committed_at AS manifests_committed_at
FROM assignment a
JOIN git_branch b ON b.id = a.branch_id AND b.deleted_at IS NULL
JOIN repository pr ON pr.id = a.repository_id
JOIN assignment_revision ar ON ar.assignment_id = a.id AND ar.valid_until_commit_id IS NULL
LEFT JOIN environment e ON e.id = a.environment_id
LEFT JOIN git_commit ph ON ph.id = b.head_commit_id
LEFT JOIN scheduling_target st
  ON st.gitops_url = pr.url AND st.environment_id = a.environment_id
LEFT JOIN scheduled_assignment sa
  ON sa.target_id = st.id
 AND sa.cluster_type_name = a.cluster_type_name
 AND sa.deployment_target_name = a.deployment_target_name
LEFT JOIN repository apr ON apr.id = ar.app_repository_id
LEFT JOIN git_branch ab
  ON ab.repository_id = ar.app_repository_id AND ab.name = ar.app_branch
 AND ab.deleted_at IS NULL
LEFT JOIN git_commit ah ON ah.id = ab.head_commit_id
LEFT JOIN manifest_revision m
  ON m.branch_id = ab.id AND m.path = COALESCE(ar.app_path, '')
 AND m.valid_until_commit_id IS NULL AND ar.app_pinned_ref IS NULL
LEFT JOIN git_commit mc ON mc.id = m.valid_from_commit_id
"""

# Flux source objects fetch and never apply (hub/gate/repository.py FLUX_SOURCE_KINDS); a
# Kustomization's branch is on the source object its ref names. A source path is normalised
# as hub/harvest/platform.py normalise_path does: "" and "." segments and repeated slashes
# dropped, no slash at either end. A group's version: the manifest range of its path covering
# the applied commit on the first-parent chain of the branch its ref names, in the repository
# that holds the commit (found through the branches of that name: a handful). A cluster with
# two objects in one group counts once: grouped per cluster first, which hashes, where a
# count(DISTINCT) would sort every object.
DEPLOYED_VERSION = r"""
CREATE MATERIALIZED VIEW deployed_version AS
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
    WHERE o.removed_at IS NULL
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
WHERE c.decommissioned_at IS NULL
GROUP BY c.environment_id, t.name
"""

DEPLOYED_VERSION_KEY = """
CREATE UNIQUE INDEX ux_deployed_version ON deployed_version (
    environment_id, cluster_type, source_url, source_ref, source_path, applied_sha,
    applied_version, condition
) NULLS NOT DISTINCT
"""

COMMENTS = {
    "VIEW desired_version": (
        "Per assignment at the head of its environment's platform branch: workload, namespace, "
        "platform config, the app source its reconciler follows, and the workload version, "
        "images and digest that source's manifests carry at the head of the app branch "
        "(manifests_commit: the app commit since which they do). version is NULL when the "
        "assignment is pinned (app_pinned_ref) or its manifests are not harvested."
    ),
    "MATERIALIZED VIEW deployed_version": (
        "Live reconciler objects of registered clusters summed up per environment, cluster "
        "type, source (url as reported, ref, normalised path), applied commit and condition "
        "(failing, suspended, live_drift, applied): clusters counts them; version is the one "
        "the applied commit carries on that branch and path. condition member: the clusters "
        "of the cluster type. As of refreshed_at; the hub refreshes it periodically."
    ),
}


def upgrade() -> None:
    op.add_column("assignment_revision", sa.Column("app_pinned_ref", sa.String(), nullable=True))
    op.add_column(
        "assignment_revision", sa.Column("workload", sa.String(length=253), nullable=True)
    )
    op.execute(DESIRED_VERSION)
    op.execute(DEPLOYED_VERSION)
    op.execute(DEPLOYED_VERSION_KEY)
    for target, comment in COMMENTS.items():
        quoted = comment.replace("'", "''")
        op.execute(f"COMMENT ON {target} IS '{quoted}'")


def downgrade() -> None:
    op.execute("DROP MATERIALIZED VIEW deployed_version")
    op.execute("DROP VIEW desired_version")
    op.drop_column("assignment_revision", "workload")
    op.drop_column("assignment_revision", "app_pinned_ref")
