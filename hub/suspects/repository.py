"""SQL of the suspects and the halts: what the clusters of a scope applied and when they turned
not Ready (from the status transitions), and the halts kept in `rollout_halt`."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import Rollout, RolloutHalt

# Held while the halts are judged and written ("halts" in ASCII): one replica at a time.
HALTS_LOCK = 0x68616C7473

# What each scope of an environment (the platform branch when workload is NULL, else the
# workload) applied and when its objects turned not Ready, read at once for all its scopes.
# The transitions are the environment's in the period, read by time (a few rows per cluster
# and hour; on TimescaleDB from the period's chunks). Their objects are kept where they are
# members of a scope as the DORA figures take them (migration 0008_dora): live objects of live
# clusters applying a commit of the scope's branch (`dora_source`, migration 0055), in its
# folder and on a cluster type that carries it for a workload (a CASE: with `IS NULL OR` the
# planner guesses that almost no object passes, and re-runs what follows once per member).
# Only the objects that changed are looked up, never every member: some 90,000 in prod at
# 10,000 clusters. Each member with
# a transition in the period gets the one before `since` too, which tells what it ran and
# whether it was Ready then; each transition gets the one before it. Only what can apply a
# change or regress comes back (the rest tells the caller nothing), and nothing that a
# cluster's first report (its objects' first one) brought: that says what the cluster ran, not
# that it changed. Each row carries how many clusters its scope has: the environment's live
# clusters that have reported, of the cluster types that carry a workload (counted per cluster
# type, not per object).
_TRANSITIONS = text("""
WITH source AS MATERIALIZED (
    SELECT w.scope, w.workload, s.environment_id, s.branch_id, s.path, s.cluster_types
    FROM unnest(CAST(:workloads AS text[])) WITH ORDINALITY AS w(workload, scope)
    CROSS JOIN LATERAL dora_source(ARRAY[CAST(:environment AS text)], w.workload) s
),
live AS MATERIALIZED (
    SELECT c.id, c.environment_id, t.name AS cluster_type
    FROM cluster c
    LEFT JOIN cluster_type t ON t.id = c.cluster_type_id
    WHERE c.environment_id IN (SELECT s.environment_id FROM source s)
      AND c.decommissioned_at IS NULL AND c.first_seen_at IS NOT NULL
),
placed AS (
    SELECT s.scope, CAST(sum(n.clusters) AS integer) AS clusters
    FROM source s
    JOIN (SELECT l.environment_id, l.cluster_type, count(*) AS clusters
          FROM live l GROUP BY l.environment_id, l.cluster_type) n
      ON n.environment_id = s.environment_id
     AND (s.path IS NULL OR n.cluster_type = ANY(s.cluster_types))
    GROUP BY s.scope
),
chain AS MATERIALIZED (
    SELECT s.scope, s.workload, s.environment_id, s.branch_id, s.path, s.cluster_types, c.sha
    FROM source s
    JOIN branch_commit bc ON bc.branch_id = s.branch_id AND bc.mainline
    JOIN git_commit c ON c.id = bc.commit_id
),
fleet_period AS MATERIALIZED (
    SELECT t.object_id, t.cluster_id, t.observed_at, t.received_at, t.applied_sha,
           t.attempted_sha, t.ready, t.removed, t.reason
    FROM status_transition t
    WHERE t.observed_at >= :since AND t.observed_at < :until
),
period AS MATERIALIZED (
    SELECT p.* FROM fleet_period p WHERE p.cluster_id IN (SELECT l.id FROM live l)
),
member AS MATERIALIZED (
    SELECT ch.scope, ch.workload, ch.branch_id, ch.path, o.id AS object_id, o.cluster_id
    FROM (SELECT DISTINCT p.object_id, p.cluster_id FROM period p) p
    JOIN live l ON l.id = p.cluster_id
    JOIN object_state o ON o.id = p.object_id AND o.removed_at IS NULL
    JOIN chain ch ON ch.sha = o.applied_sha
    WHERE CASE WHEN ch.path IS NULL THEN true
               ELSE l.cluster_type = ANY(ch.cluster_types)
                    AND ch.path = folder_path(o.source_path) END
),
recent AS MATERIALIZED (
    SELECT p.object_id, p.observed_at, p.received_at, p.applied_sha, p.attempted_sha, p.ready,
           p.removed, p.reason
    FROM period p WHERE p.object_id IN (SELECT m.object_id FROM member m)
),
seen AS (
    SELECT * FROM recent
    UNION ALL
    SELECT p.*
    FROM (SELECT DISTINCT object_id FROM recent) o
    CROSS JOIN LATERAL (
        SELECT t.object_id, t.observed_at, t.received_at, t.applied_sha, t.attempted_sha,
               t.ready, t.removed, t.reason
        FROM status_transition t
        WHERE t.object_id = o.object_id AND t.observed_at < :since
        ORDER BY t.observed_at DESC, t.received_at DESC
        LIMIT 1
    ) p
),
changed AS (
    SELECT * FROM (
        SELECT s.object_id, s.observed_at, s.received_at, s.applied_sha, s.attempted_sha,
               s.ready, s.removed, s.reason,
               lag(s.applied_sha) OVER by_time AS previous_sha,
               lag(s.ready) OVER by_time AS previous_ready,
               lag(s.removed) OVER by_time AS previous_removed,
               lag(s.observed_at) OVER by_time AS previous_at
        FROM seen s
        WINDOW by_time AS (PARTITION BY s.object_id ORDER BY s.observed_at, s.received_at)
    ) AS t
    WHERE t.observed_at >= :since
      AND (t.previous_at IS NULL
           OR t.applied_sha IS DISTINCT FROM t.previous_sha
           OR t.attempted_sha IS DISTINCT FROM t.previous_sha
           OR t.ready IS FALSE AND NOT t.removed
              AND (t.previous_ready IS NOT FALSE OR t.previous_removed))
)
SELECT m.workload, s.clusters AS scope_clusters, m.branch_id, m.path, c.name AS cluster,
       x.observed_at, x.applied_sha, x.attempted_sha, x.ready, x.removed, x.reason,
       x.previous_sha, x.previous_ready, x.previous_removed
