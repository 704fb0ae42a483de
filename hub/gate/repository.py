"""SQL of the promotion gate: the facts its policy judges, read from what ingest and the
harvester stored. Nothing here writes; the gate runs on a read-only session.

Observed state comes from `object_state`: the current state per cluster object, with when
its current applied revision and its current Ready period began (kept by ingest);
desired state and ancestry from the harvester's branches, commits, assignment and manifest
ranges.
"""

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from hub.gate.policy import ClusterFacts, ClusterState, GateOptions, Standing, Tally, rule
from hub.models import (
    Assignment,
    AssignmentRevision,
    BranchCommit,
    Environment,
    GitBranch,
    GitCommit,
    ManifestRevision,
    Repository,
)


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


@dataclass(frozen=True, slots=True)
class ManifestRange:
    """A version an app-repo path carried, by positions on its branch's first-parent chain:
    from `from_position` until (excluding) `until_position`, or on while that is None."""

    from_position: int
    until_position: int | None
    version: str | None


async def environment_id(session: AsyncSession, name: str) -> int | None:
    found: int | None = await session.scalar(select(Environment.id).where(Environment.name == name))
    return found


async def environment_names(session: AsyncSession) -> list[str]:
    rows = await session.scalars(
        select(Environment.name).order_by(Environment.position.asc().nulls_last(), Environment.name)
    )
    return list(rows)


async def platform_branches(session: AsyncSession, environment: int) -> list[Branch]:
    """The live branches of platform repositories that stand for the environment."""
    statement = (
        select(
            GitBranch.id,
            GitBranch.repository_id,
            Repository.url,
            GitBranch.name,
            GitCommit.sha,
            GitBranch.harvested_at,
        )
        .join(Repository, Repository.id == GitBranch.repository_id)
        .outerjoin(GitCommit, GitCommit.id == GitBranch.head_commit_id)
        .where(
            Repository.role == "platform",
            GitBranch.environment_id == environment,
            GitBranch.deleted_at.is_(None),
        )
        .order_by(Repository.url, GitBranch.name)
    )
    return [Branch(*row) for row in await session.execute(statement)]


async def branch_commits(
    session: AsyncSession, branch_ids: Sequence[int], sha: str
) -> list[tuple[int, str]]:
    """(branch id, full sha) of the members of those branches whose sha is or begins `sha`."""
    matches = GitCommit.sha == sha if len(sha) in (40, 64) else GitCommit.sha.startswith(sha)
    statement = (
        select(BranchCommit.branch_id, GitCommit.sha)
        .join(GitCommit, GitCommit.id == BranchCommit.commit_id)
        .where(BranchCommit.branch_id.in_(branch_ids), matches)
        .order_by(GitCommit.sha)
    )
    return [(branch_id, full) for branch_id, full in await session.execute(statement)]


async def recent_chain(
    session: AsyncSession, branch_id: int, limit: int
) -> list[tuple[str, datetime]]:
    """The newest `limit` commits of the branch's first-parent chain, newest first."""
    statement = (
        select(GitCommit.sha, GitCommit.committed_at)
        .join(BranchCommit, BranchCommit.commit_id == GitCommit.id)
        .where(BranchCommit.branch_id == branch_id, BranchCommit.mainline)
        .order_by(BranchCommit.position.desc())
        .limit(limit)
    )
    return [(sha, committed_at) for sha, committed_at in await session.execute(statement)]


async def workload_assignments(
    session: AsyncSession, branch_ids: Sequence[int], workload: str
) -> list[WorkloadAssignment]:
    """The workload's assignments at the head of those platform branches.

    Kalypso names a deployment target `<workload>-<target>`, and that name is the only tie
    between an assignment folder and its workload that the platform repository holds.
    """
    app_repository = aliased(Repository)
    app_branch = aliased(GitBranch)
    app_head = aliased(GitCommit)
    statement = (
        select(
            Assignment.cluster_type_name,
            Assignment.deployment_target_name,
            AssignmentRevision.app_repository_id,
            app_repository.url,
            AssignmentRevision.app_branch,
            AssignmentRevision.app_path,
            app_branch.id,
            app_head.sha,
            app_branch.harvested_at,
        )
        .join(AssignmentRevision, AssignmentRevision.assignment_id == Assignment.id)
        .outerjoin(app_repository, app_repository.id == AssignmentRevision.app_repository_id)
        .outerjoin(
            app_branch,
            and_(
                app_branch.repository_id == AssignmentRevision.app_repository_id,
                app_branch.name == AssignmentRevision.app_branch,
                app_branch.deleted_at.is_(None),
            ),
        )
        .outerjoin(app_head, app_head.id == app_branch.head_commit_id)
        .where(
            Assignment.branch_id.in_(branch_ids),
            Assignment.deployment_target_name.startswith(f"{workload}-", autoescape=True),
            AssignmentRevision.valid_until_commit_id.is_(None),
        )
        .order_by(Assignment.cluster_type_name, Assignment.deployment_target_name)
    )
    return [WorkloadAssignment(*row) for row in await session.execute(statement)]


