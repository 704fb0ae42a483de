"""The timeline: what happened to the fleet, from several histories merged in time order
(docs/concepts.md, "Timeline").

A row kind is a source: a SQL function of its own slice's tables, `timeline_<source>(since,
until, environment, workload, cluster_type, cluster, selector)`, returning `timeline_row`s
whose time is in [since, until) and that the filters keep (each source honours them in its own
way, as the docs say). `timeline(...)` is their union; adding a source is a function and a
`timeline` that names it. All are plain SQL functions, so PostgreSQL inlines them into the
query that asks and each source reads its own indexes with the values asked.

`timeline_clusters` is the clusters the filters choose (the label selector as JSON, as
scheduler_core.kube.LabelSelectorRequirement; NULL: none), which the sources about clusters
join. Silences, drift and the harvester's and scheduler's failures are the events their jobs
publish (hub/events), read from the outbox while it keeps them (`event_retention`): the
timeline judges nothing again. `grafana.timeline` serves Grafana's read-only role.

Revision ID: 0052_timeline
Revises: 0051_rollout_halts
Create Date: 2026-12-05 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0052_timeline"
down_revision: str | None = "0051_rollout_halts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROW = """
CREATE TYPE timeline_row AS (
    at timestamptz,
    kind text,
    key text,
    environment text,
    workload text,
    cluster_types text[],
    clusters bigint,
    summary text,
    detail jsonb
)
"""

PARAMETERS = (
    "since timestamptz, until timestamptz, p_environment text, p_workload text, "
    "p_cluster_type text, p_cluster text, p_selector jsonb"
)
ARGUMENTS = "since, until, p_environment, p_workload, p_cluster_type, p_cluster, p_selector"
# No cluster-level filter: the rows about no cluster (commits, runs, repositories) stay.
NOT_NARROWED = "p_cluster_type IS NULL AND p_cluster IS NULL AND p_selector IS NULL"
# The workload's application repository: a manifests location of one of its targets.
OF_WORKLOAD = """EXISTS (
    SELECT FROM deployment_target d JOIN workload w ON w.id = d.workload_id
    WHERE w.name = p_workload AND d.manifests_repository_id = {repository}{branch})"""

CLUSTERS = """
CREATE FUNCTION timeline_clusters(
    p_environment text, p_cluster_type text, p_cluster text, p_selector jsonb
) RETURNS TABLE (id integer, name text, environment text, cluster_type text)
LANGUAGE sql STABLE AS $$
SELECT c.id, c.name, e.name, t.name
FROM cluster c
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type t ON t.id = c.cluster_type_id
WHERE (p_environment IS NULL OR e.name = p_environment)
  AND (p_cluster_type IS NULL OR t.name = p_cluster_type)
  AND (p_cluster IS NULL OR c.name = p_cluster)
  AND (p_selector IS NULL OR NOT EXISTS (
      SELECT FROM jsonb_to_recordset(p_selector) AS r (key text, operator text, "values" text[])
      WHERE NOT CASE r.operator
          WHEN 'In' THEN COALESCE(c.labels ->> r.key = ANY(r."values"), false)
          WHEN 'NotIn' THEN COALESCE(c.labels ->> r.key <> ALL(r."values"), true)
          WHEN 'Exists' THEN c.labels ->> r.key IS NOT NULL
          ELSE c.labels ->> r.key IS NULL END))
$$
"""

# Each commit that moved an environment branch (its first-parent chain), at its commit time.
COMMITS = f"""
SELECT g.committed_at, 'commit', 'commit/' || b.id || '/' || g.sha, e.name,
       (SELECT min(w.name) FROM deployment_target d JOIN workload w ON w.id = d.workload_id
        WHERE r.role = 'app' AND d.manifests_repository_id = r.id AND d.manifests_branch = b.name),
       NULL::text[], NULL::bigint,
       COALESCE(g.author_name, 'someone') || ' committed ' || left(g.sha, 12) || ' to '
       || b.name || ' of ' || r.url || ': ' || split_part(COALESCE(g.message, ''), E'\\n', 1),
       jsonb_build_object('repository', r.url, 'role', r.role, 'branch', b.name, 'sha', g.sha,
                          'author', g.author_name,
                          'subject', split_part(COALESCE(g.message, ''), E'\\n', 1))
