"""Halts: a platform commit or workload version whose promotion out of an environment stops
because it is a clear suspect there (migration 0051_rollout_halts), kept by the halts job
(hub/suspects) and read by the promotion gate and the recommendations.

A row stays once its halt ends (superseded, or cleared by an admin, who and why): the timeline
reads them, and a cleared target is not halted again.
"""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, String, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base

# How a halt ends.
HALT_ENDINGS = ("superseded", "cleared")


class RolloutHalt(Base):
    __tablename__ = "rollout_halt"
    __table_args__ = (
        UniqueConstraint("environment", "workload", "revision", postgresql_nulls_not_distinct=True),
        CheckConstraint(
            "ended_how IS NULL OR ended_how IN ({})".format(
                ", ".join(f"'{ending}'" for ending in HALT_ENDINGS)
            ),
            name="known_ending",
        ),
        CheckConstraint("(ended_at IS NULL) = (ended_how IS NULL)", name="ended_together"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    environment: Mapped[str]
    # None: a platform commit.
    workload: Mapped[str | None] = mapped_column(String(253))
    # The platform commit's sha, or the version.
    revision: Mapped[str]
    started_at: Mapped[datetime]
    # Why: the suspect as the suspects answer lists it (counts, score, p, reasons, clusters).
    evidence: Mapped[dict[str, Any]] = mapped_column(JSONB)
    ended_at: Mapped[datetime | None]
    ended_how: Mapped[str | None] = mapped_column(String(16))
    # superseded: the newer commit or version applied in the environment.
    superseded_by: Mapped[str | None]
    # cleared: who cleared it, and why.
    cleared_by: Mapped[str | None]
    clear_reason: Mapped[str | None] = mapped_column(Text)
