"""Observed state reported by cluster agents: `object_state`, the current state per (cluster,
object); `status_transition`, its every change (a TimescaleDB hypertable where it can be);
`cluster_heartbeat`, reports per cluster in coarse buckets; `agent_session`, for idempotent
ingest; `snapshot_part`, the parts of a snapshot until the last.
"""

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base

# Width of a heartbeat bucket; the availability history is kept at this resolution.
HEARTBEAT_BUCKET = "5 minutes"
# How many sequence numbers behind the newest one a late report is still recognised.
REPLAY_WINDOW = 63
# How long the parts of a snapshot wait for the rest, counted from the newest part of the
# cluster to arrive; older parts are dropped (their snapshot removes nothing), and the
# retention job deletes those of clusters that send no more.
SNAPSHOT_PARTS_KEPT = timedelta(hours=1)


class AgentSession(Base):
    """One agent boot of one cluster: the newest sequence and a window of those seen before it."""

    __tablename__ = "agent_session"

    cluster_id: Mapped[int] = mapped_column(
        ForeignKey("cluster.id", ondelete="CASCADE"), primary_key=True
    )
    boot_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_version: Mapped[str] = mapped_column(String(64))
    instance: Mapped[str] = mapped_column(String(253))
    max_sequence: Mapped[int] = mapped_column(BigInteger)
    # Bit i set: sequence max_sequence - i was accepted (bit 0 is max_sequence itself).
    seen_window: Mapped[int] = mapped_column(BigInteger)
    started_at: Mapped[datetime]
    last_report_at: Mapped[datetime]
    report_count: Mapped[int] = mapped_column(BigInteger, server_default="1")
    # Kinds the agent was set to watch but skipped (e.g. their CRD is absent), as reported
    # with its newest sequence: [{"kind", "api_group", "reason"}].
    skipped_kinds: Mapped[list[dict[str, str]]] = mapped_column(JSONB, server_default="[]")


class SnapshotPart(Base):
    """One part of a full snapshot that came in several reports, until the snapshot is whole.

    A row per part, not per object: the keys of the objects the part named, as a JSON array
    of [reconciler, kind, namespace, name]. The last part to arrive removes the objects no
    part named and drops the rows (hub/ingest/repository.py); the rows of a snapshot that
    never completes are dropped after SNAPSHOT_PARTS_KEPT, when the cluster keeps too many,
    and when it is decommissioned.
    """

    __tablename__ = "snapshot_part"

    cluster_id: Mapped[int] = mapped_column(
        ForeignKey("cluster.id", ondelete="CASCADE"), primary_key=True
    )
    snapshot_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    part_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    part_count: Mapped[int] = mapped_column(Integer)
    observed_at: Mapped[datetime]
    received_at: Mapped[datetime]
    keys: Mapped[list[list[str]]] = mapped_column(JSONB)


