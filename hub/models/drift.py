"""Drift: `object_drift`, the drift job's verdict per live object; `cluster_drift` and
`cluster_drift_reasons`, its counts per cluster; `drift_total`, per environment and cluster
type; `drift_period`, the spans drifted; `drift_evaluation`, when the fleet was last judged.
Staleness depends on "now", so these leave it out and readers add it.
"""

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Index, String, Text, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base


class ObjectDrift(Base):
    """The drift job's verdict on one live reconciler object, with its evidence."""

    __tablename__ = "object_drift"

    object_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("object_state.id", ondelete="CASCADE"), primary_key=True
    )
    cluster_id: Mapped[int] = mapped_column(
        ForeignKey("cluster.id", ondelete="CASCADE"), index=True
    )
    # The object and the source it follows (a Flux source object's URL and ref stand in for
    # those of the object that names it), as judged.
    reconciler: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    source_url: Mapped[str | None]
    source_ref: Mapped[str | None]
    source_path: Mapped[str | None]
    # The harvested branch the object follows; None when its source is not harvested.
    branch_id: Mapped[int | None] = mapped_column(ForeignKey("git_branch.id", ondelete="CASCADE"))
    # at_head, ahead, behind, diverged, unknown_revision, not_applied, no_commit, untracked.
    revision: Mapped[str] = mapped_column(String(16))
    applied_revision: Mapped[str | None]
    applied_sha: Mapped[str | None] = mapped_column(String(64))
    head_sha: Mapped[str | None] = mapped_column(String(64))
    commits_behind: Mapped[int | None]
    # Commit time of the oldest commit of the branch the object has not applied.
    behind_since: Mapped[datetime | None]
    ready: Mapped[bool | None]
    reason: Mapped[str | None]
    message: Mapped[str | None] = mapped_column(Text)
    live_drift: Mapped[bool]
    suspended: Mapped[bool]
    # [{deployment_target, applied_config_hash, desired_config_hash, keys}] when behind.
    config_mismatches: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    # Every reason but stale, in the order of hub.drift.service.REASONS.
    reasons: Mapped[list[str]] = mapped_column(ARRAY(String(32)), server_default="{}")
    # When the job first found the object as it is now.
    changed_at: Mapped[datetime]


class ReasonCounts:
    """Judged objects counted: following no harvested branch, and per stored reason."""

    untracked: Mapped[int]
    behind: Mapped[int]
    diverged: Mapped[int]
    unknown_revision: Mapped[int]
    not_applied: Mapped[int]
    failing: Mapped[int]
    config_mismatch: Mapped[int]
    live_drift: Mapped[int]


class ClusterDrift(ReasonCounts, Base):
    """A registered cluster's judged objects counted: in all, drifted (a reason other than
    stale), per reason, following no harvested branch; and where the cluster comes in a drift
    listing. What drift queries count and page by: a row per cluster, not one per object."""

    __tablename__ = "cluster_drift"
    # The clusters with drifted objects, in listing order.
    __table_args__ = (
        Index("ix_cluster_drift_drifted", "rank", postgresql_where=text("drifted > 0")),
    )

    cluster_id: Mapped[int] = mapped_column(
        ForeignKey("cluster.id", ondelete="CASCADE"), primary_key=True
    )
    # Promotion order (environment position, then name), cluster type, cluster name.
    rank: Mapped[int]
    objects: Mapped[int]
    drifted: Mapped[int]
    # The cluster type it had when counted: a cluster placed since has its objects judged
    # anew (their platform config depends on it).
    cluster_type_id: Mapped[int | None]


class DriftTotal(ReasonCounts, Base):
    """`cluster_drift` summed up per environment and cluster type, as the clusters were placed
    when the job counted them, with the ranks they take in a listing (a range: a listing
    orders by environment, then cluster type). What a drift query without filters counts by;
    the reader adds staleness."""

    __tablename__ = "drift_total"

    id: Mapped[int] = mapped_column(primary_key=True)
    environment_id: Mapped[int | None] = mapped_column(
        ForeignKey("environment.id", ondelete="CASCADE")
    )
    cluster_type_id: Mapped[int | None] = mapped_column(
        ForeignKey("cluster_type.id", ondelete="CASCADE")
    )
    clusters: Mapped[int]
    first_rank: Mapped[int]
    last_rank: Mapped[int]
    drifted: Mapped[int]
    drifted_clusters: Mapped[int]


class ClusterDriftReasons(Base):
    """How many of a cluster's judged objects have one set of reasons (none included): what a
    drift query filtered by reason counts and pages by."""

    __tablename__ = "cluster_drift_reasons"

    cluster_id: Mapped[int] = mapped_column(
        ForeignKey("cluster.id", ondelete="CASCADE"), primary_key=True
    )
    reasons: Mapped[list[str]] = mapped_column(ARRAY(String(32)), primary_key=True)
    objects: Mapped[int]


class DriftPeriod(Base):
    """A span during which a cluster (object_id None) or one of its objects was drifted."""

    __tablename__ = "drift_period"
    __table_args__ = (
        Index(None, "cluster_id", "started_at"),
        Index(None, "object_id", "started_at"),
        Index(
            "ix_drift_period_open",
            "cluster_id",
            "object_id",
            postgresql_where=text("ended_at IS NULL"),
        ),
        # The open periods of the objects a drift page shows (migration 0022).
        Index(
            "ix_drift_period_open_object_id",
            "object_id",
            postgresql_where=text("ended_at IS NULL AND object_id IS NOT NULL"),
        ),
        # The periods of a dashboard's time range: ended since its start, or open (0023);
        # its newest first, ties by cluster and object (0030).
        Index(None, "ended_at"),
        Index(None, "started_at", "cluster_id", "object_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("cluster.id", ondelete="CASCADE"))
    object_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("object_state.id", ondelete="CASCADE")
    )
    started_at: Mapped[datetime]
    # None while the period is open.
    ended_at: Mapped[datetime | None]
    # Every reason seen while the period was open.
    reasons: Mapped[list[str]] = mapped_column(ARRAY(String(32)), server_default="{}")


class DriftEvaluation(Base):
    """The drift job's last run: one row."""

    __tablename__ = "drift_evaluation"
    __table_args__ = (CheckConstraint("id = 1", name="single_row"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    evaluated_at: Mapped[datetime]
    # When it last judged every object, not only those whose inputs changed.
    full_at: Mapped[datetime | None]
    # The stale-after it judged with (FLEETMARK_STALE_AFTER_SECONDS); None before 0061.
    stale_after: Mapped[timedelta | None]
