"""SQL of the promotion gate: the facts its policy judges, from what ingest and the harvester
stored; read-only. Within the current Ready period, `status_transition` is read back to the
last revision without the target, where the soak's stretch begins.
"""

import functools
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    TextClause,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
    text,
    true,
    tuple_,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from hub.gate.policy import (
    ClusterFacts,
    ClusterState,
    GateOptions,
    PlatformCommit,
    Standing,
    Tally,
    Target,
    rule,
)
from hub.git.ancestry import reaches
from hub.models import (
    Assignment,
    AssignmentRevision,
    BranchCommit,
    GateAnswer,
    GitBranch,
    GitCommit,
    ManifestRevision,
    Repository,
    Rollout,
)
from hub.sorting import Order
from scheduler_core.kube import LabelSelector


@dataclass(frozen=True, slots=True)
class Branch:
    id: int
    repository_id: int
    # Normalised URL of its repository.
    repository_url: str
    name: str
    head_sha: str | None
    harvested_at: datetime | None


@dataclass(frozen=True, slots=True)
class ManifestRange:
    """A version an app-repo path carried, by positions on its branch's first-parent chain:
    from `from_position` until (excluding) `until_position`, or on while that is None."""

    from_position: int
    until_position: int | None
    version: str | None


@dataclass(frozen=True, slots=True)
class WorkloadAssignment:
    """A current assignment of a workload on a cluster type, and the app source it points at."""

    cluster_type: str
    deployment_target: str
    app_repository_id: int | None
    app_url: str | None
    app_branch: str | None
    app_path: str | None
    # The app branch as harvested; None until the harvester has read it.
    app_branch_id: int | None
    app_head_sha: str | None
    app_harvested_at: datetime | None
    # The versions its path carried on the app branch, in order.
    ranges: list[ManifestRange]


# The lookups before the judgement are built once: building a statement with its aliases costs
# about a millisecond, as much as running it.
_APP_REPOSITORY, _APP_BRANCH, _APP_HEAD = (
    aliased(Repository),
    aliased(GitBranch),
    aliased(GitCommit),
)
_HIT, _MEMBER, _START, _END = (aliased(BranchCommit) for _ in range(4))

# A commit by its full sha, or by a prefix (hexadecimal, so a LIKE pattern as it is).
_COMMITS = (
    select(_HIT.branch_id, GitCommit.sha, _MEMBER.branch_id, _MEMBER.position)
    .join(GitCommit, GitCommit.id == _HIT.commit_id)
    .join(_MEMBER, _MEMBER.commit_id == GitCommit.id)
    .where(_HIT.branch_id.in_(bindparam("branches", expanding=True)))
    .order_by(GitCommit.sha, _HIT.branch_id, _MEMBER.branch_id)
)
_COMMIT_IS = _COMMITS.where(GitCommit.sha == bindparam("sha"))
_COMMIT_BEGINS = _COMMITS.where(GitCommit.sha.like(bindparam("pattern")))

_RECENT_CHAIN = (
    select(GitCommit.sha, GitCommit.committed_at, _MEMBER.branch_id, _MEMBER.position)
    .join(_HIT, and_(_HIT.commit_id == GitCommit.id, _HIT.branch_id == bindparam("branch")))
    .join(_MEMBER, _MEMBER.commit_id == GitCommit.id)
    .where(
        GitCommit.id.in_(
            select(BranchCommit.commit_id)
            .where(BranchCommit.branch_id == bindparam("branch"), BranchCommit.mainline)
            .order_by(BranchCommit.position.desc())
            .limit(bindparam("limit"))
        )
    )
    .order_by(_HIT.position.desc(), _MEMBER.branch_id)
)

_RANGES = (
    select(
        func.array_agg(aggregate_order_by(_START.position, _START.position)).label("starts"),
        func.array_agg(aggregate_order_by(_END.position, _START.position)).label("ends"),
        func.array_agg(
            aggregate_order_by(ManifestRevision.workload_version, _START.position)
        ).label("versions"),
    )
    .select_from(ManifestRevision)
    .join(
        _START,
        and_(
            _START.branch_id == ManifestRevision.branch_id,
            _START.commit_id == ManifestRevision.valid_from_commit_id,
        ),
    )
    .outerjoin(
        _END,
        and_(
            _END.branch_id == ManifestRevision.branch_id,
            _END.commit_id == ManifestRevision.valid_until_commit_id,
        ),
    )
    .where(
        ManifestRevision.branch_id == _APP_BRANCH.id,
        ManifestRevision.path == func.coalesce(AssignmentRevision.app_path, ""),
    )
    .lateral()
)