class ObjectState(Base):
    """Current state of one reconciler object in one cluster."""

    __tablename__ = "object_state"
    __table_args__ = (
        UniqueConstraint("cluster_id", "reconciler", "kind", "namespace", "name"),
        # Objects by the source they apply: the URL spellings in use, and the objects that
        # apply a repository's branch with what the gate judges them by (migrations 0011, 0013
        # and 0031; the first says why it is not partial on removed_at).
        Index(
            "ix_object_state_source",
            "source_url",
            "url_ref",
            postgresql_include=[
                "id",
                "cluster_id",
                "source_path",
                "applied_revision",
                "applied_sha",
                "attempted_sha",
                "ready",
                "applied_since",
                "ready_since",
                "removed_at",
            ],
        ),
        # The objects that apply a branch's commits, as dora_member finds them (migration 0054).
        Index("ix_object_state_applied_sha", "applied_sha"),
        # The objects written since the drift job's last round, as it re-judges them
        # (migration 0058).
        Index("ix_object_state_written_at", "written_at"),
        # Migration 0026 adds ix_object_state_name_c, (name COLLATE "C", id), for deployment
        # history by object name: a collation of its own, which models cannot state.
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("cluster.id", ondelete="CASCADE"))
    reconciler: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(63))
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    source_url: Mapped[str | None]
    source_ref: Mapped[str | None]
    source_path: Mapped[str | None]
    # The ref of source_url whose revisions the object applies (hub/ingest/service.py).
    url_ref: Mapped[str | None]
    applied_revision: Mapped[str | None]
    applied_sha: Mapped[str | None] = mapped_column(String(64))
    applied_version: Mapped[str | None]
    attempted_revision: Mapped[str | None]
    attempted_sha: Mapped[str | None] = mapped_column(String(64))
    ready: Mapped[bool | None]
    reason: Mapped[str | None]
    message: Mapped[str | None] = mapped_column(Text)
    health: Mapped[str | None] = mapped_column(String(32))
    drifted: Mapped[bool] = mapped_column(server_default="false")
    suspended: Mapped[bool] = mapped_column(server_default="false")
    last_transition_at: Mapped[datetime | None]
    # Agent time of the report that brought the current state (or the removal).
    changed_at: Mapped[datetime]
    first_seen_at: Mapped[datetime]
    # Set when a full snapshot no longer contains the object; cleared if it comes back.
    removed_at: Mapped[datetime | None]
    # Agent time at which the current run of the applied revision began, and, while the object
    # is Ready, its current Ready period (ingest keeps both; migration 0011).
    applied_since: Mapped[datetime]
    ready_since: Mapped[datetime | None]
    # The hub's time of the report that last wrote the row (its state, or its removal): what
    # the drift job re-judges (hub/drift/repository.py). None: not written since 0058.
    written_at: Mapped[datetime | None]


APPLIED_REVISION = "applied_sha IS NOT NULL OR applied_version IS NOT NULL"
# Flux source objects fetch a revision and never apply one (agent/sources/flux.py): they say
# where a Kustomization's revisions come from, they are not what a cluster runs.
FLUX_SOURCE_KINDS = ("GitRepository", "OCIRepository", "Bucket", "HelmRepository", "HelmChart")