async def manifest_ranges(session: AsyncSession, branch_id: int, path: str) -> list[ManifestRange]:
    start, end = aliased(BranchCommit), aliased(BranchCommit)
    statement = (
        select(start.position, end.position, ManifestRevision.workload_version)
        .join(
            start,
            and_(
                start.branch_id == ManifestRevision.branch_id,
                start.commit_id == ManifestRevision.valid_from_commit_id,
            ),
        )
        .outerjoin(
            end,
            and_(
                end.branch_id == ManifestRevision.branch_id,
                end.commit_id == ManifestRevision.valid_until_commit_id,
            ),
        )
        .where(ManifestRevision.branch_id == branch_id, ManifestRevision.path == path)
        .order_by(start.position)
    )
    return [ManifestRange(*row) for row in await session.execute(statement)]


async def memberships(session: AsyncSession, repository_id: int, sha: str) -> list[tuple[int, int]]:
    """(branch id, position) of the commit on each branch of the repository it is reachable
    from: a mainline commit at a position at or after it on that branch descends from it."""
    statement = (
        select(BranchCommit.branch_id, BranchCommit.position)
        .join(GitCommit, GitCommit.id == BranchCommit.commit_id)
        .where(GitCommit.repository_id == repository_id, GitCommit.sha == sha)
        .order_by(BranchCommit.branch_id)
    )
    return [(branch_id, position) for branch_id, position in await session.execute(statement)]