# Kalypso names a deployment target `<workload>-<target>`, and that name is the only tie
# between an assignment folder and its workload that the platform repository holds.
_WORKLOAD_ASSIGNMENTS = (
    select(
        Assignment.cluster_type_name,
        Assignment.deployment_target_name,
        AssignmentRevision.app_repository_id,
        _APP_REPOSITORY.url,
        AssignmentRevision.app_branch,
        AssignmentRevision.app_path,
        _APP_BRANCH.id,
        _APP_HEAD.sha,
        _APP_BRANCH.harvested_at,
        _RANGES.c.starts,
        _RANGES.c.ends,
        _RANGES.c.versions,
    )
    .join(AssignmentRevision, AssignmentRevision.assignment_id == Assignment.id)
    .outerjoin(_APP_REPOSITORY, _APP_REPOSITORY.id == AssignmentRevision.app_repository_id)
    .outerjoin(
        _APP_BRANCH,
        and_(
            _APP_BRANCH.repository_id == AssignmentRevision.app_repository_id,
            _APP_BRANCH.name == AssignmentRevision.app_branch,
            _APP_BRANCH.deleted_at.is_(None),
        ),
    )
    .outerjoin(_APP_HEAD, _APP_HEAD.id == _APP_BRANCH.head_commit_id)
    .outerjoin(_RANGES, true())
    .where(
        Assignment.branch_id.in_(bindparam("branches", expanding=True)),
        func.starts_with(Assignment.deployment_target_name, bindparam("prefix")),
        AssignmentRevision.valid_until_commit_id.is_(None),
    )
    .order_by(Assignment.cluster_type_name, Assignment.deployment_target_name)
)

# Where a commit stands: (branch id, position) on each branch of its repository it is reachable
# from; a mainline commit at a position at or after it on that branch descends from it.
Memberships = list[tuple[int, int]]


async def branch_commits(
    session: AsyncSession, branch_ids: Sequence[int], sha: str
) -> list[tuple[int, str, Memberships]]:
    """(branch id, full sha, where it stands) of the members of those branches whose sha is
    or begins `sha` (hexadecimal), by sha."""
    if len(sha) in (40, 64):
        rows = await session.execute(_COMMIT_IS, {"branches": list(branch_ids), "sha": sha})
    else:
        rows = await session.execute(
            _COMMIT_BEGINS, {"branches": list(branch_ids), "pattern": f"{sha}%"}
        )
    found: dict[tuple[int, str], Memberships] = {}
    for branch_id, full, on, position in rows:
        found.setdefault((branch_id, full), []).append((on, position))
    return [(branch_id, full, where) for (branch_id, full), where in found.items()]


async def recent_chain(
    session: AsyncSession, branch_id: int, limit: int
) -> list[tuple[str, datetime, Memberships]]:
    """The newest `limit` commits of the branch's first-parent chain, newest first, with
    where each stands."""
    found: dict[str, tuple[datetime, Memberships]] = {}
    rows = await session.execute(_RECENT_CHAIN, {"branch": branch_id, "limit": limit})
    for sha, committed_at, on, position in rows:
        found.setdefault(sha, (committed_at, []))[1].append((on, position))
    return [(sha, committed_at, where) for sha, (committed_at, where) in found.items()]


async def workload_assignments(
    session: AsyncSession, branch_ids: Sequence[int], workload: str
) -> list[WorkloadAssignment]:
    """The workload's assignments at the head of those platform branches, each with the
    versions its app path carried."""
    rows = await session.execute(
        _WORKLOAD_ASSIGNMENTS, {"branches": list(branch_ids), "prefix": f"{workload}-"}
    )
    return [
        WorkloadAssignment(
            row.cluster_type_name,
            row.deployment_target_name,
            row.app_repository_id,
            row.url,
            row.app_branch,
            row.app_path,
            row.id,
            row.sha,
            row.harvested_at,
            _ranges(row.starts or [], row.ends or [], row.versions or []),
        )
        for row in rows
    ]


def _ranges(
    starts: list[int], ends: list[int | None], versions: list[str | None]
) -> list[ManifestRange]:
    return [ManifestRange(*carried) for carried in zip(starts, ends, versions, strict=True)]


def _on_chain_at_or_after(commit: str) -> str:
    """SQL: the commit whose id is `commit` lies on the first-parent chain of a `starts` branch
    of the source `s` at or after the position given there."""
    return f"""COALESCE((
            SELECT bool_or(st.position <= m.position)
            FROM branch_commit m
            JOIN jsonb_to_recordset(s.starts) AS st (branch int, position int)
              ON st.branch = m.branch_id
            WHERE m.commit_id = {commit} AND m.mainline), false)"""  # noqa: S608 - constants


def _placed(commit: str) -> str:
    """SQL: the commit whose id is `commit` lies on the first-parent chain of a `chain` branch
    of the source `s` (of any branch when that is null): its position answers for it."""
    return f"""COALESCE((
            SELECT true FROM branch_commit m
            WHERE m.commit_id = {commit} AND m.mainline
              AND (s.chain IS NULL OR m.branch_id = ANY(s.chain)) LIMIT 1), false)"""  # noqa: S608


def _contains(commit: str) -> str:
    """SQL: the harvested commit whose id is `commit` contains the target of the source `s`. It
    is the target, a chain commit of a `starts` branch at or after the target, or descends from
    one in the harvested commit graph (a side of a merge, a commit a force-push rewrote away).
    Commits on the first-parent chain of the `chain` branches (every branch when null) are
    placed by their positions (hub/git/ancestry.py), with two index lookups; the graph is walked
    only from the others."""
    walked = reaches(
        commit,
        repository="s.repository",
        floor="s.floor",
        settled=_placed("walk.id"),
        found=f"walk.sha = s.sha OR {_on_chain_at_or_after('walk.id')}",
    )
    return f"({_on_chain_at_or_after(commit)} OR (NOT {_placed(commit)} AND {walked}))"


