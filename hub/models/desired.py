"""Desired state harvested from GitOps repositories, stored as validity ranges over commits.

A row is written when something changes, not once per commit: storage grows with changes.
"""

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base, created_at_column


class Assignment(Base):
    """A deployment target on a cluster type, as found in the platform GitOps repo."""

    __tablename__ = "assignment"
    __table_args__ = (
        UniqueConstraint(
            "repository_id", "branch_id", "cluster_type_name", "deployment_target_name"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repository.id", ondelete="CASCADE"))
    branch_id: Mapped[int] = mapped_column(ForeignKey("git_branch.id", ondelete="CASCADE"))
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environment.id"), index=True)
    cluster_type_name: Mapped[str] = mapped_column(String(63))
    deployment_target_name: Mapped[str] = mapped_column(String(253))
    created_at: Mapped[datetime] = created_at_column()


class AssignmentRevision(Base):
    """What an assignment looked like from one platform commit until (excluding) another."""

    __tablename__ = "assignment_revision"

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(
        ForeignKey("assignment.id", ondelete="CASCADE"), index=True
    )
    valid_from_commit_id: Mapped[int] = mapped_column(ForeignKey("git_commit.id"))
    valid_until_commit_id: Mapped[int | None] = mapped_column(ForeignKey("git_commit.id"))
    namespace: Mapped[str | None] = mapped_column(String(63))
    config: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")
    config_hash: Mapped[str | None] = mapped_column(String(64))
    reconciler_kind: Mapped[str | None]
    app_repository_id: Mapped[int | None] = mapped_column(ForeignKey("repository.id"))
    app_branch: Mapped[str | None]
    app_path: Mapped[str | None]
    # The fixed revision the reconciler follows instead of the branch head (a commit, a tag),
    # spelled as agents report a source ref; None while it follows the branch.
    app_pinned_ref: Mapped[str | None]
    # The Namespace's `workload` label (Kalypso's namespace template sets it).
    workload: Mapped[str | None] = mapped_column(String(253))


class ManifestRevision(Base):
    """A deployment-target folder of an application GitOps repo, from one commit until another."""

    __tablename__ = "manifest_revision"

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repository.id", ondelete="CASCADE"))
    branch_id: Mapped[int] = mapped_column(ForeignKey("git_branch.id", ondelete="CASCADE"))
    path: Mapped[str]
    valid_from_commit_id: Mapped[int] = mapped_column(ForeignKey("git_commit.id"))
    valid_until_commit_id: Mapped[int | None] = mapped_column(ForeignKey("git_commit.id"))
    workload_version: Mapped[str | None]
    # Where the version came from: descriptor, label or image.
    version_source: Mapped[str | None] = mapped_column(String(16))
    images: Mapped[list[str]] = mapped_column(ARRAY(String), server_default="{}")
    manifest_digest: Mapped[str | None] = mapped_column(String(71))

    __table_args__ = (UniqueConstraint("branch_id", "path", "valid_from_commit_id"),)


class HarvestError(Base):
    """A problem met while harvesting: one row per distinct problem, counted when it recurs."""

    __tablename__ = "harvest_error"
    __table_args__ = (
        Index(
            None,
            "repository_id",
            "commit_sha",
            "path",
            "message",
            unique=True,
            postgresql_nulls_not_distinct=True,
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("repository.id", ondelete="CASCADE"), index=True
    )
    commit_sha: Mapped[str | None] = mapped_column(String(64))
    path: Mapped[str | None]
    message: Mapped[str]
    occurred_at: Mapped[datetime] = created_at_column()
    last_occurred_at: Mapped[datetime] = created_at_column()
    occurrences: Mapped[int] = mapped_column(server_default="1")