# Judges every expected cluster of the environment (with :cluster_types, of those placed in
# one of them) against the target's sources, and returns the tally and the listed clusters.
#
# :sources (JSON): per source the normalised path its objects must deploy (null: any), and
# how a commit of its repository is compared with the target: a commit contains the target
# when it lies on the first-parent chain of one of the `starts` branches at or after the
# position given there (unknown when it lies on none of the `chain` branches, or on no branch
# of the repository when `chain` is null); it is the target attempted when it is `sha`, or
# lies on a `carries` branch within [from, until).
# :placements (JSON): which source each cluster type follows (cluster type null: every one).
# :spelled_*: per source each URL spelling and ref its objects follow.
#
# The candidates of a cluster are, per placement of its cluster type, its live objects that
# apply the source's revisions (source_url and url_ref, which for a Flux object is its source
# object's), or none. Each is measured against `now` into the six values of the policy's
# Standing, coded as a number (standing_code()), whose state's rank :ranks holds: the rules
# stay the policy's. A cluster is judged by its candidate furthest from compliance (then by
# the latest soak end, as the policy lists them).
_JUDGE = text(f"""
WITH src AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(CAST(:sources AS jsonb)) AS s (
        source int, path text, repository int, chain int[], starts jsonb, carries jsonb,
        sha text)
),
rules AS MATERIALIZED (
    SELECT CAST(:ranks AS int[]) AS ranks
),
place AS MATERIALIZED (
    SELECT p.place, p.cluster_type IS NULL AS every, t.id AS cluster_type_id, p.source
    FROM jsonb_to_recordset(CAST(:placements AS jsonb))
        AS p (place int, cluster_type text, source int)
    LEFT JOIN cluster_type t ON t.name = p.cluster_type
),
expected AS MATERIALIZED (
    SELECT c.id, c.name, c.cluster_type_id, c.last_seen_at
    FROM cluster c
    WHERE c.environment_id = :environment AND c.decommissioned_at IS NULL
      AND (CAST(:cluster_types AS text[]) IS NULL OR c.cluster_type_id IN (
               SELECT id FROM cluster_type WHERE name = ANY(:cluster_types)))
),
-- Walked from the sources' URL spellings and refs (ix_object_state_source): walked from the
-- expected clusters, the statement would read all their objects. A branch is an
-- environment's, so what is found is almost only theirs; `candidate` keeps only theirs.
-- A path is compared as hub.harvest.platform.normalise_path reads it: no empty or '.' parts;
-- any path when the source names none (CASE: `IS NULL OR` would have the planner guess that
-- almost no object passes, and join what follows by nested loops).
tracked AS MATERIALIZED (
    SELECT s.source, o.id, o.cluster_id, o.reconciler, o.kind, o.namespace, o.name,
           o.applied_sha, COALESCE(o.applied_revision, '') = '' AS applied_nothing,
           o.attempted_sha = s.sha AS attempted_target, o.attempted_sha, o.ready,
           o.applied_since, o.ready_since
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
commits AS (
    SELECT source, applied_sha AS sha FROM tracked WHERE applied_sha IS NOT NULL
    UNION
    SELECT source, attempted_sha FROM tracked WHERE attempted_sha IS NOT NULL
),
compared AS (
    SELECT c.source, c.sha,
           bool_or(EXISTS (
               SELECT FROM jsonb_to_recordset(s.starts) AS st (branch int, position int)
               WHERE st.branch = bc.branch_id AND st.position <= bc.position)) AS contains,
           bool_or(EXISTS (
               SELECT FROM jsonb_to_recordset(s.carries) AS ca (branch int, "from" int, until int)
               WHERE ca.branch = bc.branch_id AND ca."from" <= bc.position
                 AND (ca.until IS NULL OR bc.position < ca.until))) AS carries
    FROM commits c
    JOIN src s USING (source)
    JOIN git_commit g ON g.repository_id = s.repository AND g.sha = c.sha
    JOIN branch_commit bc ON bc.commit_id = g.id AND bc.mainline
    WHERE s.chain IS NULL OR bc.branch_id = ANY(s.chain)
    GROUP BY c.source, c.sha
),
candidate AS (
    SELECT e.id AS cluster_id, e.name AS cluster, e.last_seen_at, p.place, k.id, k.reconciler,
           k.kind, k.namespace, k.name, k.ready,
           k.applied_since, CASE WHEN k.ready THEN k.ready_since END AS ready_since,
           CASE WHEN k.applied_sha IS NOT NULL THEN applied.contains
                WHEN k.applied_nothing IS NOT FALSE THEN false END AS contains,
           COALESCE(k.attempted_target, false) OR COALESCE(attempted.carries, false)
               AS attempted
    FROM expected e
    JOIN place p ON p.every OR p.cluster_type_id = e.cluster_type_id
    LEFT JOIN tracked k ON k.cluster_id = e.id AND k.source = p.source
    LEFT JOIN compared applied ON applied.source = k.source AND applied.sha = k.applied_sha
    LEFT JOIN compared attempted
      ON attempted.source = k.source AND attempted.sha = k.attempted_sha
),
ranked AS (
    SELECT c.*, r.rank,
           CASE WHEN r.rank >= :on_track THEN GREATEST(c.ready_since, c.applied_since)
               + make_interval(secs => :soak_seconds)
           END AS soak_end
    FROM candidate c
    -- OFFSET 0: the rank is computed once per candidate, not again wherever it is used.
    CROSS JOIN LATERAL (SELECT (SELECT ranks FROM rules)[1
        + c.attempted::int
        + 2 * CASE c.ready WHEN false THEN 0 WHEN true THEN 1 ELSE 2 END
        + 6 * (c.last_seen_at IS NOT NULL)::int
        + 12 * COALESCE(c.last_seen_at < :stale_before, false)::int
        + 24 * CASE c.contains WHEN false THEN 0 WHEN true THEN 1 ELSE 2 END
        + 72 * COALESCE(c.ready_since IS NOT NULL
                        AND GREATEST(c.ready_since, c.applied_since) <= :soaked_before,
                        false)::int
    ] AS rank OFFSET 0) AS r
),
judged AS MATERIALIZED (
    SELECT DISTINCT ON (r.cluster_id) r.*
    FROM ranked r
    ORDER BY r.cluster_id, r.rank, COALESCE(r.soak_end, :now) DESC, r.place,
             r.reconciler, r.kind, r.namespace, r.name
),
tally AS (
    SELECT a.*, o.last_seen_at AS oldest_report_at, o.cluster AS oldest_report_cluster
    FROM (
        SELECT ARRAY[{
    ", ".join(f"count(*) FILTER (WHERE rank = {rank})" for rank in range(len(ClusterState)))
}] AS by_rank,
               count(*) FILTER (WHERE last_seen_at IS NULL) AS never_reported,
               count(*) FILTER (WHERE last_seen_at < :stale_before) AS stale,
               max(soak_end) AS last_soak_end, min(last_seen_at) AS oldest
        FROM judged
    ) AS a
    LEFT JOIN LATERAL (
        SELECT last_seen_at, cluster FROM judged WHERE last_seen_at = a.oldest
        ORDER BY cluster COLLATE "C" LIMIT 1
    ) AS o ON true
),
-- The first :leading and those of the page, by a partial sort of no more than those.
listed AS (
    SELECT j.*, row_number() OVER (ORDER BY j.rank, j.cluster COLLATE "C") AS position
    FROM (
        SELECT * FROM judged ORDER BY rank, cluster COLLATE "C"
        LIMIT GREATEST(:leading, :offset + :limit)
    ) AS j
)
SELECT t.by_rank, t.never_reported, t.stale, t.last_soak_end, t.oldest_report_at,
       t.oldest_report_cluster, l.position, l.cluster, ct.name AS cluster_type, l.last_seen_at,
       o.reconciler, o.kind, o.namespace, o.name, o.applied_revision, l.contains,
       l.applied_since, o.attempted_revision, l.attempted, l.ready, l.ready_since, o.reason,
       o.message
FROM tally t
LEFT JOIN listed l ON l.position <= :leading OR l.position > :offset
LEFT JOIN cluster c ON c.id = l.cluster_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
LEFT JOIN object_state o ON o.id = l.id
ORDER BY l.position
""")  # noqa: S608 - composed from constants, never from input