FROM git_branch b
JOIN environment e ON e.id = b.environment_id
JOIN repository r ON r.id = b.repository_id
JOIN branch_commit bc ON bc.branch_id = b.id AND bc.mainline
JOIN git_commit g ON g.id = bc.commit_id
WHERE g.committed_at >= since AND g.committed_at < until AND b.deleted_at IS NULL
  AND {NOT_NARROWED}
  AND (p_environment IS NULL OR e.name = p_environment)
  AND (p_workload IS NULL OR r.role = 'app'
       AND {OF_WORKLOAD.format(repository="r.id", branch=" AND d.manifests_branch = b.name")})
"""

# Each scheduling run that changed an environment's assignments: the commit it wrote, with
# the assignments it changed by status (those not changed again since).
SCHEDULES = """
SELECT a.changed_at, 'schedule', 'schedule/' || t.id || '/' || a.commit_sha || '/'
       || extract(epoch FROM a.changed_at), e.name, NULL,
       array_agg(DISTINCT a.cluster_type_name ORDER BY a.cluster_type_name), NULL::bigint,
       'the scheduler wrote ' || left(a.commit_sha, 12) || ' to ' || COALESCE(a.branch, e.name)
       || ': ' || count(*) || ' assignments changed',
       jsonb_build_object('commit_sha', a.commit_sha, 'branch', a.branch,
                          'assignments', count(*),
                          'failed', count(*) FILTER (WHERE a.status <> 'rendered'))
FROM scheduled_assignment a
JOIN scheduling_target t ON t.id = a.target_id
JOIN environment e ON e.id = t.environment_id
WHERE a.changed_at >= since AND a.changed_at < until AND a.commit_sha IS NOT NULL
  AND p_cluster IS NULL AND p_selector IS NULL
  AND (p_environment IS NULL OR e.name = p_environment)
  AND (p_workload IS NULL OR a.workload_name = p_workload)
  AND (p_cluster_type IS NULL OR a.cluster_type_name = p_cluster_type)
GROUP BY t.id, e.name, a.commit_sha, a.branch, a.changed_at
"""

# A rollout's start, its first cluster, half and all of its expected clusters (converged), its
# failure and each stall, with how many expected clusters had reached it by then. At one time,
# the later milestone has the greater key: it comes first, as the later rows do.
ROLLOUTS = """
SELECT m.at, 'rollout.' || m.milestone,
       'rollout/' || r.dora_rollup_id || '/' || m.ordinal || m.suffix, r.environment,
       r.workload, NULL::text[], m.reached,
       COALESCE(r.workload || ' ' || r.revision, 'platform commit ' || left(r.revision, 12))
       || ' ' || m.what || ' on ' || r.environment || ': ' || m.reached || ' of '
       || r.expected_clusters || ' clusters'
       || CASE WHEN m.milestone = 'failed'
               THEN ', ' || COALESCE(r.failed_cluster, 'a cluster') || ' failed ('
                    || COALESCE(r.failure_reason, 'no reason given') || ')' ELSE '' END,
       jsonb_build_object('revision', r.revision, 'commit_sha', r.commit_sha,
                          'state', r.state, 'expected_clusters', r.expected_clusters,
                          'reached_clusters', m.reached, 'failed_clusters', r.failed_clusters,
                          'failed_cluster', r.failed_cluster,
                          'failure_reason', r.failure_reason)
