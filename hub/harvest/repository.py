"""SQL of the harvester: repositories, branches, commits with ancestry positions, desired-state
ranges and harvest errors. Every write is idempotent (INSERT ... ON CONFLICT) and batched."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, case, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.harvest.ranges import OpenRevision
from hub.models import (
    Assignment,
    AssignmentRevision,
    BranchCommit,
    Environment,
    GitBranch,
    GitCommit,
    HarvestError,
    ManifestRevision,
    Repository,
)

# Advisory lock key held while harvesting ("harvest" in ASCII): one replica at a time.
HARVEST_LOCK = 0x68617276657374
# Rows per INSERT: well under PostgreSQL's 65,535 bind parameters for the widest table.
_BATCH = 1000
AssignmentKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class StoredAssignment:
    """An assignment revision's values; configs compare by hash."""

    namespace: str | None
    config_hash: str | None
    reconciler_kind: str | None
    app_url: str | None
    app_branch: str | None
    app_path: str | None
    workload: str | None = None
    app_pinned_ref: str | None = None
    config: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class StoredManifest:
    workload_version: str | None
    version_source: str | None
    images: tuple[str, ...]
    manifest_digest: str


@dataclass(frozen=True, slots=True)
class BranchState:
    id: int
    head_sha: str | None
    head_position: int | None
    deleted_at: datetime | None


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    commit_sha: str | None
    path: str | None
    message: str


def _batches(rows: Sequence[dict[str, Any]]) -> Iterable[Sequence[dict[str, Any]]]:
    for start in range(0, len(rows), _BATCH):
        yield rows[start : start + _BATCH]


# --- repositories -----------------------------------------------------------------------------


