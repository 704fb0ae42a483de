"""Reading what the harvester left in the store, as a query or a dashboard would."""

from dataclasses import dataclass
from typing import Any

from sqlalchemy import RowMapping, select
from sqlalchemy.ext.asyncio import AsyncSession

from hub.git.urls import normalise_repository_url
from hub.models import (
    Assignment,
    AssignmentRevision,
    BranchCommit,
    GitBranch,
    GitCommit,
    HarvestError,
    ManifestRevision,
    Repository,
)


@dataclass
class HarvestedRepo:
    session: AsyncSession
    url: str

    async def id(self) -> int:
        found = await self.session.scalar(
            select(Repository.id).where(Repository.url == normalise_repository_url(self.url))
        )
        assert found is not None, f"{self.url} is not in the store"
        return found

    async def commits(self) -> dict[str, RowMapping]:
        rows = await self.session.execute(
            select(GitCommit.__table__).where(GitCommit.repository_id == await self.id())
        )
        return {row["sha"]: row for row in rows.mappings()}

    async def branch(self, name: str) -> RowMapping:
        statement = (
            select(GitBranch.__table__, GitCommit.sha.label("head_sha"))
            .outerjoin(GitCommit, GitCommit.id == GitBranch.head_commit_id)
            .where(GitBranch.repository_id == await self.id(), GitBranch.name == name)
        )
        return (await self.session.execute(statement)).mappings().one()

    async def members(self, branch: str) -> dict[str, tuple[int, bool]]:
        """sha -> (position, mainline)."""
        statement = (
            select(GitCommit.sha, BranchCommit.position, BranchCommit.mainline)
            .join(BranchCommit, BranchCommit.commit_id == GitCommit.id)
            .join(GitBranch, GitBranch.id == BranchCommit.branch_id)
            .where(GitBranch.repository_id == await self.id(), GitBranch.name == branch)
        )
        rows = await self.session.execute(statement)
        return {sha: (position, mainline) for sha, position, mainline in rows}

    async def is_ancestor(self, ancestor: str, descendant: str) -> bool | None:
        """Read off the index as the promotion gate reads it: the ancestor is a member of a
        branch at or before the descendant's position on that branch's first-parent chain;
        None when the descendant lies on no harvested chain."""
        statement = (
            select(
                GitCommit.sha, BranchCommit.branch_id, BranchCommit.position, BranchCommit.mainline
            )
            .join(BranchCommit, BranchCommit.commit_id == GitCommit.id)
            .where(
                GitCommit.repository_id == await self.id(),
                GitCommit.sha.in_([ancestor, descendant]),
            )
        )
        rows = (await self.session.execute(statement)).all()
        chains = {
            branch: position
            for sha, branch, position, mainline in rows
            if sha == descendant and mainline
        }
        if not chains:
            return None
        return any(
            sha == ancestor and branch in chains and position <= chains[branch]
            for sha, branch, position, _ in rows
        )

    async def assignment_revisions(self, branch: str) -> list[dict[str, Any]]:
        """Every revision, oldest first, with the shas its range starts and ends at."""
        start, end, app = (
            GitCommit.__table__.alias("start"),
            GitCommit.__table__.alias("end"),
            Repository.__table__.alias("app"),
        )
        statement = (
            select(
                Assignment.cluster_type_name,
                Assignment.deployment_target_name,
                AssignmentRevision.__table__,
                start.c.sha.label("valid_from"),
                end.c.sha.label("valid_until"),
                app.c.url.label("app_url"),
            )
            .join(AssignmentRevision, AssignmentRevision.assignment_id == Assignment.id)
            .join(GitBranch, GitBranch.id == Assignment.branch_id)
            .join(start, start.c.id == AssignmentRevision.valid_from_commit_id)
            .outerjoin(end, end.c.id == AssignmentRevision.valid_until_commit_id)
            .outerjoin(app, app.c.id == AssignmentRevision.app_repository_id)
            .where(Assignment.repository_id == await self.id(), GitBranch.name == branch)
            .order_by(AssignmentRevision.id)
        )
        return [dict(row) for row in (await self.session.execute(statement)).mappings()]

    async def current_assignments(self, branch: str) -> dict[tuple[str, str], dict[str, Any]]:
        return {
            (row["cluster_type_name"], row["deployment_target_name"]): row
            for row in await self.assignment_revisions(branch)
            if row["valid_until"] is None
        }

    async def manifest_revisions(self, branch: str) -> list[dict[str, Any]]:
        start, end = GitCommit.__table__.alias("start"), GitCommit.__table__.alias("end")
        statement = (
            select(
                ManifestRevision.__table__,
                start.c.sha.label("valid_from"),
                end.c.sha.label("valid_until"),
            )
            .join(GitBranch, GitBranch.id == ManifestRevision.branch_id)
            .join(start, start.c.id == ManifestRevision.valid_from_commit_id)
            .outerjoin(end, end.c.id == ManifestRevision.valid_until_commit_id)
            .where(ManifestRevision.repository_id == await self.id(), GitBranch.name == branch)
            .order_by(ManifestRevision.id)
        )
        return [dict(row) for row in (await self.session.execute(statement)).mappings()]

    async def current_manifests(self, branch: str) -> dict[str, dict[str, Any]]:
        return {
            row["path"]: row
            for row in await self.manifest_revisions(branch)
            if row["valid_until"] is None
        }

    async def errors(self) -> list[RowMapping]:
        statement = (
            select(HarvestError.__table__)
            .where(HarvestError.repository_id == await self.id())
            .order_by(HarvestError.id)
        )
        return list((await self.session.execute(statement)).mappings())