FROM rollout r
JOIN dora_rollup d ON d.id = r.dora_rollup_id
CROSS JOIN LATERAL (
    SELECT array_agg(GREATEST(x, r.started_at) ORDER BY x) AS times
    FROM unnest(d.reached_times) AS x
) AS reached
CROSS JOIN LATERAL (
    SELECT s.milestone, s.at, s.ordinal, s.suffix, s.what,
           (SELECT count(*) FROM unnest(reached.times) AS x WHERE x <= s.at) AS reached
    FROM (
        VALUES ('started', r.started_at, 0, '', 'started'),
               ('first_cluster', reached.times[1], 1, '', 'reached its first cluster'),
               ('half', CASE WHEN r.expected_clusters > 2
                             THEN reached.times[ceil(r.expected_clusters / 2.0)::int] END,
                2, '', 'reached half its clusters'),
               ('converged', r.converged_at, 3, '', 'converged'),
               ('failed', r.failed_at, 4, '', 'failed')
        UNION ALL
        SELECT 'stalled', lower(stall), 5, '/' || extract(epoch FROM lower(stall)), 'stalled'
        FROM unnest(r.stalled) AS stall
    ) AS s (milestone, at, ordinal, suffix, what)
    WHERE s.at >= since AND s.at < until
) AS m
WHERE r.started_at < until
  AND (r.state IN ('in_progress', 'stalled')
       OR GREATEST(r.last_progress_at, r.state_since) >= since)
  AND (p_environment IS NULL OR r.environment = p_environment)
  AND (p_workload IS NULL OR r.workload = p_workload)
  AND (p_cluster_type IS NULL AND p_cluster IS NULL AND p_selector IS NULL OR EXISTS (
      SELECT FROM timeline_clusters(r.environment, p_cluster_type, p_cluster, p_selector)))
"""

# Per 5-minute bucket and environment: the clusters with an object that turned not Ready (of
# them, those failing: Ready false) with the commonest reasons, and those with one that turned
# Ready again. An object's previous transition says what it turned from. A bucket is in the
# range when its start is, and counts all of its transitions.
HEALTH = """
WITH moved AS (
    SELECT s.observed_at, s.object_id, s.cluster_id, s.ready, s.reason, s.removed, s.suspended,
           row_number() OVER object AS nth, lag(s.ready) OVER object AS before
    FROM status_transition s
    WHERE s.observed_at >= since AND s.observed_at < until + interval '5 minutes'
      AND p_workload IS NULL
    WINDOW object AS (PARTITION BY s.object_id ORDER BY s.observed_at)
),
-- An object's first change of the range looks its state before up (NULL: it had none),
-- once: the lookups are most of the work.
judged AS MATERIALIZED (
    SELECT date_bin('5 minutes', m.observed_at, TIMESTAMPTZ '2000-01-01') AS bucket,
           m.cluster_id, m.ready, m.reason,
           CASE WHEN m.nth > 1 THEN m.before IS TRUE ELSE (
               SELECT q.ready IS TRUE FROM status_transition q
               WHERE q.object_id = m.object_id AND q.observed_at < m.observed_at
               ORDER BY q.observed_at DESC LIMIT 1) END AS was_ready
    FROM moved m
    WHERE date_bin('5 minutes', m.observed_at, TIMESTAMPTZ '2000-01-01') >= since
      AND date_bin('5 minutes', m.observed_at, TIMESTAMPTZ '2000-01-01') < until
      AND NOT m.removed AND NOT m.suspended
),
changed AS (
    SELECT j.bucket, k.environment, k.cluster_type, j.cluster_id, j.ready, j.reason, j.was_ready
    FROM judged j
    JOIN timeline_clusters(p_environment, p_cluster_type, p_cluster, p_selector) k
      ON k.id = j.cluster_id
    WHERE (j.ready IS TRUE) <> j.was_ready
),
reasons AS (
    SELECT bucket, environment,
           jsonb_agg(jsonb_build_object('reason', reason, 'clusters', clusters)
                     ORDER BY clusters DESC, reason) FILTER (WHERE rank <= 3) AS commonest
    FROM (
        SELECT bucket, environment, COALESCE(reason, '(none)') AS reason,
               count(DISTINCT cluster_id) AS clusters,
               row_number() OVER (PARTITION BY bucket, environment
                                  ORDER BY count(DISTINCT cluster_id) DESC,
                                           COALESCE(reason, '(none)')) AS rank
        FROM changed WHERE was_ready
        GROUP BY bucket, environment, COALESCE(reason, '(none)')
    ) AS counted
    GROUP BY bucket, environment
),
turned AS (
    SELECT bucket, environment, was_ready,
           array_agg(DISTINCT cluster_type ORDER BY cluster_type)
               FILTER (WHERE cluster_type IS NOT NULL) AS cluster_types,
           count(DISTINCT cluster_id) AS clusters,
           count(DISTINCT cluster_id) FILTER (WHERE ready IS FALSE) AS failing
    FROM changed
    GROUP BY bucket, environment, was_ready
)
SELECT t.bucket, CASE WHEN t.was_ready THEN 'health.regressed' ELSE 'health.recovered' END,
       'health/' || COALESCE(t.environment, '') || '/' || extract(epoch FROM t.bucket)
       || CASE WHEN t.was_ready THEN '/regressed' ELSE '/recovered' END,
       t.environment, NULL, t.cluster_types, t.clusters,
       CASE WHEN t.was_ready
            THEN t.clusters || ' clusters turned not ready (' || t.failing || ' failing) on '
                 || COALESCE(t.environment, 'no environment') || COALESCE(': ' || (
                     SELECT string_agg(c ->> 'reason' || ' ' || (c ->> 'clusters'), ', ')
                     FROM jsonb_array_elements(r.commonest) AS c), '')
            ELSE t.clusters || ' clusters turned ready again on '
                 || COALESCE(t.environment, 'no environment') END,
       jsonb_build_object('clusters', t.clusters, 'failing', t.failing)
       || CASE WHEN t.was_ready THEN jsonb_build_object('reasons', r.commonest)
               ELSE '{}'::jsonb END
