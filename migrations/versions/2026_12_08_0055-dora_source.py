"""What a DORA scope follows (`dora_source`) apart from the objects that follow it
(`dora_member`): the suspects find the scopes of the objects that changed, not every member.

`dora_member` listed every member of a scope to tell which of an environment's objects belong
to it. The suspects need that only for the objects with a transition in their period, and the
count of the scope's clusters; listing prod's members at 10,000 clusters (90,530 objects of 21
scopes, a heap page per object) took 350-500 ms of the answer's 723 ms. `dora_source` returns a
scope's branches, folders and cluster types, which `dora_member` and the suspects both join to
objects; `folder_path` spells a folder as hub.harvest.platform.normalise_path does, for both.
`dora_member` returns the same rows as 0008's.

Revision ID: 0055_dora_source
Revises: 0054_object_applied_sha
Create Date: 2026-12-08 10:00:00
"""

from collections.abc import Sequence
from types import ModuleType

from alembic import context, op
from alembic.script import ScriptDirectory

revision: str = "0055_dora_source"
down_revision: str | None = "0054_object_applied_sha"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SOURCE = "dora_source(text[], text)"
FOLDER = "folder_path(text)"

FOLDER_PATH = """
CREATE FUNCTION folder_path(path text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN array_to_string(
    array_remove(array_remove(string_to_array(coalesce(path, ''), '/'), ''), '.'), '/')
"""

# A scope's sources: the environment's platform branch (no folder, no cluster types) when
# workload is NULL, else the app branch and folder of each of the workload's current
# assignments, with the cluster types that carry it. Kalypso names a deployment target
# `<workload>-<target>`, the only tie between an assignment and its workload that the platform
# repository holds.
DORA_SOURCE = """
CREATE FUNCTION dora_source(environments text[], workload text)
RETURNS TABLE (environment_id integer, branch_id integer, path text, cluster_types text[])
LANGUAGE sql STABLE
AS $function$
WITH platform_branch AS (
    SELECT b.id, b.environment_id
    FROM git_branch b
    JOIN repository r ON r.id = b.repository_id
    JOIN environment e ON e.id = b.environment_id
    WHERE r.role = 'platform' AND b.deleted_at IS NULL
      AND (dora_source.environments IS NULL OR e.name = ANY(dora_source.environments))
)
SELECT pb.environment_id, pb.id, NULL::text, NULL::text[]
FROM platform_branch pb
WHERE dora_source.workload IS NULL
UNION ALL
SELECT pb.environment_id, ab.id, coalesce(ar.app_path, ''),
       array_agg(DISTINCT a.cluster_type_name)
FROM platform_branch pb
JOIN assignment a ON a.branch_id = pb.id
JOIN assignment_revision ar ON ar.assignment_id = a.id AND ar.valid_until_commit_id IS NULL
JOIN git_branch ab
  ON ab.repository_id = ar.app_repository_id AND ab.name = ar.app_branch
 AND ab.deleted_at IS NULL
WHERE starts_with(a.deployment_target_name, dora_source.workload || '-')
GROUP BY pb.environment_id, ab.id, ar.app_path
$function$
"""

# Scope: the platform branch's id, or 0 for a workload (its folders are one rollout's).
DORA_MEMBER = """
CREATE OR REPLACE FUNCTION dora_member(environments text[], workload text)
RETURNS TABLE (
    environment_id integer,
    scope integer,
    branch_id integer,
    path text,
    object_id bigint,
    cluster_id integer,
    first_seen_at timestamptz
)
LANGUAGE sql STABLE
AS $function$
WITH
source AS (
    SELECT s.environment_id, CASE WHEN s.path IS NULL THEN s.branch_id ELSE 0 END AS scope,
           s.branch_id, s.path, s.cluster_types
    FROM dora_source(dora_member.environments, dora_member.workload) s
),
chain AS (
    SELECT bc.branch_id, c.sha
    FROM branch_commit bc
    JOIN git_commit c ON c.id = bc.commit_id
    WHERE bc.mainline AND bc.branch_id IN (SELECT branch_id FROM source)
)
SELECT s.environment_id, s.scope, s.branch_id, s.path, o.id, o.cluster_id, o.first_seen_at
FROM source s
JOIN cluster cl ON cl.environment_id = s.environment_id AND cl.decommissioned_at IS NULL
JOIN object_state o ON o.cluster_id = cl.id AND o.removed_at IS NULL
JOIN chain ch ON ch.branch_id = s.branch_id AND ch.sha = o.applied_sha
WHERE s.path IS NULL
UNION ALL
SELECT s.environment_id, s.scope, s.branch_id, s.path, o.id, o.cluster_id, o.first_seen_at
FROM source s
JOIN cluster_type ct ON ct.environment_id = s.environment_id AND ct.name = ANY(s.cluster_types)
JOIN cluster cl ON cl.cluster_type_id = ct.id AND cl.decommissioned_at IS NULL
JOIN object_state o ON o.cluster_id = cl.id AND o.removed_at IS NULL
JOIN chain ch ON ch.branch_id = s.branch_id AND ch.sha = o.applied_sha
WHERE s.path = folder_path(o.source_path)
$function$
"""

COMMENTS = {
    SOURCE: (
        "What the DORA scope of the environments (all when NULL) follows: the platform branch "
        "(path NULL) when workload is NULL, else the app branch and folder of each current "
        "assignment of the workload, with the cluster types that carry it."
    ),
    FOLDER: "A source folder as fleetmark compares it: no empty or '.' parts.",
}


def _dora_member_0008() -> str:
    script = ScriptDirectory.from_config(context.config).get_revision("0008_dora")
    assert script is not None
    module: ModuleType = script.module
    return str(module.DORA_MEMBER).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")


def upgrade() -> None:
    op.execute(FOLDER_PATH)
    op.execute(DORA_SOURCE)
    op.execute(DORA_MEMBER)
    for function, comment in COMMENTS.items():
        quoted = comment.replace("'", "''")
        op.execute(f"COMMENT ON FUNCTION {function} IS '{quoted}'")


def downgrade() -> None:
    op.execute(_dora_member_0008())
    op.execute(f"DROP FUNCTION {SOURCE}")
    op.execute(f"DROP FUNCTION {FOLDER}")
