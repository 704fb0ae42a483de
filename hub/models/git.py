"""Git facts: repositories, branches and commits with their ancestry."""

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base, created_at_column


class Repository(Base):
    __tablename__ = "repository"
    __table_args__ = (
        CheckConstraint("role IN ('platform', 'app')", name="role"),
        CheckConstraint("source IN ('file', 'api', 'discovered')", name="source"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # Normalised (scheme, host, path without .git, lower-cased host): https/ssh forms are one repo.
    url: Mapped[str] = mapped_column(unique=True)
    # The URL as configured or found in a reconciler manifest: what git fetches from.
    clone_url: Mapped[str]
    role: Mapped[str] = mapped_column(String(32))
    # file: the repositories file; api: the admin API; discovered: a platform reconciler.
    source: Mapped[str] = mapped_column(String(16), server_default="discovered")
    # None: the environment branches (or, when discovered, those the reconcilers track).
    branches: Mapped[list[str] | None] = mapped_column(ARRAY(String))
    # A reference (file path or variable name), never the secret itself.
    credentials: Mapped[dict[str, Any] | None]
    enabled: Mapped[bool] = mapped_column(server_default="true")
    # The repository whose reconciler manifests named a discovered one: a local URL discovered
    # is fetched only when that repository is local too.
    discovered_from_id: Mapped[int | None] = mapped_column(
        ForeignKey("repository.id", ondelete="SET NULL")
    )
    fetched_at: Mapped[datetime | None]
    fetch_error: Mapped[str | None]
    created_at: Mapped[datetime] = created_at_column()


class GitBranch(Base):
    __tablename__ = "git_branch"
    __table_args__ = (UniqueConstraint("repository_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repository.id", ondelete="CASCADE"))
    name: Mapped[str]
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environment.id"))
    head_commit_id: Mapped[int | None] = mapped_column(ForeignKey("git_commit.id"))
    harvested_at: Mapped[datetime | None]
    deleted_at: Mapped[datetime | None]
    # When the harvest last moved the head (or deleted the branch, or found it again): the
    # objects following its repository are judged anew (hub/drift/repository.py).
    changed_at: Mapped[datetime | None]


class GitCommit(Base):
    __tablename__ = "git_commit"
    __table_args__ = (
        UniqueConstraint("repository_id", "sha"),
        Index(None, "repository_id", "committed_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repository.id", ondelete="CASCADE"))
    sha: Mapped[str] = mapped_column(String(64))
    parent_shas: Mapped[list[str]] = mapped_column(ARRAY(String(64)), server_default="{}")
    # Longest path from a root: an ancestor always has a smaller generation.
    generation: Mapped[int]
    author_name: Mapped[str | None]
    author_email: Mapped[str | None]
    committed_at: Mapped[datetime]
    message: Mapped[str | None]
    # The control-plane commit a platform commit promotes (.github/tracking/Promoted_Commit_Id).
    promoted_commit_sha: Mapped[str | None] = mapped_column(String(64))
    # False once a force-push leaves no branch pointing at it; kept, never deleted.
    reachable: Mapped[bool] = mapped_column(server_default="true")
    harvested_at: Mapped[datetime] = created_at_column()


class BranchCommit(Base):
    """Membership: the commit is reachable from the branch head.

    `position` numbers the branch's first-parent chain from its root (0, 1, 2, ...). A chain
    commit (`mainline`) has its own position; any other member has the position of the first
    chain commit it is an ancestor of. C is an ancestor of a chain commit A exactly when C is
    a member with position <= A's position: one lookup per commit (hub/git/ancestry.py).
    """

    __tablename__ = "branch_commit"
    __table_args__ = (Index(None, "branch_id", "position"),)

    branch_id: Mapped[int] = mapped_column(
        ForeignKey("git_branch.id", ondelete="CASCADE"), primary_key=True
    )
    commit_id: Mapped[int] = mapped_column(
        ForeignKey("git_commit.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    position: Mapped[int]
    mainline: Mapped[bool]
