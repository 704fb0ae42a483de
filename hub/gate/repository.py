"""SQL of the promotion gate: the facts its policy judges, read from what ingest and the
harvester stored. Nothing here writes; the gate runs on a read-only session.

Observed state comes from `object_state` (the current state per cluster object) and
`status_transition` (when the current applied revision and the current Ready period began);
desired state and ancestry from the harvester's branches, commits, assignment and manifest
ranges.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

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
    # the agent observed them); the object's last change when the history no longer says.
    applied_since: datetime
    ready_since: datetime


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


# Live objects of the given clusters with the source each follows. A Flux Kustomization or
# HelmRelease names its source object in source_ref; that object's ref (the branch) and,
# failing its own, its URL stand in. Source objects are looked for among the given clusters'
# only, as the join implies: the planner would otherwise read every cluster's.
_TRACKING = """
tracking AS (
    SELECT o.id, o.cluster_id, o.reconciler, o.kind, o.namespace, o.name,
           COALESCE(o.source_url, s.source_url) AS source_url,
           COALESCE(s.source_ref, o.source_ref) AS source_ref,
           o.source_path, o.applied_revision, o.applied_sha, o.attempted_revision,
           o.attempted_sha, o.ready, o.reason, o.message, o.changed_at
    FROM object_state o
    LEFT JOIN object_state s
      ON o.reconciler = 'flux' AND s.cluster_id = o.cluster_id AND s.reconciler = 'flux'
     AND s.cluster_id = ANY(:clusters)
     AND s.removed_at IS NULL AND o.source_ref = s.kind || '/' || s.namespace || '/' || s.name
    WHERE o.cluster_id = ANY(:clusters) AND o.removed_at IS NULL
      AND NOT (o.reconciler = 'flux' AND o.kind = ANY(:source_kinds))
)"""

_SPELLINGS = text(f"""
WITH {_TRACKING}
SELECT DISTINCT source_url FROM tracking
WHERE source_ref = ANY(:refs) AND source_url IS NOT NULL
""")  # noqa: S608 - composed from constants, never from input

# A run ends at a transition that removed the object or changed what the run is about; the
# current run starts with the first transition after the newest such end; bounding observed_at
# (as the row comparison implies) starts the index scan there, not at the object's first
# transition of all.
_TRACKED = text(f"""
WITH {_TRACKING}
SELECT tr.id, tr.cluster_id, tr.reconciler, tr.kind, tr.namespace, tr.name, tr.source_url,
       tr.source_ref, tr.source_path, tr.applied_revision, tr.applied_sha,
       tr.attempted_revision, tr.attempted_sha, tr.ready, tr.reason, tr.message,
       COALESCE(applied.since, tr.changed_at) AS applied_since,
       COALESCE(ready.since, tr.changed_at) AS ready_since
FROM tracking tr
LEFT JOIN LATERAL (
    SELECT b.observed_at, b.received_at FROM status_transition b
    WHERE b.object_id = tr.id
      AND (b.removed OR b.applied_revision IS DISTINCT FROM tr.applied_revision)
    ORDER BY b.observed_at DESC, b.received_at DESC LIMIT 1
) applied_end ON true
LEFT JOIN LATERAL (
    SELECT min(t.observed_at) AS since FROM status_transition t
    WHERE t.object_id = tr.id
      AND t.observed_at >= COALESCE(applied_end.observed_at, '-infinity')
      AND (applied_end.observed_at IS NULL
           OR (t.observed_at, t.received_at) > (applied_end.observed_at, applied_end.received_at))
) applied ON true
LEFT JOIN LATERAL (
    SELECT b.observed_at, b.received_at FROM status_transition b
    WHERE b.object_id = tr.id AND (b.removed OR b.ready IS NOT TRUE)
    ORDER BY b.observed_at DESC, b.received_at DESC LIMIT 1
) ready_end ON true
LEFT JOIN LATERAL (
    SELECT min(t.observed_at) AS since FROM status_transition t
    WHERE t.object_id = tr.id
      AND t.observed_at >= COALESCE(ready_end.observed_at, '-infinity')
      AND (ready_end.observed_at IS NULL
           OR (t.observed_at, t.received_at) > (ready_end.observed_at, ready_end.received_at))
) ready ON true
WHERE tr.source_ref = ANY(:refs) AND tr.source_url = ANY(:urls)
ORDER BY tr.cluster_id, tr.reconciler, tr.kind, tr.namespace, tr.name
""")  # noqa: S608 - composed from constants, never from input


def _refs(branch: str) -> list[str]:
    return [branch, f"refs/heads/{branch}"]


async def source_spellings(
    session: AsyncSession, cluster_ids: Sequence[int], branch: str
) -> list[str]:
    """Every repository URL, as reported, that objects of those clusters follow on `branch`.

    Agents report URLs in any form; the caller picks the spellings of the repository it wants,
    which keeps URL normalisation in one place (hub/harvest/urls.py).
    """
    rows = await session.scalars(
        _SPELLINGS,
        {
            "clusters": list(cluster_ids),
            "source_kinds": list(FLUX_SOURCE_KINDS),
            "refs": _refs(branch),
        },
    )
    return list(rows)


async def tracking_objects(
    session: AsyncSession, cluster_ids: Sequence[int], branch: str, urls: Sequence[str]
) -> list[TrackedObject]:
    """Live objects of those clusters that follow one of `urls` on `branch`."""
    if not cluster_ids or not urls:
        return []
    rows = await session.execute(
        _TRACKED,
        {
            "clusters": list(cluster_ids),
            "source_kinds": list(FLUX_SOURCE_KINDS),
            "refs": _refs(branch),
            "urls": list(urls),
        },
    )
    return [TrackedObject(**row) for row in rows.mappings()]
