"""SQL of the promotion gate: the facts its policy judges, read from what ingest and the
harvester stored. Nothing here writes; the gate runs on a read-only session.

Observed state comes from `object_state`: the current state per cluster object, with when
its current applied revision and its current Ready period began (kept by ingest);
desired state and ancestry from the harvester's branches, commits, assignment and manifest
ranges.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import and_, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from hub.models import (
    Assignment,
    AssignmentRevision,
    BranchCommit,
    Cluster,
    ClusterType,
    Environment,
    GitBranch,
    GitCommit,
    ManifestRevision,
    Repository,
)

# Flux source objects fetch a revision and never apply one (agent/sources/flux.py): they say
# where a Kustomization's revisions come from, they are not what a cluster runs.
FLUX_SOURCE_KINDS = ("GitRepository", "OCIRepository", "Bucket", "HelmRepository", "HelmChart")


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
class ExpectedCluster:
    id: int
    name: str
    cluster_type: str | None
    last_seen_at: datetime | None


@dataclass(frozen=True, slots=True)
class TrackedObject:
    """A reconciler object of a cluster, with the source it follows.

    For a Flux object that names its source object (`GitRepository/<namespace>/<name>`), the
    URL and ref are that source object's: the branch lives there.
    """

    id: int
    cluster_id: int
    reconciler: str
    kind: str
    namespace: str
    name: str
    source_url: str
    source_ref: str
    source_path: str | None
    applied_revision: str | None
    applied_sha: str | None
    attempted_revision: str | None
    attempted_sha: str | None
    ready: bool | None
    reason: str | None
    message: str | None
    # Start of the current run of the applied revision, and of the current Ready period (as
    # the agent observed them; None when not Ready).
    applied_since: datetime
    ready_since: datetime | None


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


async def expected_clusters(
    session: AsyncSession, environment: int, cluster_types: Sequence[str] | None = None
) -> list[ExpectedCluster]:
    """Registered clusters of the environment that are not decommissioned; with
    `cluster_types`, only those placed in one of them."""
    statement = (
        select(Cluster.id, Cluster.name, ClusterType.name, Cluster.last_seen_at)
        .outerjoin(ClusterType, ClusterType.id == Cluster.cluster_type_id)
        .where(Cluster.environment_id == environment, Cluster.decommissioned_at.is_(None))
        .order_by(Cluster.name)
    )
    if cluster_types is not None:
        statement = statement.where(ClusterType.name.in_(cluster_types))
    return [ExpectedCluster(*row) for row in await session.execute(statement)]


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


async def chain_positions(
    session: AsyncSession, branch_id: int, shas: Sequence[str]
) -> dict[str, int]:
    """Positions of those commits that lie on the branch's first-parent chain."""
    statement = (
        select(GitCommit.sha, BranchCommit.position)
        .join(BranchCommit, BranchCommit.commit_id == GitCommit.id)
        .where(
            BranchCommit.branch_id == branch_id,
            BranchCommit.mainline,
            GitCommit.sha.in_(shas),
        )
    )
    return {sha: position for sha, position in await session.execute(statement)}


# Live objects of the expected clusters (those of an environment, or of some of its cluster
# types, as expected_clusters finds them) that follow one of the URL spellings on one of the
# refs: those that name the repository and branch themselves (an Argo CD Application), and
# the Flux objects (Kustomization, HelmRelease) that name a Flux source object which does,
# through ix_object_state_followers; the source object's URL and ref stand in for theirs.
# Both walk indexes from the source's URL and ref, so the cost follows the objects found, not
# the clusters' objects of all.
_TRACKED = text("""
WITH named AS MATERIALIZED (
    SELECT s.* FROM object_state s
    WHERE s.source_url = ANY(:urls) AND s.source_ref = ANY(:refs) AND s.removed_at IS NULL
),
source AS MATERIALIZED (
    SELECT n.* FROM named n
    JOIN cluster c ON c.id = n.cluster_id
    LEFT JOIN cluster_type t ON t.id = c.cluster_type_id
    WHERE c.environment_id = :environment AND c.decommissioned_at IS NULL
      AND (CAST(:cluster_types AS text[]) IS NULL OR t.name = ANY(:cluster_types))
)
SELECT o.id, o.cluster_id, o.reconciler, o.kind, o.namespace, o.name, o.source_url,
       o.source_ref, o.source_path, o.applied_revision, o.applied_sha, o.attempted_revision,
       o.attempted_sha, o.ready, o.reason, o.message, o.applied_since, o.ready_since
FROM source o
WHERE NOT (o.reconciler = 'flux' AND o.kind = ANY(:source_kinds))
UNION ALL
SELECT o.id, o.cluster_id, o.reconciler, o.kind, o.namespace, o.name, s.source_url,
       s.source_ref, o.source_path, o.applied_revision, o.applied_sha, o.attempted_revision,
       o.attempted_sha, o.ready, o.reason, o.message, o.applied_since, o.ready_since
FROM source s
JOIN object_state o
  ON o.cluster_id = s.cluster_id AND o.reconciler = 'flux' AND o.removed_at IS NULL
 AND o.source_ref = s.kind || '/' || s.namespace || '/' || s.name
WHERE s.reconciler = 'flux' AND s.kind = ANY(:source_kinds)
  AND NOT (o.kind = ANY(:source_kinds))
ORDER BY cluster_id, reconciler, kind, namespace, name
""")

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


async def tracking_objects(
    session: AsyncSession,
    environment: int,
    cluster_types: Sequence[str] | None,
    branch: str,
    urls: Sequence[str],
) -> list[TrackedObject]:
    """Live objects of the environment's expected clusters (with `cluster_types`, of those
    placed in one of them) that follow one of `urls` on `branch`."""
    if not urls:
        return []
    rows = await session.execute(
        _TRACKED,
        {
            "environment": environment,
            "cluster_types": None if cluster_types is None else list(cluster_types),
            "source_kinds": list(FLUX_SOURCE_KINDS),
            "refs": _refs(branch),
            "urls": list(urls),
        },
    )
    # Positionally: the statement's columns are the dataclass's fields, in order.
    return [TrackedObject(*cast(tuple[Any, ...], row)) for row in rows]
