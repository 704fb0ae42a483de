"""DORA: the rollouts of platform commits and workload versions, read by the API and the
dashboards alike.

`dora_rollout(environments, workload, window_start, as_of)` returns one row per rollout in the
given environments (every environment when NULL) that started in the window: of a platform
commit of an environment's platform branch when `workload` is NULL, of a version of the
workload otherwise. The figures (hub/dora/calculation.py) are computed from these rows; a
dashboard calls the function with its time range, e.g.
`SELECT * FROM dora_rollout(ARRAY['prod'], NULL, $__timeFrom()::timestamptz - interval '7 days',
$__timeTo()::timestamptz)`. `dora_member(environments, workload)` lists what takes part.

They are functions, not views: a rollout is judged from the transitions of a time window, and a
filter on a view cannot reach below the window functions that order each object's transitions.
With the window and the members known up front, only the members' transitions of the window are
read (by the object_id index, or by time when they are most of it); nothing else of the history.

What takes part (a "member"): a live reconciler object of a not decommissioned cluster of the
environment whose applied commit is on the first-parent chain of
- for platform commits, the environment's platform branch (whatever folder it follows);
- for a workload, the app branch of one of the workload's current assignments, following that
  assignment's folder, in a cluster of a cluster type that carries the assignment.
Flux source objects apply nothing and so never take part. A rollout of revision R (a chain
commit; for a workload, a version and, per folder, the chain commit that first carried it)
- starts when a member first attempts or applies R (for a version: a commit carrying it);
- expects the members first seen by then;
- is reached by a member when it is Ready with R or a later chain commit applied (ancestry
  by chain positions, hub/git/ancestry.py), and completes when its last expected member
  reaches it;
- fails at the first time an expected member reports Ready false while attempting R, before
  the rollout completed;
- is restored, once failed, at the first time every member of the environment (of its branch,
  or of the workload) is Ready again, on any revision.
Platform commits committed before window_start, and versions first carried before it, are not
rollouts of the window; facts from as_of on are not seen.

Revision ID: 0008_dora
Revises: 0007_environment_diff
Create Date: 2026-11-23 12:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008_dora"
down_revision: str | None = "0007_environment_diff"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MEMBER = "dora_member(text[], text)"
ROLLOUT = "dora_rollout(text[], text, timestamptz, timestamptz)"

# Scope: what one rollout covers. A platform commit is rolled out per platform branch (its id);
# a workload version across every app folder of the workload in the environment (scope 0).
# Kalypso names a deployment target `<workload>-<target>`, the only tie between an assignment
# and its workload that the platform repository holds. A folder path is compared the way
# hub.harvest.platform.normalise_path spells it.
DORA_MEMBER = """
CREATE FUNCTION dora_member(environments text[], workload text)
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
platform_branch AS (
    SELECT b.id, b.environment_id
    FROM git_branch b
    JOIN repository r ON r.id = b.repository_id
    JOIN environment e ON e.id = b.environment_id
    WHERE r.role = 'platform' AND b.deleted_at IS NULL
      AND (dora_member.environments IS NULL OR e.name = ANY(dora_member.environments))
),
source AS (
    SELECT pb.environment_id, pb.id AS scope, pb.id AS branch_id, NULL::text AS path,
           NULL::text[] AS cluster_types
    FROM platform_branch pb
    WHERE dora_member.workload IS NULL
    UNION ALL
    SELECT pb.environment_id, 0, ab.id, coalesce(ar.app_path, ''),
           array_agg(DISTINCT a.cluster_type_name)
    FROM platform_branch pb
    JOIN assignment a ON a.branch_id = pb.id
    JOIN assignment_revision ar ON ar.assignment_id = a.id AND ar.valid_until_commit_id IS NULL
    JOIN git_branch ab
      ON ab.repository_id = ar.app_repository_id AND ab.name = ar.app_branch
     AND ab.deleted_at IS NULL
    WHERE starts_with(a.deployment_target_name, dora_member.workload || '-')
    GROUP BY pb.environment_id, ab.id, ar.app_path
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
WHERE s.path = array_to_string(
    array_remove(array_remove(string_to_array(coalesce(o.source_path, ''), '/'), ''), '.'), '/')
$function$
"""

# dora_rollout finds the members first, then hands them to the query as constants ($3 to $9):
# the planner then knows how many transitions it will read, reads them by the object_id index
# or by time as suits, and checks a row's object against the members by hash. It still sees a
# handful of rows where the later CTEs hold thousands (their estimates multiply down, join after
# join), so the function runs without nested loops, which would compare every pair of those
# rows, and without JIT compilation, which the resulting cost estimates would call for in vain.
DORA_ROLLOUT = """
CREATE FUNCTION dora_rollout(
    environments text[],
    workload text,
    window_start timestamptz,
    as_of timestamptz
)
RETURNS TABLE (
    environment text,
    environment_position integer,
    repository text,
    branch text,
    revision text,
    commit_sha text,
    committed_at timestamptz,
    started_at timestamptz,
    expected_clusters bigint,
    reached_clusters bigint,
    completed_at timestamptz,
    failed_at timestamptz,
    failed_clusters bigint,
    failed_cluster text,
    failure_reason text,
    failure_message text,
    restored_at timestamptz
)
LANGUAGE plpgsql STABLE
SET enable_nestloop = off
SET jit = off
AS $function$
DECLARE
    taking_part record;
BEGIN
    SELECT coalesce(array_agg(m.environment_id), '{}') AS environment_ids,
           coalesce(array_agg(m.scope), '{}') AS scopes,
           coalesce(array_agg(m.branch_id), '{}') AS branch_ids,
           coalesce(array_agg(m.path), '{}') AS paths,
           coalesce(array_agg(m.object_id), '{}') AS object_ids,
           coalesce(array_agg(m.cluster_id), '{}') AS cluster_ids,
           coalesce(array_agg(m.first_seen_at), '{}') AS first_seen
    INTO taking_part
    FROM dora_member(environments, workload) m;
    RETURN QUERY EXECUTE $query$
WITH
member_row AS (
    SELECT * FROM unnest($3::integer[], $4::integer[], $5::integer[], $6::text[], $7::bigint[],
                         $8::integer[], $9::timestamptz[])
        AS m(environment_id, scope, branch_id, path, object_id, cluster_id, first_seen_at)
),
source AS MATERIALIZED (
    SELECT row_number() OVER () AS id, s.*
    FROM (SELECT DISTINCT environment_id, scope, branch_id, path FROM member_row) s
),
member AS MATERIALIZED (
    SELECT s.id AS source_id, m.environment_id, m.scope, m.branch_id, m.object_id, m.cluster_id,
           m.first_seen_at
    FROM member_row m
    JOIN source s
      ON s.environment_id = m.environment_id AND s.scope = m.scope
     AND s.branch_id = m.branch_id AND s.path IS NOT DISTINCT FROM m.path
),
chain AS MATERIALIZED (
    SELECT bc.branch_id, c.sha, bc.position, c.committed_at
    FROM branch_commit bc
    JOIN git_commit c ON c.id = bc.commit_id
    WHERE bc.mainline AND bc.branch_id IN (SELECT branch_id FROM source)
),
version_range AS (
    SELECT s.id AS source_id, m.workload_version AS revision, f.position AS from_position,
           u.position AS until_position
    FROM source s
    JOIN manifest_revision m ON m.branch_id = s.branch_id AND m.path = s.path
    JOIN branch_commit f ON f.branch_id = m.branch_id AND f.commit_id = m.valid_from_commit_id
    LEFT JOIN branch_commit u
      ON u.branch_id = m.branch_id AND u.commit_id = m.valid_until_commit_id
    WHERE m.workload_version IS NOT NULL
),
candidate AS (
    SELECT s.id AS source_id, s.environment_id, s.scope, ch.sha AS revision,
           ch.position AS required, ch.sha AS commit_sha, ch.committed_at
    FROM source s
    JOIN chain ch ON ch.branch_id = s.branch_id
    WHERE s.path IS NULL
      AND ch.committed_at >= $1 AND ch.committed_at < $2
    UNION ALL
    SELECT v.source_id, s.environment_id, s.scope, v.revision, v.required, ch.sha,
           ch.committed_at
    FROM (
        SELECT source_id, revision, min(from_position) AS required
        FROM version_range GROUP BY source_id, revision
    ) v
    JOIN source s ON s.id = v.source_id
    JOIN chain ch ON ch.branch_id = s.branch_id AND ch.position = v.required
),
-- Per source and revision: the chain position a member must reach.
target AS MATERIALIZED (
    SELECT c.* FROM candidate c
    WHERE c.scope <> 0
       OR (c.environment_id, c.revision) IN (
           SELECT environment_id, revision FROM candidate WHERE scope = 0
           GROUP BY environment_id, revision
           HAVING min(committed_at) >= $1
              AND min(committed_at) < $2)
),
-- Per source and revision: the chain positions whose commits carry the revision.
carried AS MATERIALIZED (
    SELECT t.source_id, t.revision, t.required AS position
    FROM target t
    WHERE t.scope <> 0
    UNION ALL
    SELECT r.source_id, r.revision, g.position
    FROM version_range r
    JOIN target t ON t.source_id = r.source_id AND t.revision = r.revision
    CROSS JOIN LATERAL generate_series(
        r.from_position,
        coalesce(r.until_position - 1,
                 (SELECT max(ch.position) FROM chain ch
                  JOIN source s ON s.branch_id = ch.branch_id WHERE s.id = r.source_id))
    ) AS g(position)
),
-- Each member's transitions in the window, with the chain positions of the commits it applied
-- and attempted; the highest position it was Ready at so far (and before this report); whether
-- it is not Ready, and was not at its previous report.
transition AS MATERIALIZED (
    SELECT m.source_id, t.object_id, t.observed_at, t.received_at, t.ready, t.removed,
           CASE WHEN t.ready IS FALSE THEN t.reason END AS reason,
           CASE WHEN t.ready IS FALSE THEN t.message END AS message,
           ap.position AS applied_position, att.position AS attempted_position,
           max(ap.position) FILTER (WHERE t.ready AND NOT t.removed) OVER upto AS level,
           max(ap.position) FILTER (WHERE t.ready AND NOT t.removed) OVER before
               AS previous_level,
           (NOT t.removed AND t.ready IS NOT TRUE)::int AS unready,
           lag((NOT t.removed AND t.ready IS NOT TRUE)::int) OVER by_time AS was_unready
    FROM status_transition t
    JOIN member m ON m.object_id = t.object_id
    LEFT JOIN chain ap ON ap.branch_id = m.branch_id AND ap.sha = t.applied_sha
    LEFT JOIN chain att ON att.branch_id = m.branch_id AND att.sha = t.attempted_sha
    WHERE t.object_id = ANY($7) AND t.observed_at >= $1 AND t.observed_at < $2
    WINDOW by_time AS (PARTITION BY t.object_id ORDER BY t.observed_at, t.received_at),
           upto AS (by_time ROWS UNBOUNDED PRECEDING),
           before AS (by_time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
lowest AS (
    SELECT source_id, min(required) AS required FROM target GROUP BY source_id
),
-- Stepping up from one level to a higher one reaches every target in between at once.
reach AS (
    SELECT t.environment_id, t.scope, t.revision, m.cluster_id, m.first_seen_at,
           tr.observed_at AS reached_at
    FROM transition tr
    JOIN member m ON m.object_id = tr.object_id
    JOIN lowest lo ON lo.source_id = tr.source_id
    CROSS JOIN LATERAL generate_series(greatest(tr.previous_level + 1, lo.required), tr.level)
        AS g(position)
    JOIN target t ON t.source_id = tr.source_id AND t.required = g.position
    WHERE tr.level > tr.previous_level OR (tr.level IS NOT NULL AND tr.previous_level IS NULL)
),
-- When each chain position was first attempted or applied, per source.
seen AS (
    SELECT source_id, position, min(observed_at) AS observed_at
    FROM (
        SELECT source_id, observed_at, applied_position AS position
        FROM transition WHERE applied_position IS NOT NULL
        UNION ALL
        SELECT source_id, observed_at, attempted_position
        FROM transition WHERE attempted_position IS NOT NULL
    ) x
    GROUP BY source_id, position
),
touch AS (
    SELECT c.source_id, c.revision, min(x.observed_at) AS started_at
    FROM seen x
    JOIN carried c ON c.source_id = x.source_id AND c.position = x.position
    GROUP BY c.source_id, c.revision
),
rollout AS MATERIALIZED (
    SELECT t.environment_id, t.scope, t.revision,
           min(t.committed_at) AS committed_at,
           (array_agg(t.commit_sha ORDER BY t.committed_at, t.commit_sha))[1] AS commit_sha,
           min(tc.started_at) AS started_at
    FROM target t
    LEFT JOIN touch tc ON tc.source_id = t.source_id AND tc.revision = t.revision
    GROUP BY t.environment_id, t.scope, t.revision
    HAVING min(tc.started_at) IS NOT NULL
),
-- Per rollout: its expected members (first seen by the start) and clusters, how many of those
-- members reached it, and when the last did.
reached AS (
    SELECT r.environment_id, r.scope, r.revision, count(*) AS members,
           max(x.reached_at) AS reached_at
    FROM rollout r
    JOIN reach x
      ON x.environment_id = r.environment_id AND x.scope = r.scope
     AND x.revision = r.revision AND x.first_seen_at <= r.started_at
    GROUP BY r.environment_id, r.scope, r.revision
),
progress AS MATERIALIZED (
    SELECT r.environment_id, r.scope, r.revision, e.members AS expected_members,
           e.clusters AS expected_clusters,
           CASE WHEN x.members = e.members THEN x.reached_at END AS completed_at
    FROM rollout r
    CROSS JOIN LATERAL (
        SELECT count(*) AS members, count(DISTINCT m.cluster_id) AS clusters
        FROM member m
        WHERE m.environment_id = r.environment_id AND m.scope = r.scope
          AND m.first_seen_at <= r.started_at
    ) e
    LEFT JOIN reached x
      ON x.environment_id = r.environment_id AND x.scope = r.scope AND x.revision = r.revision
),
-- The clusters an unfinished rollout has reached: those whose expected members all did.
partly AS (
    SELECT environment_id, scope, revision, count(*) AS clusters
    FROM (
        SELECT environment_id, scope, revision, cluster_id
        FROM (
            SELECT p.environment_id, p.scope, p.revision, m.cluster_id, 1 AS expected,
                   0 AS reached
            FROM progress p
            JOIN rollout r
              ON r.environment_id = p.environment_id AND r.scope = p.scope
             AND r.revision = p.revision
            JOIN member m
              ON m.environment_id = p.environment_id AND m.scope = p.scope
             AND m.first_seen_at <= r.started_at
            WHERE p.completed_at IS NULL
            UNION ALL
            SELECT p.environment_id, p.scope, p.revision, x.cluster_id, 0, 1
            FROM progress p
            JOIN rollout r
              ON r.environment_id = p.environment_id AND r.scope = p.scope
             AND r.revision = p.revision
            JOIN reach x
              ON x.environment_id = p.environment_id AND x.scope = p.scope
             AND x.revision = p.revision AND x.first_seen_at <= r.started_at
            WHERE p.completed_at IS NULL
        ) y
        GROUP BY environment_id, scope, revision, cluster_id
        HAVING sum(reached) = sum(expected)
    ) z
    GROUP BY environment_id, scope, revision
),
-- Reports of members that failed to reconcile a revision they attempted.
failing AS MATERIALIZED (
    SELECT m.environment_id, m.scope, c.revision, m.cluster_id, m.first_seen_at,
           tr.observed_at, tr.received_at, tr.reason, tr.message
    FROM transition tr
    JOIN member m ON m.object_id = tr.object_id
    JOIN carried c ON c.source_id = tr.source_id AND c.position = tr.attempted_position
    WHERE tr.ready IS FALSE AND NOT tr.removed
),
failed AS MATERIALIZED (
    SELECT r.environment_id, r.scope, r.revision,
           min(f.observed_at) AS failed_at,
           count(DISTINCT f.cluster_id) AS failed_clusters,
           (array_agg(f.cluster_id ORDER BY f.observed_at, f.received_at))[1] AS cluster_id,
           (array_agg(f.reason ORDER BY f.observed_at, f.received_at))[1] AS reason,
           (array_agg(f.message ORDER BY f.observed_at, f.received_at))[1] AS message
    FROM rollout r
    JOIN progress p
      ON p.environment_id = r.environment_id AND p.scope = r.scope AND p.revision = r.revision
    JOIN failing f
      ON f.environment_id = r.environment_id AND f.scope = r.scope AND f.revision = r.revision
    WHERE f.first_seen_at <= r.started_at
      AND f.observed_at < coalesce(p.completed_at, $2)
    GROUP BY r.environment_id, r.scope, r.revision
),
-- Restoration: how many members are not Ready, as the window goes on, starting from their
-- state when it opens; restored at the first moment after a failure at which none is.
opening AS (
    SELECT m.environment_id, m.scope, m.object_id,
           coalesce(NOT last.removed AND last.ready IS NOT TRUE, false)::int AS unready
    FROM member m
    LEFT JOIN LATERAL (
        SELECT t.ready, t.removed FROM status_transition t
        WHERE t.object_id = m.object_id AND t.observed_at < $1
        ORDER BY t.observed_at DESC, t.received_at DESC
        LIMIT 1
    ) last ON true
    WHERE EXISTS (SELECT FROM failed)
),
change AS (
    SELECT o.environment_id, o.scope, tr.observed_at,
           sum(tr.unready - coalesce(tr.was_unready, o.unready)) AS delta
    FROM transition tr
    JOIN opening o ON o.object_id = tr.object_id
    GROUP BY o.environment_id, o.scope, tr.observed_at
),
all_ready AS MATERIALIZED (
    SELECT c.environment_id, c.scope, c.observed_at
    FROM (
        SELECT environment_id, scope, observed_at,
               sum(delta) OVER (PARTITION BY environment_id, scope ORDER BY observed_at)
                   AS delta
        FROM change
    ) c
    JOIN (
        SELECT environment_id, scope, sum(unready) AS unready
        FROM opening GROUP BY environment_id, scope
    ) o ON o.environment_id = c.environment_id AND o.scope = c.scope
    WHERE o.unready + c.delta = 0
),
restored AS (
    SELECT f.environment_id, f.scope, f.revision, min(a.observed_at) AS restored_at
    FROM failed f
    JOIN all_ready a
      ON a.environment_id = f.environment_id AND a.scope = f.scope
     AND a.observed_at >= f.failed_at
    GROUP BY f.environment_id, f.scope, f.revision
)
SELECT e.name::text, e.position, pr.url::text, pb.name::text, r.revision::text,
       r.commit_sha::text, r.committed_at, r.started_at, p.expected_clusters,
       CASE WHEN p.completed_at IS NULL THEN coalesce(pt.clusters, 0)
            ELSE p.expected_clusters END,
       p.completed_at, f.failed_at,
       coalesce(f.failed_clusters, 0), fc.name::text, f.reason::text, f.message, rs.restored_at
FROM rollout r
JOIN environment e ON e.id = r.environment_id
LEFT JOIN git_branch pb ON pb.id = r.scope
LEFT JOIN repository pr ON pr.id = pb.repository_id
JOIN progress p
  ON p.environment_id = r.environment_id AND p.scope = r.scope AND p.revision = r.revision
LEFT JOIN partly pt
  ON pt.environment_id = r.environment_id AND pt.scope = r.scope AND pt.revision = r.revision
LEFT JOIN failed f
  ON f.environment_id = r.environment_id AND f.scope = r.scope AND f.revision = r.revision
LEFT JOIN cluster fc ON fc.id = f.cluster_id
LEFT JOIN restored rs
  ON rs.environment_id = r.environment_id AND rs.scope = r.scope AND rs.revision = r.revision
ORDER BY e.position NULLS LAST, e.name, r.started_at, r.revision
$query$
    USING window_start, as_of, taking_part.environment_ids, taking_part.scopes,
          taking_part.branch_ids, taking_part.paths, taking_part.object_ids,
          taking_part.cluster_ids, taking_part.first_seen;
END
$function$
"""

COMMENTS = {
    MEMBER: (
        "The reconciler objects taking part in the DORA rollouts of the environments (all when "
        "NULL): of platform commits (workload NULL) or of the workload's versions; scope is the "
        "platform branch, or 0 for a workload."
    ),
    ROLLOUT: (
        "One row per rollout of a platform commit (workload NULL) or of a version of the workload "
        "that started between window_start and as_of, per environment (all when environments is "
        "NULL): when it started, how many clusters it expected and reached, when it completed "
        "(every expected cluster Ready at it or later), failed (an expected cluster Ready false "
        "attempting it, before completion) and was restored (every cluster Ready again)."
    ),
}


def upgrade() -> None:
    op.execute(DORA_MEMBER)
    op.execute(DORA_ROLLOUT)
    for function, comment in COMMENTS.items():
        quoted = comment.replace("'", "''")
        op.execute(f"COMMENT ON FUNCTION {function} IS '{quoted}'")


def downgrade() -> None:
    op.execute(f"DROP FUNCTION {ROLLOUT}")
    op.execute(f"DROP FUNCTION {MEMBER}")