# Objects Ready since ready_since and running what contains the target since applied_since,
# later, and less than the soak ago: only their soak's stretch is read back (_STRETCH).
_MOVED = """compared.contains AND k.ready AND k.applied_since > k.ready_since
              AND k.applied_since > :soaked_before"""


# The soak's stretch, for the objects _MOVED names: when other revisions ran between ready_since
# and applied_since, it starts just after the last of them that did not contain the target,
# else at ready_since. Moving on to a descendant does not restart it. Any other object's starts
# at applied_since: one that has run what it runs for the soak already is soaked either way,
# and is not read back. Looked up under the CASE, for those objects alone, not joined to every
# candidate. Its transitions are walked back from applied_since, newest first, as far as the
# first without the target: most often the one just before, never further than ready_since.
# A statement that names status_transition costs that table's planning, and on TimescaleDB
# every chunk's, though most answers read none of it: the judgement first runs without the
# read-back (_NOT_READ_BACK), and again with it only when it finds such an object.
_STRETCH = f"""COALESCE(CASE WHEN {_MOVED} THEN COALESCE((
               SELECT (SELECT min(n.observed_at) FROM status_transition n
                       WHERE n.object_id = k.id AND n.observed_at > r.observed_at)
               FROM src s
               CROSS JOIN LATERAL (
                   SELECT b.observed_at FROM status_transition b
                   -- The commit it ran, in the source's repository.
                   LEFT JOIN LATERAL (
                       SELECT g.id FROM git_commit g
                       WHERE g.repository_id = s.repository AND g.sha = b.applied_sha LIMIT 1
                   ) AS g ON true
                   WHERE b.object_id = k.id AND b.observed_at >= k.ready_since
                     AND b.observed_at < k.applied_since
                     AND b.applied_sha IS DISTINCT FROM k.applied_sha
                     AND NOT COALESCE(g.id IS NOT NULL AND {_contains("g.id")}, false)
                   ORDER BY b.observed_at DESC LIMIT 1
               ) AS r
               WHERE s.source = k.source), k.ready_since) END, k.applied_since)"""  # noqa: S608

# The judgement without the read-back: every stretch taken to start at applied_since, and
# `moved` true when an object needs it read back, so that its answer stands only when false.
_NOT_READ_BACK = {
    "contains_since": "k.applied_since",
    "moved": f"""EXISTS (
           SELECT FROM tracked k
           JOIN compared ON compared.source = k.source
            AND compared.applied_sha = k.applied_sha AND compared.attempted_sha = k.attempted_sha
           WHERE {_MOVED})""",
}
_READ_BACK = {"contains_since": _STRETCH, "moved": "false"}