FROM turned t
LEFT JOIN reasons r
  ON t.was_ready AND r.bucket = t.bucket AND r.environment IS NOT DISTINCT FROM t.environment
"""

# The events the judging jobs published: drift started and resolved, clusters gone stale and
# back, a repository's fetch failing and recovered, an environment's scheduling failing and
# recovered. A cluster filter keeps those that list a chosen cluster.
EVENT_TYPES = (
    "fleetmark.drift.started",
    "fleetmark.drift.resolved",
    "fleetmark.cluster.stale",
    "fleetmark.cluster.recovered",
    "fleetmark.harvest.failing",
    "fleetmark.harvest.recovered",
    "fleetmark.schedule.failed",
    "fleetmark.schedule.recovered",
)
_TYPES = ", ".join(f"'{name}'" for name in EVENT_TYPES)
EVENTS = f"""
SELECT o.time, substr(o.type, 11), 'event/' || o.id, o.environment, o.workload,
       o.cluster_types, (o.body -> 'data' ->> 'count')::bigint,
       CASE o.type
           WHEN 'fleetmark.drift.started' THEN (o.body -> 'data' ->> 'count')
                || ' clusters drifted longer than the grace on ' || o.environment
           WHEN 'fleetmark.drift.resolved' THEN 'no cluster drifted on ' || o.environment
           WHEN 'fleetmark.cluster.stale' THEN (o.body -> 'data' ->> 'count')
                || ' clusters went stale on ' || o.environment
           WHEN 'fleetmark.cluster.recovered' THEN (o.body -> 'data' ->> 'count')
                || ' clusters reported again on ' || o.environment
           WHEN 'fleetmark.harvest.failing' THEN 'fetching ' || (o.body -> 'data' ->> 'repository')
                || ' fails: ' || COALESCE(o.body -> 'data' ->> 'error', '')
           WHEN 'fleetmark.harvest.recovered' THEN 'fetching '
                || (o.body -> 'data' ->> 'repository') || ' works again'
           WHEN 'fleetmark.schedule.failed' THEN 'scheduling '
                || COALESCE(o.environment, 'the control plane') || ' fails: '
                || COALESCE(o.body -> 'data' ->> 'failure', '')
           ELSE 'scheduling ' || COALESCE(o.environment, 'the control plane') || ' works again'
       END,
       (o.body -> 'data') - 'evidence_url'