async def upsert_configured(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Repositories from the file or the API: their configuration replaces what was stored."""
    for batch in _batches(rows):
        statement = insert(Repository).values(list(batch))
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[Repository.url],
                set_={
                    "clone_url": statement.excluded.clone_url,
                    "role": statement.excluded.role,
                    "source": statement.excluded.source,
                    "branches": statement.excluded.branches,
                    "credentials": statement.excluded.credentials,
                    "enabled": True,
                },
            )
        )


async def disable_file_repositories(session: AsyncSession, keep: Sequence[str]) -> None:
    """Stop harvesting repositories that were in the file and are not any more."""
    await session.execute(
        update(Repository)
        .where(Repository.source == "file", Repository.url.not_in(keep), Repository.enabled)
        .values(enabled=False)
    )


_DISCOVER = text("""
INSERT INTO repository (url, clone_url, role, source, branches, discovered_from_id)
VALUES (:url, :clone_url, 'app', 'discovered', ARRAY[CAST(:branch AS varchar)], :origin)
ON CONFLICT (url) DO UPDATE
SET branches = array_append(coalesce(repository.branches, '{}'), CAST(:branch AS varchar)),
    discovered_from_id = coalesce(repository.discovered_from_id, excluded.discovered_from_id)
WHERE repository.source = 'discovered'
  AND NOT coalesce(repository.branches, '{}') @> ARRAY[CAST(:branch AS varchar)]
RETURNING id
""")


async def ensure_discovered(
    session: AsyncSession, url: str, clone_url: str, branch: str, origin: int
) -> int:
    """An application repository a reconciler in repository `origin` points at; remembers the
    branches it tracks. A repository that is configured keeps its configuration."""
    found = await session.scalar(
        _DISCOVER, {"url": url, "clone_url": clone_url, "branch": branch, "origin": origin}
    )
    if found is not None:
        return int(found)
    return (await session.execute(select(Repository.id).where(Repository.url == url))).scalar_one()


async def find_repository(session: AsyncSession, url: str) -> Repository | None:
    return (
        await session.execute(select(Repository).where(Repository.url == url))
    ).scalar_one_or_none()


async def get_repository(session: AsyncSession, repository_id: int) -> Repository | None:
    return await session.get(Repository, repository_id)


async def enabled_repositories(session: AsyncSession) -> list[Repository]:
    """Platform repositories first: harvesting them discovers the application repositories."""
    rows = await session.scalars(
        select(Repository)
        .where(Repository.enabled)
        .order_by((Repository.role == "platform").desc(), Repository.id)
    )
    return list(rows)


async def set_fetch_result(
    session: AsyncSession, repository_id: int, *, fetched_at: datetime | None, error: str | None
) -> None:
    values: dict[str, Any] = {"fetch_error": error}
    if fetched_at is not None:
        values["fetched_at"] = fetched_at
    await session.execute(update(Repository).where(Repository.id == repository_id).values(**values))


async def disable_repository(session: AsyncSession, repository_id: int) -> None:
    await session.execute(
        update(Repository)
        .where(Repository.id == repository_id)
        .values(enabled=False, credentials=None, branches=None)
    )


async def environment_ids(session: AsyncSession) -> dict[str, int]:
    rows = await session.execute(select(Environment.name, Environment.id))
    return {name: environment_id for name, environment_id in rows}


# --- branches and commits ---------------------------------------------------------------------


async def ensure_branch(
    session: AsyncSession, repository_id: int, name: str, environment_id: int | None
) -> BranchState:
    statement = insert(GitBranch).values(
        repository_id=repository_id, name=name, environment_id=environment_id
    )
    branch_id = (
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[GitBranch.repository_id, GitBranch.name],
                set_={
                    "environment_id": func.coalesce(
                        statement.excluded.environment_id, GitBranch.environment_id
                    )
                },
            ).returning(GitBranch.id)
        )
    ).scalar_one()
    head = (
        await session.execute(
            select(GitCommit.sha, BranchCommit.position, GitBranch.deleted_at)
            .select_from(GitBranch)
            .outerjoin(GitCommit, GitCommit.id == GitBranch.head_commit_id)
            .outerjoin(
                BranchCommit,
                and_(
                    BranchCommit.branch_id == GitBranch.id,
                    BranchCommit.commit_id == GitBranch.head_commit_id,
                ),
            )
            .where(GitBranch.id == branch_id)
        )
    ).one()
    return BranchState(branch_id, head.sha, head.position, head.deleted_at)


async def live_branches(session: AsyncSession, repository_id: int) -> dict[str, int]:
    rows = await session.execute(
        select(GitBranch.name, GitBranch.id).where(
            GitBranch.repository_id == repository_id, GitBranch.deleted_at.is_(None)
        )
    )
    return {name: branch_id for name, branch_id in rows}


async def set_branch_deleted(session: AsyncSession, branch_id: int, at: datetime) -> None:
    await session.execute(
        update(GitBranch).where(GitBranch.id == branch_id).values(deleted_at=at, changed_at=at)
    )


async def set_branch_head(
    session: AsyncSession, branch_id: int, head_commit_id: int | None, now: datetime
) -> None:
    """The branch read at `now`: at `head_commit_id` (None: where it was), and not deleted.
    Changed then (`changed_at`, what the drift job re-judges by) if it moved or was deleted."""
    values: dict[str, Any] = {
        "harvested_at": now,
        "deleted_at": None,
        "changed_at": case((GitBranch.deleted_at.is_not(None), now), else_=GitBranch.changed_at),
    }
    if head_commit_id is not None:
        values["head_commit_id"] = head_commit_id
        values["changed_at"] = now
    await session.execute(update(GitBranch).where(GitBranch.id == branch_id).values(**values))


async def mainline_positions(session: AsyncSession, branch_id: int) -> dict[str, int]:
    rows = await session.execute(
        select(GitCommit.sha, BranchCommit.position)
        .join(BranchCommit, BranchCommit.commit_id == GitCommit.id)
        .where(BranchCommit.branch_id == branch_id, BranchCommit.mainline)
    )
    return {sha: position for sha, position in rows}


async def commit_ids(
    session: AsyncSession, repository_id: int, shas: Sequence[str]
) -> dict[str, int]:
    rows = await session.execute(
        select(GitCommit.sha, GitCommit.id).where(
            GitCommit.repository_id == repository_id, GitCommit.sha.in_(shas)
        )
    )
    return {sha: commit_id for sha, commit_id in rows}


async def truncate_branch(session: AsyncSession, branch_id: int, after_position: int) -> None:
    """Forget the branch's history after a chain position (its history was rewritten there):
    memberships and the desired-state revisions that began later go, revisions that ended
    later are open again. The commits themselves stay."""
    later = (
        select(BranchCommit.commit_id)
        .where(BranchCommit.branch_id == branch_id, BranchCommit.position > after_position)
        .scalar_subquery()
    )
    of_branch = select(Assignment.id).where(Assignment.branch_id == branch_id).scalar_subquery()
    await session.execute(
        delete(AssignmentRevision).where(
            AssignmentRevision.assignment_id.in_(of_branch),
            AssignmentRevision.valid_from_commit_id.in_(later),
        )
    )
    await session.execute(
        update(AssignmentRevision)
        .where(
            AssignmentRevision.assignment_id.in_(of_branch),
            AssignmentRevision.valid_until_commit_id.in_(later),
        )
        .values(valid_until_commit_id=None)
    )
    await session.execute(
        delete(ManifestRevision).where(
            ManifestRevision.branch_id == branch_id,
            ManifestRevision.valid_from_commit_id.in_(later),
        )
    )
    await session.execute(
        update(ManifestRevision)
        .where(
            ManifestRevision.branch_id == branch_id,
            ManifestRevision.valid_until_commit_id.in_(later),
        )
        .values(valid_until_commit_id=None)
    )
    await session.execute(
        delete(BranchCommit).where(
            BranchCommit.branch_id == branch_id, BranchCommit.position > after_position
        )
    )


async def refresh_reachability(session: AsyncSession, repository_id: int) -> None:
    """A commit is reachable while some branch still on the remote contains it."""
    member = (
        select(BranchCommit.commit_id)
        .join(GitBranch, GitBranch.id == BranchCommit.branch_id)
        .where(BranchCommit.commit_id == GitCommit.id, GitBranch.deleted_at.is_(None))
        .exists()
    )
    await session.execute(
        update(GitCommit)
        .where(
            GitCommit.repository_id == repository_id, GitCommit.reachable.is_distinct_from(member)
        )
        .values(reachable=member)
    )


async def generations_of(
    session: AsyncSession, repository_id: int, shas: Sequence[str]
) -> dict[str, int]:
    rows = await session.execute(
        select(GitCommit.sha, GitCommit.generation).where(
            GitCommit.repository_id == repository_id, GitCommit.sha.in_(shas)
        )
    )
    return {sha: generation for sha, generation in rows}


async def upsert_commits(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Insert commits (already known ones become reachable again); their ids by sha."""
    ids: dict[str, int] = {}
    for batch in _batches(rows):
        statement = insert(GitCommit).values(list(batch))
        upsert = statement.on_conflict_do_update(
            index_elements=[GitCommit.repository_id, GitCommit.sha],
            set_={
                "reachable": True,
                "promoted_commit_sha": func.coalesce(
                    statement.excluded.promoted_commit_sha, GitCommit.promoted_commit_sha
                ),
            },
        ).returning(GitCommit.sha, GitCommit.id)
        ids.update((await session.execute(upsert)).all())
    return ids


async def insert_members(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    for batch in _batches(rows):
        statement = insert(BranchCommit).values(list(batch))
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[BranchCommit.branch_id, BranchCommit.commit_id],
                set_={
                    "position": statement.excluded.position,
                    "mainline": statement.excluded.mainline,
                },
            )
        )