# Judges every expected cluster of the environment, the registered ones placed by
# :placements, against the target's sources, and returns the tally and the listed clusters.
#
# :sources (JSON): per source the normalised path its objects must deploy (null: any), and how a
# commit of its repository is compared with the target. A commit contains the target when it is
# `sha`, lies on the first-parent chain of a `starts` branch at or after the position given, or
# descends from such a commit (_contains: placed by the `chain` branches, or by every branch
# when `chain` is null). It is unknown only when the harvester has not seen it. It is the target
# attempted when it is `sha`, or lies on a `carries` branch within [from, until). :placements
# (JSON): which source each cluster type follows (cluster type null: every one, and the clusters
# placed in none). :spelled_*: per source each URL spelling and ref its objects follow.
#
# The candidates of a cluster are, per placement of its cluster type, its live objects that
# apply the source's revisions (source_url and url_ref, which for a Flux object is its source
# object's), or none. Each is measured against `now` into the six values of the policy's
# Standing, coded as a number (standing_code()), whose state's rank :ranks holds: the rules
# stay the policy's. A cluster is judged by its candidate furthest from compliance (then by
# the latest soak end, as the policy lists them; then the first placement, then the object
# seen first). Only ids and what the rank needs travel through the judgement: names are read
# for the listed clusters alone. Without a narrowing (:narrowed false) every cluster is asked
# about, and no cluster's labels are read.
_JUDGE = f"""
WITH src AS MATERIALIZED (
    SELECT s.*, LEAST(
        (SELECT g.generation FROM git_commit g
         WHERE g.repository_id = s.repository AND g.sha = s.sha),
        (SELECT min(g.generation)
         FROM jsonb_to_recordset(s.starts) AS st (branch int, position int)
         CROSS JOIN LATERAL (
             SELECT m.commit_id FROM branch_commit m
             WHERE m.branch_id = st.branch AND m.position = st.position AND m.mainline LIMIT 1
         ) AS m
         JOIN git_commit g ON g.id = m.commit_id)) AS floor
    FROM jsonb_to_recordset(CAST(:sources AS jsonb)) AS s (
        source int, path text, repository int, chain int[], starts jsonb, carries jsonb,
        sha text)
),
rules AS MATERIALIZED (
    SELECT CAST(:ranks AS int[]) AS ranks
),
-- Placements by cluster type id, 0 standing for none: one of every cluster type serves as a
-- placement on every one, so that the expected clusters meet them in a hash join.
place AS MATERIALIZED (
    SELECT p.place, k.cluster_type, p.source
    FROM jsonb_to_recordset(CAST(:placements AS jsonb))
        AS p (place int, cluster_type text, source int)
    CROSS JOIN LATERAL (
        SELECT t.id FROM cluster_type t
        WHERE p.cluster_type IS NULL OR t.name = p.cluster_type
        UNION ALL
        SELECT 0 WHERE p.cluster_type IS NULL
    ) AS k (cluster_type)
),
-- `asked`: the cluster is of one of the :cluster_types named (none: any) and its labels meet
-- every requirement of :selector (JSON, as scheduler_core.kube.LabelSelectorRequirement). The
-- clusters not asked about are left out once judged (`judged`), so that the planner's guess at
-- how many are asked about never changes how the statement judges.
expected AS (
    SELECT c.id, c.name, COALESCE(c.cluster_type_id, 0) AS cluster_type, c.last_seen_at,
           CASE WHEN :narrowed THEN
               (CAST(:cluster_types AS text[]) IS NULL OR c.cluster_type_id IN (
                   SELECT t.id FROM cluster_type t
                   WHERE t.environment_id = :environment AND t.name = ANY(:cluster_types)))
               AND NOT EXISTS (
                   SELECT FROM jsonb_to_recordset(CAST(:selector AS jsonb))
                       AS r (key text, operator text, "values" text[])
                   WHERE NOT CASE r.operator
                       WHEN 'In' THEN COALESCE(c.labels ->> r.key = ANY(r."values"), false)
                       WHEN 'NotIn' THEN COALESCE(c.labels ->> r.key <> ALL(r."values"), true)
                       WHEN 'Exists' THEN c.labels ->> r.key IS NOT NULL
                       ELSE c.labels ->> r.key IS NULL END)
           ELSE true END AS asked
    FROM cluster c
    WHERE c.environment_id = :environment AND c.decommissioned_at IS NULL
),
-- Walked from the sources' URL spellings and refs (ix_object_state_source, which carries every
-- column read here: an index-only scan, not a heap page per object): walked from the expected
-- clusters, the statement would read all their objects. A branch is an environment's, so what
-- is found is almost only theirs; `candidate` keeps only theirs.
-- A path is compared as hub.harvest.platform.normalise_path reads it: no empty or '.' parts;
-- any path when the source names none (CASE: `IS NULL OR` would have the planner guess that
-- almost no object passes, and join what follows by nested loops).
tracked AS MATERIALIZED (
    SELECT s.source, o.id, o.cluster_id,
           -- Told apart as `compared` needs: a commit, '' for nothing applied, '?' for a
           -- revision that names no commit (never a sha, which is hexadecimal).
           COALESCE(o.applied_sha, CASE WHEN COALESCE(o.applied_revision, '') = '' THEN ''
                                        ELSE '?' END) AS applied_sha,
           COALESCE(o.attempted_sha, '') AS attempted_sha, o.ready, o.applied_since,
           o.ready_since
    FROM object_state o
    JOIN unnest(CAST(:spelled_sources AS int[]), CAST(:spelled_urls AS text[]),
                CAST(:spelled_refs AS text[])) AS p (source, url, ref)
      ON p.url = o.source_url AND p.ref = o.url_ref
    JOIN src s ON s.source = p.source
    WHERE o.source_url = ANY(:urls) AND o.url_ref = ANY(:refs) AND o.removed_at IS NULL
      AND CASE WHEN s.path IS NULL OR o.source_path IN (s.path, './' || s.path) THEN true
               ELSE s.path = array_to_string(array_remove(array_remove(
                   string_to_array(COALESCE(o.source_path, ''), '/'), ''), '.'), '/') END
),
-- The pairs of what objects applied and attempted, a few: each compared with the target once.
compared AS MATERIALIZED (
    SELECT p.source, p.applied_sha, p.attempted_sha,
           CASE p.applied_sha WHEN '' THEN false WHEN '?' THEN NULL
                ELSE CASE WHEN g.id IS NOT NULL THEN {_contains("g.id")} END END AS contains,
           COALESCE(NOT g.reachable, false) AS rewritten,
           COALESCE(p.attempted_sha = s.sha, false) OR EXISTS (
               SELECT FROM branch_commit bc
               JOIN jsonb_to_recordset(s.carries) AS ca (branch int, "from" int, until int)
                 ON ca.branch = bc.branch_id AND ca."from" <= bc.position
                AND (ca.until IS NULL OR bc.position < ca.until)
               WHERE bc.commit_id = a.id AND bc.mainline) AS attempted
    FROM (SELECT DISTINCT source, applied_sha, attempted_sha FROM tracked) AS p
    JOIN src s USING (source)
    LEFT JOIN LATERAL (
        SELECT g.id, g.reachable FROM git_commit g
        WHERE g.repository_id = s.repository AND g.sha = p.applied_sha LIMIT 1
    ) AS g ON true
    LEFT JOIN LATERAL (
        SELECT g.id FROM git_commit g
        WHERE g.repository_id = s.repository AND g.sha = p.attempted_sha LIMIT 1
    ) AS a ON true
),
candidate AS (
    SELECT k.cluster_id, k.cluster, k.cluster_type, k.last_seen_at, k.asked, k.place,
           k.id, k.ready,
           CASE WHEN k.ready THEN k.ready_since END AS ready_since,
           {{contains_since}} AS contains_since,
           CASE WHEN k.id IS NULL THEN false ELSE compared.contains END AS contains,
           COALESCE(compared.rewritten, false) AS rewritten,
           COALESCE(compared.attempted, false) AS attempted
    -- The expected clusters meet their objects first (OFFSET 0: before the commits compared):
    -- the planner, which cannot tell how many objects `tracked` holds, would otherwise join
    -- them to each lookup of `compared` first and hash the thousands of them once per lookup.
    FROM (
        SELECT e.id AS cluster_id, e.name AS cluster, e.cluster_type, e.last_seen_at, e.asked,
               p.place, k.source, k.id, k.applied_sha, k.attempted_sha, k.ready,
               k.applied_since, k.ready_since
        FROM expected e
        JOIN place p ON p.cluster_type = e.cluster_type
        LEFT JOIN tracked k ON k.cluster_id = e.id AND k.source = p.source
        OFFSET 0
    ) AS k
    LEFT JOIN compared ON compared.source = k.source AND compared.applied_sha = k.applied_sha
      AND compared.attempted_sha = k.attempted_sha
    -- OFFSET 0: the stretch's lookup is planned and run once, not again where the rank reads it.
    OFFSET 0
),
ranked AS (
    SELECT r.*,
           CASE WHEN r.rank >= :on_track THEN GREATEST(r.ready_since, r.contains_since)
               + make_interval(secs => :soak_seconds)
           END AS soak_end
    -- OFFSET 0: the rank is computed once per candidate, not again wherever it is used.
    FROM (
        SELECT c.*, (SELECT ranks FROM rules)[1
            + c.attempted::int
            + 2 * CASE c.ready WHEN false THEN 0 WHEN true THEN 1 ELSE 2 END
            + 6 * (c.last_seen_at IS NOT NULL)::int
            + 12 * COALESCE(c.last_seen_at < :stale_before, false)::int
            + 24 * CASE c.contains WHEN false THEN 0 WHEN true THEN 1 ELSE 2 END
            + 72 * COALESCE(c.ready_since IS NOT NULL
                            AND GREATEST(c.ready_since, c.contains_since) <= :soaked_before,
                            false)::int
        ] AS rank
        FROM candidate c
        OFFSET 0
    ) AS r
),
every_judged AS MATERIALIZED (
    SELECT DISTINCT ON (r.cluster_id) r.*
    FROM ranked r
    ORDER BY r.cluster_id, r.rank, COALESCE(r.soak_end, :now) DESC, r.place,
             r.id
),
judged AS NOT MATERIALIZED (
    SELECT * FROM every_judged WHERE asked
),
-- Counted by rank first: a hash aggregate of a few counts, not a count per state per cluster.
by_rank AS (
    SELECT rank, count(*) AS clusters,
           count(*) FILTER (WHERE last_seen_at IS NULL) AS never_reported,
           count(*) FILTER (WHERE last_seen_at < :stale_before) AS stale,
           max(soak_end) AS last_soak_end, min(last_seen_at) AS oldest_report_at
    FROM judged
    GROUP BY rank
),
tally AS (
    SELECT a.*, q.silent, q.silent_count
    FROM (
        SELECT ARRAY[{
    ", ".join(
        f"COALESCE(max(clusters) FILTER (WHERE rank = {rank}), 0)"
        for rank in range(len(ClusterState))
    )
}] AS by_rank,
               CAST(COALESCE(sum(never_reported), 0) AS bigint) AS never_reported,
               CAST(COALESCE(sum(stale), 0) AS bigint) AS stale,
               max(last_soak_end) AS last_soak_end, min(oldest_report_at) AS oldest_report_at
        FROM by_rank
    ) AS a
    -- Those whose newest report goes stale before the last soak end, the first :leading by it.
    CROSS JOIN LATERAL (
        SELECT (array_agg(cluster ORDER BY last_seen_at, cluster COLLATE "C"))[:(:leading)]
                   AS silent,
               count(*) AS silent_count
        FROM judged
        WHERE last_seen_at < a.last_soak_end - make_interval(secs => :stale_seconds)
    ) AS q
),
-- The first :leading furthest from compliance (`lead`: the reasons name them), and those of
-- the page in the order asked for (`position`), each cluster once.
{{listed}}
SELECT t.by_rank, t.never_reported, t.stale, t.last_soak_end, t.oldest_report_at, t.silent,
       t.silent_count, {{moved}} AS moved, l.leads AS lead, l.placed AS position, l.cluster,
       ct.name AS cluster_type, l.last_seen_at, o.reconciler, o.kind, o.namespace, o.name,
       o.applied_revision, l.contains, l.rewritten, l.contains_since, o.attempted_revision,
       l.attempted, l.ready, l.ready_since, o.reason, o.message
FROM tally t
LEFT JOIN listed l ON true
LEFT JOIN cluster_type ct ON ct.id = l.cluster_type
LEFT JOIN object_state o ON o.id = l.id
ORDER BY l.leads NULLS LAST, l.placed
"""  # noqa: S608 - composed from constants, never from input