FROM outbox_event o
WHERE o.time >= since AND o.time < until AND o.type IN ({_TYPES})
  AND (p_environment IS NULL OR o.environment = p_environment)
  AND (p_workload IS NULL OR o.workload = p_workload)
  AND (p_cluster_type IS NULL OR p_cluster_type = ANY(o.cluster_types))
  AND (p_cluster IS NULL AND p_selector IS NULL OR EXISTS (
      SELECT FROM timeline_clusters(o.environment, p_cluster_type, p_cluster, p_selector) k
      WHERE o.body -> 'data' -> 'clusters' @> jsonb_build_array(k.name)))
"""

DECOMMISSIONS = """
SELECT c.decommissioned_at, 'cluster.decommissioned', 'cluster/' || c.id || '/decommissioned',
       k.environment, NULL, array_remove(ARRAY[k.cluster_type], NULL), 1::bigint,
       'cluster ' || c.name || ' decommissioned', jsonb_build_object('cluster', c.name)
FROM cluster c
JOIN timeline_clusters(p_environment, p_cluster_type, p_cluster, p_selector) k ON k.id = c.id
WHERE c.decommissioned_at >= since AND c.decommissioned_at < until AND p_workload IS NULL
"""

# A harvest error: a file of a commit that could not be read (first seen).
HARVEST_ERRORS = f"""
SELECT h.occurred_at, 'harvest.error', 'harvest_error/' || h.id, NULL, NULL, NULL::text[],
       NULL::bigint,
       'harvesting ' || r.url || COALESCE(' at ' || left(h.commit_sha, 12), '')
       || COALESCE(' (' || h.path || ')', '') || ': ' || h.message,
       jsonb_build_object('repository', r.url, 'commit_sha', h.commit_sha, 'path', h.path,
                          'message', h.message, 'occurrences', h.occurrences)
FROM harvest_error h
JOIN repository r ON r.id = h.repository_id
WHERE h.occurred_at >= since AND h.occurred_at < until AND p_environment IS NULL
  AND {NOT_NARROWED}
  AND (p_workload IS NULL OR {OF_WORKLOAD.format(repository="r.id", branch="")})
"""

SOURCES = {
    "commits": COMMITS,
    "schedules": SCHEDULES,
    "rollouts": ROLLOUTS,
    "health": HEALTH,
    "events": EVENTS,
    "decommissions": DECOMMISSIONS,
    "harvest_errors": HARVEST_ERRORS,
}


def _function(name: str, body: str) -> str:
    return (
        f"CREATE FUNCTION {name}({PARAMETERS}) RETURNS SETOF timeline_row "
        f"LANGUAGE sql STABLE AS $${body}$$"
    )


def upgrade() -> None:
    op.create_index(op.f("ix_outbox_event_time"), "outbox_event", ["time"])
    op.execute(ROW)
    op.execute(CLUSTERS)
    for source, body in SOURCES.items():
        op.execute(_function(f"timeline_{source}", body))
    union = "\nUNION ALL\n".join(
        f"SELECT * FROM timeline_{source}({ARGUMENTS})" for source in SOURCES
    )
    op.execute(_function("timeline", union))
    # Grafana's read-only role reads the schema `grafana` alone: this runs as the store's owner.
    op.execute(
        "CREATE FUNCTION grafana.timeline(since timestamptz, until timestamptz, "
        "p_environment text DEFAULT NULL, p_workload text DEFAULT NULL, "
        "p_cluster_type text DEFAULT NULL, p_cluster text DEFAULT NULL) "
        "RETURNS SETOF timeline_row LANGUAGE sql STABLE SECURITY DEFINER "
        "SET search_path = public, pg_temp AS "
        "$$SELECT * FROM public.timeline(since, until, p_environment, p_workload, "
        "p_cluster_type, p_cluster, NULL)$$"
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION grafana.timeline(timestamptz, timestamptz, text, text, text, text)")
    signature = "timestamptz, timestamptz, text, text, text, text, jsonb"
    op.execute(f"DROP FUNCTION timeline({signature})")
    for source in reversed(SOURCES):
        op.execute(f"DROP FUNCTION timeline_{source}({signature})")
    op.execute("DROP FUNCTION timeline_clusters(text, text, text, jsonb)")
    op.execute("DROP TYPE timeline_row")
    op.drop_index(op.f("ix_outbox_event_time"), table_name="outbox_event")
