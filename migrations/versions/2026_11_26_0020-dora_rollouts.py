"""DORA from a rollup: one stored row per rollout, kept up to date by a hub job.

Judging the rollouts from the raw transitions (`dora_rollout`, 0008_dora) reads every
transition of the window on every request: 12 to 17 seconds for 30 days of 10,000 clusters.
The DORA job (hub/dora/service.py, every `dora_interval`) now judges them and keeps the
verdicts in `dora_rollup`, one row per rollout of the platform commits of every environment
(workload '') and of each workload's versions (workload = its name), and when it did so per
workload in `dora_refresh`. A refresh judges again only from the oldest rollout whose outcome
can still change (not completed; failed and not restored; completed or restored too recently
for late reports to be ruled out); the rows of settled rollouts stay as they are.

Why a table and not a TimescaleDB continuous aggregate: a rollout is judged by ordering each
object's transitions (window functions: the highest revision it was Ready at so far, its
previous state), across objects and clusters and against the commit graph, and a continuous
aggregate may only be a plain time_bucket GROUP BY over one hypertable. A table the job
fills works the same on plain PostgreSQL and on TimescaleDB.

A stored row holds what `dora_rollout` returns for the rollout as of the refresh, and, so that
a range ending earlier is judged as `dora_rollout` with that as_of judges it, when each
expected cluster reached the rollout (`reached_times`) and when each failing cluster first
failed it (`failure_times`), both sorted. `dora_judgement` is `dora_rollout` with those two
columns; `dora_rollout` now returns its other columns.

The SQL entry points (same arguments, same columns):
- `dora_rollout(environments, workload, window_start, as_of)`: the raw computation from the
  transitions, as before; seconds on a large fleet.
- `dora_rolled_up(environments, workload, window_start, as_of)`: the same rows from the rollup,
  judged as of the earlier of as_of and the refresh (a time, facts from which on count as not
  yet happened: a completion, failure or restoration then or later is left out, and the
  clusters reached or failed are those before it); no rows for a workload not refreshed yet.
  The API reads it, and dashboards call it with their time range, e.g.
  `SELECT * FROM dora_rolled_up(NULL, NULL, $__timeFrom()::timestamptz - interval '7 days',
  $__timeTo()::timestamptz)`.
The two agree as long as the clusters taking part have not changed since the refresh (a
settled rollout keeps the clusters it expected) and no cluster reports a commit before its
commit time (the refresh reads the transitions from the oldest rollout it judges again).

Revision ID: 0020_dora_rollouts
Revises: 0019_fast_reads
Create Date: 2026-11-26 12:00:00
"""

from collections.abc import Sequence
from types import ModuleType

import sqlalchemy as sa
from alembic import context, op
from alembic.script import ScriptDirectory
from sqlalchemy.dialects import postgresql

revision: str = "0020_dora_rollouts"
down_revision: str | None = "0019_fast_reads"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLLOUT = "dora_rollout(text[], text, timestamptz, timestamptz)"
JUDGEMENT = "dora_judgement(text[], text, timestamptz, timestamptz)"
ROLLED_UP = "dora_rolled_up(text[], text, timestamptz, timestamptz)"

ROLLOUT_COLUMNS = """
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
    restored_at timestamptz"""

# 0008's `partly` counted, for unfinished rollouts, the clusters whose expected members had all
# reached it; this keeps, for every rollout, when each such cluster got there.
PARTLY = """partly AS (
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
),"""
CLUSTER_REACHED = """cluster_reached AS (
    SELECT environment_id, scope, revision, array_agg(reached_at ORDER BY reached_at) AS times
    FROM (
        SELECT environment_id, scope, revision, cluster_id, max(reached_at) AS reached_at
        FROM (
            SELECT r.environment_id, r.scope, r.revision, m.cluster_id, 1 AS expected,
                   0 AS reached, NULL::timestamptz AS reached_at
            FROM rollout r
            JOIN member m
              ON m.environment_id = r.environment_id AND m.scope = r.scope
             AND m.first_seen_at <= r.started_at
            UNION ALL
            SELECT r.environment_id, r.scope, r.revision, x.cluster_id, 0, 1, x.reached_at
            FROM rollout r
            JOIN reach x
              ON x.environment_id = r.environment_id AND x.scope = r.scope
             AND x.revision = r.revision AND x.first_seen_at <= r.started_at
        ) y
        GROUP BY environment_id, scope, revision, cluster_id
        HAVING sum(reached) = sum(expected)
    ) z
    GROUP BY environment_id, scope, revision
),"""