# The columns a gate sorts its listed clusters by, each as what it orders `judged` (j) by.
# Ties, and no column, keep the gate's own order: furthest from compliance first, then name.
CLUSTER_SORTS = {
    "cluster": ('j.cluster COLLATE "C"',),
    "type": ('(SELECT name FROM cluster_type WHERE id = j.cluster_type) COLLATE "C"',),
    "state": ("j.rank",),
    "last_report": ("j.last_seen_at",),
    "soak_ends": ("j.soak_end",),
}


# `listed` in the gate's own order: the leading clusters and the page's, by one partial sort.
_LISTED_IN_OWN_ORDER = """(
    SELECT j.*, CASE WHEN j.n <= :leading THEN j.n END AS leads,
           CASE WHEN j.n > :offset AND j.n <= :offset + :limit THEN j.n END AS placed
    FROM (
        SELECT j.*, row_number() OVER (ORDER BY j.rank, j.cluster COLLATE "C") AS n
        FROM (SELECT * FROM judged ORDER BY rank, cluster COLLATE "C"
              LIMIT GREATEST(:leading, :offset + :limit)) AS j
    ) AS j
    WHERE j.n <= :leading OR j.n > :offset
)"""

# `listed` in another order: a partial sort of no more than the leading clusters, another of no
# more than the page's; a cluster that is both is listed once.
_LISTED = """(
    SELECT DISTINCT ON (b.cluster_id) b.*,
           max(b.lead) OVER (PARTITION BY b.cluster_id) AS leads,
           max(b.position) OVER (PARTITION BY b.cluster_id) AS placed
    FROM (
        SELECT j.*, row_number() OVER (ORDER BY j.rank, j.cluster COLLATE "C") AS lead,
               CAST(NULL AS bigint) AS position
        FROM (SELECT * FROM judged ORDER BY rank, cluster COLLATE "C" LIMIT :leading) AS j
        UNION ALL
        SELECT * FROM (
            SELECT j.*, CAST(NULL AS bigint), row_number() OVER (ORDER BY {order}) AS position
            FROM (SELECT * FROM judged AS j ORDER BY {order} LIMIT :offset + :limit) AS j
        ) AS p
        WHERE p.position > :offset
    ) AS b
)"""