# --- desired state ----------------------------------------------------------------------------


async def open_assignments(
    session: AsyncSession, branch_id: int
) -> dict[AssignmentKey, OpenRevision[StoredAssignment]]:
    rows = await session.execute(
        select(
            Assignment.cluster_type_name,
            Assignment.deployment_target_name,
            AssignmentRevision,
            Repository.url,
        )
        .join(AssignmentRevision, AssignmentRevision.assignment_id == Assignment.id)
        .outerjoin(Repository, Repository.id == AssignmentRevision.app_repository_id)
        .where(
            Assignment.branch_id == branch_id, AssignmentRevision.valid_until_commit_id.is_(None)
        )
    )
    result: dict[AssignmentKey, OpenRevision[StoredAssignment]] = {}
    for cluster_type, target, revision, app_url in rows:
        result[(cluster_type, target)] = OpenRevision(
            revision.id,
            StoredAssignment(
                namespace=revision.namespace,
                config_hash=revision.config_hash,
                reconciler_kind=revision.reconciler_kind,
                app_url=app_url,
                app_branch=revision.app_branch,
                app_path=revision.app_path,
                workload=revision.workload,
                app_pinned_ref=revision.app_pinned_ref,
                config=revision.config,
            ),
        )
    return result


async def ensure_assignments(
    session: AsyncSession,
    repository_id: int,
    branch_id: int,
    environment_id: int | None,
    keys: Iterable[AssignmentKey],
) -> dict[AssignmentKey, int]:
    rows = [
        {
            "repository_id": repository_id,
            "branch_id": branch_id,
            "environment_id": environment_id,
            "cluster_type_name": cluster_type,
            "deployment_target_name": target,
        }
        for cluster_type, target in sorted(set(keys))
    ]
    ids: dict[AssignmentKey, int] = {}
    for batch in _batches(rows):
        statement = insert(Assignment).values(list(batch))
        upsert = statement.on_conflict_do_update(
            index_elements=[
                Assignment.repository_id,
                Assignment.branch_id,
                Assignment.cluster_type_name,
                Assignment.deployment_target_name,
            ],
            set_={"environment_id": statement.excluded.environment_id},
        ).returning(Assignment.cluster_type_name, Assignment.deployment_target_name, Assignment.id)
        for cluster_type, target, assignment_id in await session.execute(upsert):
            ids[(cluster_type, target)] = assignment_id
    return ids


async def insert_assignment_revisions(
    session: AsyncSession, rows: Sequence[dict[str, Any]]
) -> None:
    for batch in _batches(rows):
        await session.execute(insert(AssignmentRevision).values(list(batch)))