# 0008's `failed` summed up the counted failure reports per rollout; they are kept apart here
# so that each failing cluster's first failure can be kept too.
FAILED = """failed AS MATERIALIZED (
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
),"""
FAILED_BY_CLUSTER = """counted_failure AS MATERIALIZED (
    SELECT r.environment_id, r.scope, r.revision, f.cluster_id, f.observed_at, f.received_at,
           f.reason, f.message
    FROM rollout r
    JOIN progress p
      ON p.environment_id = r.environment_id AND p.scope = r.scope AND p.revision = r.revision
    JOIN failing f
      ON f.environment_id = r.environment_id AND f.scope = r.scope AND f.revision = r.revision
    WHERE f.first_seen_at <= r.started_at
      AND f.observed_at < coalesce(p.completed_at, $2)
),
failed AS MATERIALIZED (
    SELECT environment_id, scope, revision,
           min(observed_at) AS failed_at,
           count(DISTINCT cluster_id) AS failed_clusters,
           (array_agg(cluster_id ORDER BY observed_at, received_at))[1] AS cluster_id,
           (array_agg(reason ORDER BY observed_at, received_at))[1] AS reason,
           (array_agg(message ORDER BY observed_at, received_at))[1] AS message
    FROM counted_failure
    GROUP BY environment_id, scope, revision
),
cluster_failed AS (
    SELECT environment_id, scope, revision, array_agg(failed_at ORDER BY failed_at) AS times
    FROM (
        SELECT environment_id, scope, revision, cluster_id, min(observed_at) AS failed_at
        FROM counted_failure
        GROUP BY environment_id, scope, revision, cluster_id
    ) x
    GROUP BY environment_id, scope, revision
),"""

REACHED_COUNT = "coalesce(pt.clusters, 0)"
RESTORED_OUTPUT = "f.reason::text, f.message, rs.restored_at\n"
PARTLY_JOIN = "LEFT JOIN partly pt\n"


def _replaced(sql: str, old: str, new: str) -> str:
    assert sql.count(old) == 1, old
    return sql.replace(old, new)


def _dora_rollout_0008() -> str:
    script = ScriptDirectory.from_config(context.config).get_revision("0008_dora")
    assert script is not None
    module: ModuleType = script.module
    return str(module.DORA_ROLLOUT)


def _dora_judgement() -> str:
    """0008's dora_rollout, also returning when each expected cluster reached the rollout and
    when each failing cluster first failed it."""
    sql = _replaced(
        _dora_rollout_0008(), "CREATE FUNCTION dora_rollout(", "CREATE FUNCTION dora_judgement("
    )
    sql = _replaced(
        sql,
        "    restored_at timestamptz\n)",
        "    restored_at timestamptz,\n    reached_times timestamptz[],\n"
        "    failure_times timestamptz[]\n)",
    )
    sql = _replaced(sql, PARTLY, CLUSTER_REACHED)
    sql = _replaced(sql, FAILED, FAILED_BY_CLUSTER)
    sql = _replaced(sql, REACHED_COUNT, "coalesce(cardinality(pt.times), 0)")
    sql = _replaced(
        sql,
        RESTORED_OUTPUT,
        "f.reason::text, f.message, rs.restored_at,\n"
        "       coalesce(pt.times, '{}'), coalesce(cf.times, '{}')\n",
    )
    return _replaced(
        sql,
        PARTLY_JOIN,
        "LEFT JOIN cluster_failed cf\n"
        "  ON cf.environment_id = r.environment_id AND cf.scope = r.scope "
        "AND cf.revision = r.revision\n"
        "LEFT JOIN cluster_reached pt\n",
    )


DORA_ROLLOUT = f"""
CREATE OR REPLACE FUNCTION dora_rollout(
    environments text[],
    workload text,
    window_start timestamptz,
    as_of timestamptz
)
RETURNS TABLE ({ROLLOUT_COLUMNS}
)
LANGUAGE sql STABLE
AS $function$
SELECT j.environment, j.environment_position, j.repository, j.branch, j.revision, j.commit_sha,
       j.committed_at, j.started_at, j.expected_clusters, j.reached_clusters, j.completed_at,
       j.failed_at, j.failed_clusters, j.failed_cluster, j.failure_reason, j.failure_message,
       j.restored_at
FROM dora_judgement(environments, workload, window_start, as_of) j
$function$
"""