@functools.lru_cache(maxsize=(len(CLUSTER_SORTS) * 2 + 1) * 2)
def _judge(order: Order, *, read_back: bool) -> TextClause:
    """The judgement with its page in `order`, with the soak's read-back or without it; built
    once each, as finding the bound parameters in a statement this long costs a third of a
    millisecond."""
    if order.column is None:
        listed = _LISTED_IN_OWN_ORDER
    else:
        direction = "DESC" if order.descending else "ASC"
        keys = [f"{key} {direction} NULLS LAST" for key in CLUSTER_SORTS[order.column]]
        keys += ["j.rank", 'j.cluster COLLATE "C"']
        listed = _LISTED.replace("{order}", ", ".join(keys))
    statement = _JUDGE.replace("{listed}", f"listed AS {listed}")
    for name, sql in (_READ_BACK if read_back else _NOT_READ_BACK).items():
        statement = statement.replace(f"{{{name}}}", sql)
    return text(statement)


# Every URL spelling of live objects, by a walk of ix_object_state_source that jumps from one
# spelling to the next: a probe per spelling (a few dozen) instead of a pass over every object.
_SPELLING_WALK = """
WITH RECURSIVE spelling (url) AS (
    (SELECT source_url FROM object_state
     WHERE removed_at IS NULL AND source_url IS NOT NULL ORDER BY source_url LIMIT 1)
    UNION ALL
    SELECT (SELECT o.source_url FROM object_state o
            WHERE o.removed_at IS NULL AND o.source_url > spelling.url
            ORDER BY o.source_url LIMIT 1)
    FROM spelling WHERE spelling.url IS NOT NULL
)"""
_SPELLINGS = text(f"{_SPELLING_WALK}\nSELECT url FROM spelling WHERE url IS NOT NULL")


def _refs(branch: str) -> list[str]:
    return [branch, f"refs/heads/{branch}"]


async def source_spellings(session: AsyncSession) -> list[str]:
    """Every repository URL, as reported, that a live object or its Flux source names.

    Agents report URLs in any form; the caller picks the spellings of the repository it wants,
    which keeps URL normalisation in one place (hub/git/urls.py).
    """
    return list(await session.scalars(_SPELLINGS))


# What every gate answer needs before it judges, in one round trip: the environment, the live
# branches of platform repositories that stand for it, and the reported URL spellings. The
# judgements that follow in the transaction are planned for their own values (plan_cache_mode):
# a plan prepared for any values, as psycopg's prepared statements come to use, guesses at every
# size and commit the JSON parameters carry. Set here, it costs no round trip of its own.
_SCOPE = text(f"""{_SPELLING_WALK},
reported AS MATERIALIZED (
    SELECT COALESCE(array_agg(url ORDER BY url), '{{}}') AS urls,
           set_config('plan_cache_mode', 'force_custom_plan', true) AS planned
    FROM spelling WHERE url IS NOT NULL
)
SELECT e.id AS environment_id, (SELECT urls FROM reported) AS spellings, b.id,
       b.repository_id, r.url, b.name, h.sha, b.harvested_at
FROM environment e
LEFT JOIN (git_branch b JOIN repository r ON r.id = b.repository_id AND r.role = 'platform')
  ON b.environment_id = e.id AND b.deleted_at IS NULL
LEFT JOIN git_commit h ON h.id = b.head_commit_id
WHERE e.name = :name
ORDER BY r.url, b.name
""")  # noqa: S608 - composed from constants, never from input