FROM changed x
JOIN member m ON m.object_id = x.object_id
JOIN placed s ON s.scope = m.scope
JOIN cluster c ON c.id = m.cluster_id
WHERE x.previous_at IS NOT NULL
   OR (x.observed_at <= (SELECT min(o.first_seen_at) FROM object_state o
                         WHERE o.cluster_id = m.cluster_id)) IS NOT TRUE
ORDER BY x.observed_at, x.received_at, x.object_id, m.scope
""")

# The workload version each (app branch, folder, commit) carries: the harvested manifests'
# version valid at the commit's place on the branch's first-parent chain.
_VERSIONS = text("""
SELECT x.branch_id, x.path, x.sha, m.workload_version
FROM unnest(CAST(:branch_ids AS integer[]), CAST(:paths AS text[]), CAST(:shas AS text[]))
    AS x(branch_id, path, sha)
JOIN git_commit c ON c.sha = x.sha
JOIN branch_commit bc ON bc.branch_id = x.branch_id AND bc.commit_id = c.id AND bc.mainline
JOIN manifest_revision m
  ON m.branch_id = x.branch_id AND m.path = x.path AND m.workload_version IS NOT NULL
JOIN branch_commit f ON f.branch_id = m.branch_id AND f.commit_id = m.valid_from_commit_id
LEFT JOIN branch_commit u ON u.branch_id = m.branch_id AND u.commit_id = m.valid_until_commit_id
WHERE f.position <= bc.position AND (u.position IS NULL OR bc.position < u.position)
""")

# When each platform commit was made.
_COMMITTED = text("""
SELECT c.sha, min(c.committed_at) AS committed_at
FROM git_commit c WHERE c.sha = ANY(CAST(:shas AS text[]))
GROUP BY c.sha
""")


class Transition(NamedTuple):
    """A row of _TRANSITIONS, in its order."""

    # The scope: None for the platform branch, else the workload.
    workload: str | None
    # How many clusters the scope has: its live clusters that have reported (those of the
    # cluster types that carry a workload).
    scope_clusters: int
    branch_id: int
    # None: the platform branch (any folder).
    path: str | None
    cluster: str
    observed_at: datetime
    applied_sha: str | None
    attempted_sha: str | None
    ready: bool | None
    removed: bool
    reason: str | None
    # The one before it (None: its first).
    previous_sha: str | None
    previous_ready: bool | None
    previous_removed: bool | None


async def transitions(
    session: AsyncSession,
    environment: str,
    workloads: Sequence[str | None],
    since: datetime,
    until: datetime,
) -> list[Transition]:
    """The transitions in [since, until) of the members of these scopes of the environment that
    may apply a change or regress, in time order, each with its scope and member and the
    applied sha and readiness of the one before it."""
    result = await session.execute(
        _TRANSITIONS,
        {
            "environment": environment,
            "workloads": list(workloads),
            "since": since,
            "until": until,
        },
    )
    return [Transition._make(row) for row in result]


async def versions(
    session: AsyncSession, commits: Sequence[tuple[int, str, str]]
) -> dict[tuple[int, str, str], str]:
    """The workload version each (app branch id, folder, commit sha) carries, where one does."""
    if not commits:
        return {}
    branch_ids, paths, shas = zip(*commits, strict=True)
    rows = await session.execute(
        _VERSIONS, {"branch_ids": list(branch_ids), "paths": list(paths), "shas": list(shas)}
    )
    return {(row.branch_id, row.path, row.sha): row.workload_version for row in rows}


async def committed(session: AsyncSession, shas: Sequence[str]) -> dict[str, datetime]:
    if not shas:
        return {}
    rows = await session.execute(_COMMITTED, {"shas": list(shas)})
    return {row.sha: row.committed_at for row in rows}


# --- halts ------------------------------------------------------------------------------------


async def halts(
    session: AsyncSession, *, active: bool | None = None, environment: str | None = None
) -> list[RolloutHalt]:
    """The halts kept, oldest first: those that hold (active), that ended (not active), or
    every one (None)."""
    query = select(RolloutHalt).order_by(RolloutHalt.started_at, RolloutHalt.id)
    if active is not None:
        query = query.where(
            RolloutHalt.ended_at.is_(None) if active else RolloutHalt.ended_at.isnot(None)
        )
    if environment is not None:
        query = query.where(RolloutHalt.environment == environment)
    return list(await session.scalars(query))


async def halt(session: AsyncSession, halt_id: int) -> RolloutHalt | None:
    return await session.get(RolloutHalt, halt_id, with_for_update=True)


async def known(session: AsyncSession) -> set[tuple[str, str | None, str]]:
    """Every target halted once, whether or not its halt still holds."""
    rows = await session.execute(
        select(RolloutHalt.environment, RolloutHalt.workload, RolloutHalt.revision)
    )
    return {(row.environment, row.workload, row.revision) for row in rows}


async def start(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> list[RolloutHalt]:
    """Keep these new halts (RolloutHalt's columns); a target halted once is left alone."""
    if not rows:
        return []
    statement = (
        insert(RolloutHalt)
        .values(list(rows))
        .on_conflict_do_nothing(index_elements=["environment", "workload", "revision"])
        .returning(RolloutHalt)
    )
    return list(await session.scalars(statement))


async def end(session: AsyncSession, halt_id: int, values: dict[str, Any]) -> None:
    """End a halt that holds (ended_at, ended_how and what says how)."""
    await session.execute(
        update(RolloutHalt)
        .where(RolloutHalt.id == halt_id, RolloutHalt.ended_at.is_(None))
        .values(values)
    )


# --- what to roll back to ---------------------------------------------------------------------


async def last_converged(session: AsyncSession, *, before: datetime) -> list[Rollout]:
    """Per environment and workload (None: platform commits), the rollouts that converged
    before `before`, newest commit first."""
    query = (
        select(Rollout)
        .where(Rollout.state == "converged", Rollout.converged_at < before)
        .order_by(
            Rollout.environment_position.asc().nulls_last(),
            Rollout.environment,
            Rollout.workload.asc().nulls_first(),
            Rollout.committed_at.desc(),
            Rollout.started_at.desc(),
        )
    )
    return list(await session.scalars(query))
