"""Runs of the hub's background jobs (hub/background/), kept in the store so that every replica
can tell when each job last ran, how it went and how long it took. A run asked for through the
API is followed here until it is done."""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, Index, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base


class JobRun(Base):
    """One round of a job on one replica: it ran and succeeded or failed, or it was skipped
    because another replica held the job's lock; or, asked for through the API (`requested`),
    it is running still. Only the newest rounds of each job and outcome are kept, and the
    requested runs of the last day (hub/runs/service.py)."""

    __tablename__ = "job_run"
    __table_args__ = (
        CheckConstraint(
            "outcome IN ('running', 'succeeded', 'failed', 'skipped')", name="known_outcome"
        ),
        CheckConstraint(
            "(outcome = 'running') = (finished_at IS NULL)", name="finished_unless_running"
        ),
        Index(None, "job", "outcome", "finished_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    job: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    outcome: Mapped[str] = mapped_column(String(16))
    # What failed, for a failed run: the exception's type and message.
    error: Mapped[str | None] = mapped_column(Text)
    # What a run asked for through the API did (its report), for the caller polling it.
    result: Mapped[dict[str, Any] | None]
    # Asked for through the API, not a periodic round.
    requested: Mapped[bool] = mapped_column(server_default=false())