# Every URL spelling of live objects, by a walk of ix_object_state_source that jumps from one
# spelling to the next: a probe per spelling (a few dozen) instead of a pass over every object.
_SPELLINGS = text("""
WITH RECURSIVE spelling (url) AS (
    (SELECT source_url FROM object_state
     WHERE removed_at IS NULL AND source_url IS NOT NULL ORDER BY source_url LIMIT 1)
    UNION ALL
    SELECT (SELECT o.source_url FROM object_state o
            WHERE o.removed_at IS NULL AND o.source_url > spelling.url
            ORDER BY o.source_url LIMIT 1)
    FROM spelling WHERE spelling.url IS NOT NULL
)
SELECT url FROM spelling WHERE url IS NOT NULL
""")


def _refs(branch: str) -> list[str]:
    return [branch, f"refs/heads/{branch}"]


async def source_spellings(session: AsyncSession) -> list[str]:
    """Every repository URL, as reported, that a live object or its Flux source names.

    Agents report URLs in any form; the caller picks the spellings of the repository it wants,
    which keeps URL normalisation in one place (hub/harvest/urls.py).
    """
    return list(await session.scalars(_SPELLINGS))


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


def _ranks(options: GateOptions) -> list[int]:
    """Per standing code, the rank (place in ClusterState) of the policy's state for it."""
    order = list(ClusterState)
    ranks = [0] * 144
    both, three = (False, True), (False, True, None)
    for values in itertools.product(both, three, both, both, three, both):
        standing = Standing(*values)
        ranks[standing_code(standing)] = order.index(rule(standing, options))
    return ranks


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
class ListedCluster:
    """An expected cluster on the list, with the candidate it is judged by."""

    position: int
    facts: ClusterFacts
    # <reconciler>/<kind>/<namespace>/<name>; None: it has no object that follows the source.
    object: str | None


@dataclass(frozen=True, slots=True)
class Judgement:
    tally: Tally
    # In listing order: the first `leading`, and those of the page.
    listed: list[ListedCluster]


async def judge(
    session: AsyncSession,
    *,
    environment: int,
    cluster_types: Sequence[str] | None,
    sources: Sequence[Source],
    placements: Sequence[tuple[str | None, int | None]],
    options: GateOptions,
    now: datetime,
    leading: int,
    limit: int,
    offset: int,
) -> Judgement:
    """Judge the environment's expected clusters (with `cluster_types`, those placed in one
    of them), each by the objects that follow the sources its cluster type is placed on:
    `placements` pairs a cluster type (None: every one) with an index into `sources` (None:
    nothing to follow). Lists the first `leading` clusters and those of the page."""
    state_of = list(ClusterState)
    spelled = [
        (index, url, ref)
        for index, source in enumerate(sources)
        for url in source.urls
        for ref in _refs(source.branch)
    ]
    rows = (
        await session.execute(
            _JUDGE,
            {
                "environment": environment,
                "cluster_types": None if cluster_types is None else list(cluster_types),
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
                "ranks": _ranks(options),
                "on_track": state_of.index(ClusterState.SOAKING),
                "soak_seconds": options.soak.total_seconds(),
                "now": now,
                "stale_before": now - options.stale_after,
                "soaked_before": now - options.soak,
                "leading": leading,
                "limit": limit,
                "offset": offset,
            },
        )
    ).all()
    first = rows[0]
    tally = Tally(
        by_state=dict(zip(state_of, first.by_rank, strict=True)),
        never_reported=first.never_reported,
        stale=first.stale,
        oldest_report=None
        if first.oldest_report_at is None
        else (first.oldest_report_at, first.oldest_report_cluster),
        last_soak_end=first.last_soak_end,
    )
    listed = [
        ListedCluster(
            row.position,
            ClusterFacts(
                name=row.cluster,
                cluster_type=row.cluster_type,
                last_seen_at=row.last_seen_at,
                applied_revision=row.applied_revision,
                contains_target=row.contains,
                applied_since=row.applied_since,
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
        if row.position is not None
    ]
    return Judgement(tally, listed)