# A stored time at or after the cut has not happened yet. A row is as of the last refresh (a
# row left as it was is unchanged since), so with the cut there the stored counts hold; the
# sorted per-cluster times are read only for a rollout an earlier cut falls into, unfinished
# (clusters reached) or failed and unfinished (clusters failed) by then.
DORA_ROLLED_UP = f"""
CREATE FUNCTION dora_rolled_up(
    environments text[],
    workload text,
    window_start timestamptz,
    as_of timestamptz
)
RETURNS TABLE ({ROLLOUT_COLUMNS}
)
LANGUAGE sql STABLE
AS $function$
SELECT r.environment, r.environment_position, r.repository, r.branch, r.revision, r.commit_sha,
       r.committed_at, r.started_at, r.expected_clusters,
       CASE WHEN r.completed_at < c.cut OR c.cut = s.refreshed_at THEN r.reached_clusters
            ELSE (SELECT count(*) FROM unnest(r.reached_times) t WHERE t < c.cut) END,
       CASE WHEN r.completed_at < c.cut THEN r.completed_at END,
       CASE WHEN r.failed_at < c.cut THEN r.failed_at END,
       CASE WHEN r.failed_at IS NULL OR r.failed_at >= c.cut THEN 0
            WHEN r.completed_at < c.cut OR c.cut = s.refreshed_at THEN r.failed_clusters
            ELSE (SELECT count(*) FROM unnest(r.failure_times) t WHERE t < c.cut) END,
       CASE WHEN r.failed_at < c.cut THEN r.failed_cluster END,
       CASE WHEN r.failed_at < c.cut THEN r.failure_reason END,
       CASE WHEN r.failed_at < c.cut THEN r.failure_message END,
       CASE WHEN r.restored_at < c.cut THEN r.restored_at END
FROM dora_refresh s
CROSS JOIN LATERAL (SELECT least(dora_rolled_up.as_of, s.refreshed_at) AS cut) c
JOIN dora_rollup r
  ON r.workload = s.workload
 AND r.committed_at >= dora_rolled_up.window_start AND r.committed_at < c.cut
 AND r.started_at < c.cut
WHERE s.workload = coalesce(dora_rolled_up.workload, '')
  AND (dora_rolled_up.environments IS NULL OR r.environment = ANY(dora_rolled_up.environments))
ORDER BY r.environment_position NULLS LAST, r.environment, r.started_at, r.revision
$function$
"""

COMMENTS = {
    JUDGEMENT: (
        "dora_rollout with, per rollout, when each expected cluster reached it and when each "
        "failing cluster first failed it (sorted): what the DORA job keeps in dora_rollup."
    ),
    ROLLED_UP: (
        "The rows dora_rollout returns, from the rollup the DORA job keeps (dora_rollup), as of "
        "the earlier of as_of and its last refresh (dora_refresh); none for a workload not "
        "refreshed yet."
    ),
}


def _comment(function: str, comment: str) -> None:
    quoted = comment.replace("'", "''")
    op.execute(f"COMMENT ON FUNCTION {function} IS '{quoted}'")


def upgrade() -> None:
    op.create_table(
        "dora_rollup",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("workload", sa.String(length=253), nullable=False),
        sa.Column("environment", sa.String(), nullable=False),
        sa.Column("environment_position", sa.Integer(), nullable=True),
        sa.Column("repository", sa.String(), nullable=True),
        sa.Column("branch", sa.String(), nullable=True),
        sa.Column("revision", sa.String(), nullable=False),
        sa.Column("commit_sha", sa.String(length=64), nullable=False),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expected_clusters", sa.BigInteger(), nullable=False),
        sa.Column("reached_clusters", sa.BigInteger(), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failed_clusters", sa.BigInteger(), nullable=False),
        sa.Column("failed_cluster", sa.String(), nullable=True),
        sa.Column("failure_reason", sa.String(), nullable=True),
        sa.Column("failure_message", sa.String(), nullable=True),
        sa.Column("restored_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reached_times", postgresql.ARRAY(sa.DateTime(timezone=True)), nullable=False),
        sa.Column("failure_times", postgresql.ARRAY(sa.DateTime(timezone=True)), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dora_rollup")),
        sa.UniqueConstraint(
            "workload",
            "environment",
            "repository",
            "branch",
            "revision",
            name=op.f("uq_dora_rollup_workload_environment_repository_branch_revision"),
            postgresql_nulls_not_distinct=True,
        ),
    )
    op.create_index(
        op.f("ix_dora_rollup_workload_committed_at"), "dora_rollup", ["workload", "committed_at"]
    )
    op.create_table(
        "dora_refresh",
        sa.Column("workload", sa.String(length=253), nullable=False),
        sa.Column("refreshed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("workload", name=op.f("pk_dora_refresh")),
    )
    op.execute(_dora_judgement())
    op.execute(DORA_ROLLOUT)
    op.execute(DORA_ROLLED_UP)
    for function, comment in COMMENTS.items():
        _comment(function, comment)


def downgrade() -> None:
    op.execute(f"DROP FUNCTION {ROLLED_UP}")
    op.execute(_dora_rollout_0008().replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"))
    op.execute(f"DROP FUNCTION {JUDGEMENT}")
    op.drop_table("dora_refresh")
    op.drop_index(op.f("ix_dora_rollup_workload_committed_at"), table_name="dora_rollup")
    op.drop_table("dora_rollup")
