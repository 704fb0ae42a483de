"""The embedded scheduler's own records: where it writes each environment, what it rendered there
and what went wrong, unrendered assignments included.

A scheduling target is one environment of one platform repository; every run for it replaces
its assignments and errors. What the repository holds is harvested (`hub.models.desired`).
"""

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String, UniqueConstraint
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base, created_at_column


class SchedulingTarget(Base):
    """An environment of a platform GitOps repository, and what its last run leaves the next."""

    __tablename__ = "scheduling_target"
    __table_args__ = (UniqueConstraint("gitops_url", "environment_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # Normalised (see hub.git.urls), as the harvester keys repositories.
    gitops_url: Mapped[str]
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"), index=True)
    control_plane_url: Mapped[str | None]
    # The control-plane commit the environment is promoted to, as last written.
    promoted_commit_sha: Mapped[str | None] = mapped_column(String(64))
    last_commit_sha: Mapped[str | None] = mapped_column(String(64))
    last_branch: Mapped[str | None]
    # The platform tree `render_state` (scheduler_core.state, as JSON) describes; when the
    # branch holds another tree, the next run renders in full.
    tree_sha: Mapped[str | None] = mapped_column(String(64))
    render_state: Mapped[bytes | None]
    scheduled_at: Mapped[datetime | None]
    # The ClusterTypes the control plane declares for the environment, as last scheduled.
    cluster_types: Mapped[list[str] | None] = mapped_column(ARRAY(String))
    created_at: Mapped[datetime] = created_at_column()


class ScheduledAssignment(Base):
    """A (cluster type, deployment target) pair the policies select, as the last run left it."""

    __tablename__ = "scheduled_assignment"
    __table_args__ = (
        UniqueConstraint("target_id", "cluster_type_name", "deployment_target_name"),
        CheckConstraint("status IN ('rendered', 'failed', 'rejected')", name="status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("scheduling_target.id", ondelete="CASCADE"))
    cluster_type_name: Mapped[str] = mapped_column(String(63))
    deployment_target_name: Mapped[str] = mapped_column(String(253))
    workload_name: Mapped[str] = mapped_column(String(253), index=True)
    # Not bounded: a rejected assignment's namespace is one too long to be a namespace.
    namespace: Mapped[str]
    # rendered: its folder holds this run's output; failed: it keeps its previous output;
    # rejected: scheduling refused the pair, it has no folder.
    status: Mapped[str] = mapped_column(String(16))
    policies: Mapped[list[str]] = mapped_column(ARRAY(String), server_default="{}")
    config_maps: Mapped[list[str]] = mapped_column(ARRAY(String), server_default="{}")
    files: Mapped[list[str]] = mapped_column(ARRAY(String), server_default="{}")
    content_hash: Mapped[str | None] = mapped_column(String(64))
    config_hash: Mapped[str | None] = mapped_column(String(64))
    # The commit and branch that last changed its folder (as far as the scheduler wrote it).
    commit_sha: Mapped[str | None] = mapped_column(String(64))
    branch: Mapped[str | None]
    changed_at: Mapped[datetime | None]
    scheduled_at: Mapped[datetime]


class SchedulingError(Base):
    """A problem of the last run for a target: one row per distinct problem, with when it was
    first and last met, so a template broken for days shows as such."""

    __tablename__ = "scheduling_error"
    __table_args__ = (
        UniqueConstraint("target_id", "fingerprint"),
        CheckConstraint(
            "kind IN ('load', 'scheduling', 'config', 'template', 'manifest', 'git')", name="kind"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("scheduling_target.id", ondelete="CASCADE"))
    # sha256 of every field below but the times: what makes two problems the same.
    fingerprint: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    message: Mapped[str]
    cluster_type_name: Mapped[str | None] = mapped_column(String(63))
    deployment_target_name: Mapped[str | None] = mapped_column(String(253))
    template: Mapped[str | None]
    # Where a control-plane document is (load errors) or which output file (render errors).
    source: Mapped[str | None]
    file: Mapped[str | None]
    document: Mapped[int | None]
    line: Mapped[int | None]
    field: Mapped[str | None]
    first_seen_at: Mapped[datetime]
    last_seen_at: Mapped[datetime]