status_transition = Table(
    "status_transition",
    Base.metadata,
    Column("observed_at", DateTime(timezone=True), nullable=False),
    # Both refer to their rows through triggers, not foreign keys (migration 0017).
    Column("cluster_id", Integer, nullable=False),
    Column("object_id", BigInteger, nullable=False),
    Column("source_url", String),
    Column("source_ref", String),
    Column("source_path", String),
    Column("url_ref", String),
    Column("applied_revision", String),
    Column("applied_sha", String(64)),
    Column("applied_version", String),
    Column("attempted_revision", String),
    Column("attempted_sha", String(64)),
    Column("ready", Boolean),
    Column("reason", String),
    Column("message", Text),
    Column("health", String(32)),
    Column("drifted", Boolean, nullable=False),
    Column("suspended", Boolean, nullable=False),
    # True for the transition that records the object leaving a full snapshot.
    Column("removed", Boolean, nullable=False, server_default=text("false")),
    Column("received_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # The object's applied revision before this change, where ingest knows it to be what the
    # history holds before it (previous_recorded); elsewhere deployment_history looks it up
    # (migration 0043).
    Column("previous_recorded", Boolean),
    Column("previous_revision", String),
    Column("previous_sha", String(64)),
    Column("previous_version", String),
    Index(None, "cluster_id", text("observed_at DESC")),
    Index(None, "object_id", text("observed_at DESC")),
    # Deployment history (migration 0009) reads only transitions with an applied revision:
    # newest first, and each object's one before a given time.
    Index(
        "ix_status_transition_applied_observed_at",
        text("observed_at DESC"),
        postgresql_where=text(APPLIED_REVISION),
    ),
    Index(
        "ix_status_transition_applied_object_id",
        "object_id",
        text("observed_at DESC"),
        text("received_at DESC"),
        postgresql_where=text(APPLIED_REVISION),
    ),
)


class ClusterObjectCount(Base):
    """A cluster's live objects counted by state, as fleet_cluster_state shows them.

    Kept by triggers on object_state (migration 0019), so that the fleet's counts add up
    10,000 rows rather than count every object per request.
    """

    __tablename__ = "cluster_object_count"

    cluster_id: Mapped[int] = mapped_column(
        ForeignKey("cluster.id", ondelete="CASCADE"), primary_key=True
    )
    objects: Mapped[int] = mapped_column(BigInteger)
    ready: Mapped[int] = mapped_column(BigInteger)
    failing: Mapped[int] = mapped_column(BigInteger)
    progressing: Mapped[int] = mapped_column(BigInteger)
    suspended: Mapped[int] = mapped_column(BigInteger)
    drifted: Mapped[int] = mapped_column(BigInteger)


class ClusterHeartbeat(Base):
    """Reports received from a cluster in one HEARTBEAT_BUCKET."""

    __tablename__ = "cluster_heartbeat"

    # Refers to its cluster through triggers, not a foreign key (migration 0017).
    cluster_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bucket_at: Mapped[datetime] = mapped_column(primary_key=True)
    report_count: Mapped[int] = mapped_column(Integer)
    object_count: Mapped[int] = mapped_column(Integer)


def _summed() -> list[Column[Any]]:
    """What the env diff's summary counts clusters by: placement, source, applied commit,
    condition and version (the columns of the deployed_version view)."""
    return [
        Column("environment_id", Integer),
        Column("cluster_type", String(63)),
        Column("source_url", String),
        Column("source_ref", String),
        Column("source_path", Text),
        Column("applied_sha", String),
        Column("applied_version", String),
        Column("condition", Text, nullable=False),
        Column("version", String),
    ]


# What each cluster runs, as the env diff job last read its objects (migration 0059): its
# objects summed up per source, applied commit and condition, each with the version the
# applied commit carries, plus a `member` row placing it. The job reads the objects again only
# for the clusters that changed, and sums up their parts from here. No key: a cluster's rows
# are replaced as a whole.
deployed_cluster = Table(
    "deployed_cluster",
    Base.metadata,
    Column("cluster_id", Integer, nullable=False, index=True),
    *_summed(),
    Column("message", Text),
    # The clusters as the job last placed them, read whole each round to find those placed
    # since: an index-only scan, not a pass over every row.
    Index(
        "ix_deployed_cluster_member",
        "cluster_id",
        postgresql_include=["environment_id", "cluster_type"],
        postgresql_where=text("condition = 'member'"),
    ),
    comment=(
        "What one cluster runs, as the hub last read its objects: a row per source, applied "
        "commit and condition (as deployed_version), and a member row with its placement."
    ),
)


# What the clusters of one part of the fleet (a range of cluster ids) run, summed up from
# deployed_cluster by the env diff job; the deployed_version view adds the parts up
# (migrations 0010, 0059). No key: a part is replaced as a whole.
deployed_part = Table(
    "deployed_part",
    Base.metadata,
    Column("part", Integer, nullable=False, index=True),
    *_summed(),
    Column("clusters", BigInteger, nullable=False),
    Column("message", Text),
    comment=(
        "deployed_version of the clusters of one part of the fleet (a range of cluster ids), "
        "summed up from deployed_cluster; deployed_version adds the parts up."
    ),
)


class DeployedRefresh(Base):
    """The env diff job's last refresh of the deployed summary: one row."""

    __tablename__ = "deployed_refresh"
    __table_args__ = (CheckConstraint("id = 1", name="single_row"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # What deployed_version holds is as of then.
    refreshed_at: Mapped[datetime]
    # When it last read every cluster's objects, not only those of the clusters that changed.
    full_at: Mapped[datetime | None]