@dataclass(frozen=True, slots=True)
class Scope:
    environment_id: int
    # Live branches of platform repositories that stand for the environment.
    branches: list[Branch]
    # Every repository URL, as reported, that a live object names (source_spellings).
    spellings: list[str]


async def scope(session: AsyncSession, environment: str) -> Scope | None:
    """The environment's scope; None when no environment has that name. Judgements in the
    same transaction are planned for their own values from then on."""
    rows = (await session.execute(_SCOPE, {"name": environment})).all()
    if not rows:
        return None
    branches = [Branch(*row[2:]) for row in rows if row.id is not None]
    return Scope(rows[0].environment_id, branches, list(rows[0].spellings))


def standing_code(standing: Standing) -> int:
    """The number _JUDGE computes for a candidate of that standing."""
    three = {False: 0, True: 1, None: 2}
    return (
        int(standing.attempted_target)
        + 2 * three[standing.ready]
        + 6 * int(standing.reported)
        + 12 * int(standing.stale)
        + 24 * three[standing.contains_target]
        + 72 * int(standing.soaked)
    )


@functools.lru_cache(maxsize=64)
def _ranks(options: GateOptions) -> tuple[int, ...]:
    """Per standing code, the rank (place in ClusterState) of the policy's state for it; kept
    per options, as every answer asks for them."""
    order = list(ClusterState)
    ranks = [0] * 144
    both, three = (False, True), (False, True, None)
    for values in itertools.product(both, three, both, both, three, both):
        standing = Standing(*values)
        ranks[standing_code(standing)] = order.index(rule(standing, options))
    return tuple(ranks)


@dataclass(frozen=True, slots=True)
class Source:
    """What a target's objects follow, and how the commits they applied compare with it.

    A commit contains the target when it lies on the first-parent chain of a `starts` branch
    at or after the position given with it; whether it does is unknown when it lies on none
    of the `chain` branches (None: on no branch of the repository). It is the target attempted
    when it is `sha`, or lies on a `carries` branch within [from, until) (until None: on).
    """

    urls: Sequence[str]
    branch: str
    # Normalised; None: any path.
    path: str | None
    repository_id: int
    chain: Sequence[int] | None
    starts: Sequence[tuple[int, int]]
    carries: Sequence[tuple[int, int, int | None]] = ()
    sha: str | None = None


@dataclass(frozen=True, slots=True)
class Narrowing:
    """Which of the expected clusters the caller asks about: those of the cluster types named
    (none named: every one) whose labels the selector selects."""

    cluster_types: Sequence[str] = ()
    selector: LabelSelector = field(default_factory=LabelSelector)


@dataclass(frozen=True, slots=True)
class ListedCluster:
    """An expected cluster on the list, with the candidate it is judged by."""

    # Its place among those furthest from compliance, when among the first `leading`.
    lead: int | None
    # Its place in the order asked for, when on the page.
    position: int | None
    facts: ClusterFacts
    # <reconciler>/<kind>/<namespace>/<name>; None: it has no object that follows the source.
    object: str | None


@dataclass(frozen=True, slots=True)
class Judgement:
    tally: Tally
    # The first `leading` furthest from compliance first, then the page's others.
    listed: list[ListedCluster]


