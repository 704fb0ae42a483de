"""Rollouts: each platform commit or workload version moving through an environment, with its
state (migration 0038_rollouts), kept by the rollouts job (hub/rollouts).

A row follows its rollout's row in `dora_rollup` (who was expected, reached it, failed on it),
adding the state and the stalled periods as of the same refresh; it goes when that row goes.
"""

from datetime import datetime, timedelta

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Index, String
from sqlalchemy.dialects.postgresql import TSTZMULTIRANGE, Range
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base

# The states a rollout is in, as hub.rollouts.policy names them.
ROLLOUT_STATES = ("in_progress", "converged", "failed", "stalled")


class Rollout(Base):
    """A rollout and its state as of the DORA job's refresh `evaluated_at`."""

    __tablename__ = "rollout"
    __table_args__ = (
        CheckConstraint(
            "state IN ({})".format(", ".join(f"'{state}'" for state in ROLLOUT_STATES)),
            name="known_state",
        ),
        Index(None, "started_at"),
    )

    dora_rollup_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("dora_rollup.id", ondelete="CASCADE"), primary_key=True
    )
    # None: a platform commit.
    workload: Mapped[str | None] = mapped_column(String(253))
    environment: Mapped[str]
    environment_position: Mapped[int | None]
    # The platform repository and branch; None for a workload version.
    repository: Mapped[str | None]
    branch: Mapped[str | None]
    # The platform commit's sha, or the version.
    revision: Mapped[str]
    commit_sha: Mapped[str] = mapped_column(String(64))
    committed_at: Mapped[datetime]
    state: Mapped[str] = mapped_column(String(16))
    # When the rollout entered its state.
    state_since: Mapped[datetime]
    expected_clusters: Mapped[int] = mapped_column(BigInteger)
    reached_clusters: Mapped[int] = mapped_column(BigInteger)
    failed_clusters: Mapped[int] = mapped_column(BigInteger)
    started_at: Mapped[datetime]
    # The later of its start and the last time an expected cluster reached it.
    last_progress_at: Mapped[datetime]
    converged_at: Mapped[datetime | None]
    failed_at: Mapped[datetime | None]
    # The first cluster that failed on it, and why.
    failed_cluster: Mapped[str | None]
    failure_reason: Mapped[str | None]
    failure_message: Mapped[str | None]
    # The periods in which it counted as stalled; the last one open while it is.
    stalled: Mapped[list[Range[datetime]]] = mapped_column(TSTZMULTIRANGE)
    # The stall-after it was judged with (FLEETMARK_ROLLOUT_STALL_AFTER).
    stall_after: Mapped[timedelta]
    # The DORA job's refresh its facts are from: the state is as of then. A converged rollout
    # keeps the refresh that found it so, unless a later one changes its facts.
    evaluated_at: Mapped[datetime]