async def close_revisions(
    session: AsyncSession,
    model: type[AssignmentRevision] | type[ManifestRevision],
    closed: Sequence[tuple[int, int]],
) -> None:
    """End stored revisions: (revision id, id of the commit it ends at) pairs."""
    if closed:
        await session.execute(
            update(model),
            [{"id": revision, "valid_until_commit_id": until} for revision, until in closed],
        )


async def open_manifests(
    session: AsyncSession, branch_id: int
) -> dict[str, OpenRevision[StoredManifest]]:
    rows = await session.scalars(
        select(ManifestRevision).where(
            ManifestRevision.branch_id == branch_id,
            ManifestRevision.valid_until_commit_id.is_(None),
        )
    )
    return {
        revision.path: OpenRevision(
            revision.id,
            StoredManifest(
                workload_version=revision.workload_version,
                version_source=revision.version_source,
                images=tuple(revision.images),
                manifest_digest=revision.manifest_digest or "",
            ),
        )
        for revision in rows
    }


async def insert_manifest_revisions(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    for batch in _batches(rows):
        await session.execute(insert(ManifestRevision).values(list(batch)))


async def tracked_paths(session: AsyncSession, repository_id: int, branch: str) -> list[str]:
    """Paths of an application repo branch that current platform assignments point at."""
    rows = await session.scalars(
        select(AssignmentRevision.app_path)
        .where(
            AssignmentRevision.app_repository_id == repository_id,
            AssignmentRevision.app_branch == branch,
            AssignmentRevision.valid_until_commit_id.is_(None),
            AssignmentRevision.app_path.is_not(None),
        )
        .distinct()
    )
    return [path for path in rows if path is not None]


# --- errors and status ------------------------------------------------------------------------


async def record_errors(
    session: AsyncSession, repository_id: int, errors: Iterable[ErrorRecord], now: datetime
) -> None:
    unique = {(error.commit_sha, error.path, error.message) for error in errors}
    rows = [
        {
            "repository_id": repository_id,
            "commit_sha": commit_sha,
            "path": path,
            "message": message,
            "occurred_at": now,
            "last_occurred_at": now,
        }
        for commit_sha, path, message in sorted(unique, key=str)
    ]
    for batch in _batches(rows):
        statement = insert(HarvestError).values(list(batch))
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[
                    HarvestError.repository_id,
                    HarvestError.commit_sha,
                    HarvestError.path,
                    HarvestError.message,
                ],
                set_={
                    "last_occurred_at": statement.excluded.last_occurred_at,
                    "occurrences": HarvestError.occurrences + 1,
                },
            )
        )


async def list_repositories(session: AsyncSession) -> list[Repository]:
    return list(await session.scalars(select(Repository).order_by(Repository.url)))


async def branch_statuses(session: AsyncSession) -> list[Row[Any]]:
    counts = (
        select(BranchCommit.branch_id, func.count().label("commits"))
        .group_by(BranchCommit.branch_id)
        .subquery()
    )
    statement = (
        select(
            GitBranch.repository_id,
            GitBranch.name,
            Environment.name.label("environment"),
            GitCommit.sha.label("head_sha"),
            GitCommit.committed_at.label("head_committed_at"),
            GitBranch.harvested_at,
            GitBranch.deleted_at,
            func.coalesce(counts.c.commits, 0).label("commits"),
        )
        .outerjoin(Environment, Environment.id == GitBranch.environment_id)
        .outerjoin(GitCommit, GitCommit.id == GitBranch.head_commit_id)
        .outerjoin(counts, counts.c.branch_id == GitBranch.id)
        .order_by(GitBranch.repository_id, GitBranch.name)
    )
    return list((await session.execute(statement)).all())


async def recent_errors(session: AsyncSession, per_repository: int) -> list[Row[Any]]:
    ranked = select(
        HarvestError,
        func.row_number()
        .over(
            partition_by=HarvestError.repository_id,
            order_by=(HarvestError.last_occurred_at.desc(), HarvestError.id.desc()),
        )
        .label("rank"),
        func.count().over(partition_by=HarvestError.repository_id).label("total"),
    ).subquery()
    statement = (
        select(ranked)
        .where(ranked.c.rank <= per_repository)
        .order_by(ranked.c.repository_id, ranked.c.rank)
    )
    return list((await session.execute(statement)).all())


async def store_size(session: AsyncSession) -> int:
    """Bytes the harvested facts take on disk (tables and their indexes)."""
    tables = (
        "repository",
        "git_branch",
        "git_commit",
        "branch_commit",
        "assignment",
        "assignment_revision",
        "manifest_revision",
        "harvest_error",
    )
    size = await session.scalar(
        text(
            "SELECT sum(pg_total_relation_size(name::regclass)) "
            "FROM unnest(CAST(:names AS text[])) AS name"
        ),
        {"names": list(tables)},
    )
    return int(size or 0)