async def judge(
    session: AsyncSession,
    *,
    scope: Scope,
    sources: Sequence[Source],
    placements: Sequence[tuple[str | None, int | None]],
    narrowing: Narrowing,
    options: GateOptions,
    now: datetime,
    leading: int,
    order: Order,
    limit: int,
    offset: int,
) -> Judgement:
    """Judge the expected clusters of the scope's environment (read in this transaction),
    those its cluster types are placed on, each by the objects that follow the sources it is
    placed on: `placements` pairs a cluster type (None: every one, and clusters in none) with
    an index into `sources` (None: nothing to follow), and `narrowing` narrows them. Lists the
    first `leading` clusters furthest from compliance and those of the page in `order`."""
    state_of = list(ClusterState)
    spelled = [
        (index, url, ref)
        for index, source in enumerate(sources)
        for url in source.urls
        for ref in _refs(source.branch)
    ]
    values = {
        "environment": scope.environment_id,
        "narrowed": bool(narrowing.cluster_types or narrowing.selector.match_expressions),
        "cluster_types": list(narrowing.cluster_types) or None,
        "selector": json.dumps(
            [
                requirement.model_dump(mode="json")
                for requirement in narrowing.selector.match_expressions
            ]
        ),
        "sources": json.dumps(
            [
                {
                    "source": index,
                    "path": source.path,
                    "repository": source.repository_id,
                    "chain": None if source.chain is None else list(source.chain),
                    "starts": [
                        {"branch": branch, "position": position}
                        for branch, position in source.starts
                    ],
                    "carries": [
                        {"branch": branch, "from": start, "until": until}
                        for branch, start, until in source.carries
                    ],
                    "sha": source.sha,
                }
                for index, source in enumerate(sources)
            ]
        ),
        "placements": json.dumps(
            [
                {"place": index, "cluster_type": cluster_type, "source": source}
                for index, (cluster_type, source) in enumerate(placements)
            ]
        ),
        # Each (source, URL spelling, ref) it follows, and every source's URLs and refs
        # for the index walk: the planner knows nothing of the JSON.
        "spelled_sources": [spelling[0] for spelling in spelled],
        "spelled_urls": [spelling[1] for spelling in spelled],
        "spelled_refs": [spelling[2] for spelling in spelled],
        "urls": sorted({url for source in sources for url in source.urls}),
        "refs": sorted({ref for source in sources for ref in _refs(source.branch)}),
        "ranks": list(_ranks(options)),
        "on_track": state_of.index(ClusterState.SOAKING),
        "soak_seconds": options.soak.total_seconds(),
        "now": now,
        "stale_before": now - options.stale_after,
        "stale_seconds": options.stale_after.total_seconds(),
        "soaked_before": now - options.soak,
        "leading": leading,
        "limit": limit,
        "offset": offset,
    }
    rows = (await session.execute(_judge(order, read_back=False), values)).all()
    if rows[0].moved:
        rows = (await session.execute(_judge(order, read_back=True), values)).all()
    first = rows[0]
    tally = Tally(
        by_state=dict(zip(state_of, first.by_rank, strict=True)),
        never_reported=first.never_reported,
        stale=first.stale,
        oldest_report_at=first.oldest_report_at,
        last_soak_end=first.last_soak_end,
        silent_before_soak_end=tuple(first.silent or ()),
        silent_before_soak_end_count=first.silent_count,
    )
    listed = [
        ListedCluster(
            row.lead,
            row.position,
            ClusterFacts(
                name=row.cluster,
                cluster_type=row.cluster_type,
                last_seen_at=row.last_seen_at,
                applied_revision=row.applied_revision,
                contains_target=row.contains,
                applied_rewritten=row.rewritten,
                contains_since=row.contains_since,
                attempted_revision=row.attempted_revision,
                attempted_target=row.attempted,
                ready=row.ready,
                ready_since=row.ready_since,
                reason=row.reason,
                message=row.message,
            ),
            None
            if row.reconciler is None
            else f"{row.reconciler}/{row.kind}/{row.namespace}/{row.name}",
        )
        for row in rows
        if row.cluster is not None
    ]
    return Judgement(tally, listed)


# --- the kept answers (gate_answer, migration 0027) --------------------------------------------


# Held while the answers are judged and written ("gates" in ASCII): one replica at a time.
ANSWERS_LOCK = 0x6761746573

_WORKLOADS = text("""
SELECT DISTINCT v.workload
FROM desired_version v
JOIN environment e ON e.id = v.environment_id
WHERE e.name = :environment
ORDER BY v.workload
""")


async def rollout_committed_at(session: AsyncSession, target: Target) -> datetime | None:
    """The target's commit time as its rollout in the environment records it (`rollout`, kept
    by the rollouts job); None before a cluster applied it."""
    if isinstance(target, PlatformCommit):
        workload, revision = None, target.sha
    else:
        workload, revision = target.workload, target.version
    committed: datetime | None = await session.scalar(
        select(Rollout.committed_at)
        .where(
            Rollout.environment == target.environment,
            Rollout.workload.is_not_distinct_from(workload),
            Rollout.revision == revision,
        )
        .order_by(Rollout.started_at.desc())
        .limit(1)
    )
    return committed


async def harvested_committed_at(
    session: AsyncSession, sources: Sequence[Source]
) -> datetime | None:
    """The target's commit time as harvested: the platform commit's (a source's `sha`), or
    the earliest of the app commits that first carried the version (where the sources
    start); None when no source names one."""
    shas = [(source.repository_id, source.sha) for source in sources if source.sha is not None]
    if shas:
        committed: datetime | None = await session.scalar(
            select(func.min(GitCommit.committed_at)).where(
                tuple_(GitCommit.repository_id, GitCommit.sha).in_(shas)
            )
        )
        return committed
    starts = [start for source in sources for start in source.starts]
    if not starts:
        return None
    committed = await session.scalar(
        select(func.min(GitCommit.committed_at))
        .join(BranchCommit, BranchCommit.commit_id == GitCommit.id)
        .where(
            BranchCommit.mainline,
            tuple_(BranchCommit.branch_id, BranchCommit.position).in_(starts),
        )
    )
    return committed


async def assigned_workloads(session: AsyncSession, environment: str) -> list[str]:
    """The workloads assigned in the environment, at the head of its platform branches."""
    return list(await session.scalars(_WORKLOADS, {"environment": environment}))


async def kept_verdicts(session: AsyncSession) -> dict[tuple[str, str | None, str], str]:
    """The kept answers' verdicts by environment, workload (None: a platform commit) and
    revision."""
    rows = await session.execute(
        select(GateAnswer.environment, GateAnswer.workload, GateAnswer.revision, GateAnswer.verdict)
    )
    return {
        (environment, workload, revision): verdict
        for environment, workload, revision, verdict in rows
    }


async def replace_answers(session: AsyncSession, answers: Sequence[dict[str, Any]]) -> None:
    """The kept answers become `answers` (GateAnswer's columns), all at once for readers."""
    await session.execute(delete(GateAnswer))
    if answers:
        await session.execute(insert(GateAnswer), list(answers))
    await session.flush()
