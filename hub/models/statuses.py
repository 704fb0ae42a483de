"""Commit statuses the hub sets on control-plane commits (migration 0046_commit_status): what
was last posted for each commit and context, and when a status not yet posted is tried again."""

from datetime import datetime

from sqlalchemy import BigInteger, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base


class CommitStatus(Base):
    """A `fleetmark/promotion/<environment>` status of one control-plane commit."""

    __tablename__ = "commit_status"
    __table_args__ = (UniqueConstraint("repository", "sha", "context"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    # The control-plane repository's normalised URL.
    repository: Mapped[str]
    sha: Mapped[str] = mapped_column(String(64))
    context: Mapped[str]
    # What was last posted (None: nothing yet): pending, success or failure.
    state: Mapped[str | None] = mapped_column(String(16))
    description: Mapped[str | None]
    target_url: Mapped[str | None]
    posted_at: Mapped[datetime | None]
    # Attempts that failed since the last post, and the earliest next one.
    failures: Mapped[int] = mapped_column(server_default="0")
    retry_at: Mapped[datetime | None]
    error: Mapped[str | None]
