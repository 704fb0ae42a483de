"""DORA: the rollup of rollouts the DORA job keeps (migration 0020_dora_rollouts).

`dora_rollup` holds a row per rollout as `dora_rollout` judges it, of every environment's platform
commits (workload '') and each workload's versions; `dora_refresh` says when each was last
judged. The API and the dashboards read them through `dora_rolled_up`.
"""

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Index, String, UniqueConstraint
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base

# The workload of the platform commits' rows: they belong to none.
PLATFORM_COMMITS = ""


class DoraRollup(Base):
    """A rollout of a platform commit or a workload version in an environment, as of the
    refresh that last judged it."""

    __tablename__ = "dora_rollup"
    __table_args__ = (
        UniqueConstraint(
            "workload",
            "environment",
            "repository",
            "branch",
            "revision",
            postgresql_nulls_not_distinct=True,
        ),
        Index(None, "workload", "committed_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    workload: Mapped[str] = mapped_column(String(253))
    environment: Mapped[str]
    environment_position: Mapped[int | None]
    # The platform repository and branch; None for a workload version.
    repository: Mapped[str | None]
    branch: Mapped[str | None]
    revision: Mapped[str]
    commit_sha: Mapped[str] = mapped_column(String(64))
    committed_at: Mapped[datetime]
    started_at: Mapped[datetime]
    expected_clusters: Mapped[int] = mapped_column(BigInteger)
    reached_clusters: Mapped[int] = mapped_column(BigInteger)
    completed_at: Mapped[datetime | None]
    failed_at: Mapped[datetime | None]
    failed_clusters: Mapped[int] = mapped_column(BigInteger)
    failed_cluster: Mapped[str | None]
    failure_reason: Mapped[str | None]
    failure_message: Mapped[str | None]
    restored_at: Mapped[datetime | None]
    # Sorted: when each expected cluster reached the rollout, and when each cluster that failed
    # it first did; what a range ending before the refresh counts.
    reached_times: Mapped[list[datetime]] = mapped_column(ARRAY(DateTime(timezone=True)))
    failure_times: Mapped[list[datetime]] = mapped_column(ARRAY(DateTime(timezone=True)))


class DoraRefresh(Base):
    """When the DORA job last judged the rollouts of the platform commits (workload '') or of
    a workload's versions."""

    __tablename__ = "dora_refresh"

    workload: Mapped[str] = mapped_column(String(253), primary_key=True)
    refreshed_at: Mapped[datetime]
