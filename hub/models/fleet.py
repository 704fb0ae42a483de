"""Fleet dimensions: environments, workspaces, workloads, targets, cluster types, clusters."""

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base, created_at_column


class Environment(Base):
    __tablename__ = "environment"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    # Order in the promotion chain; null until the control plane declares it.
    position: Mapped[int | None]
    created_at: Mapped[datetime] = created_at_column()


class Workspace(Base):
    __tablename__ = "workspace"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(253), unique=True)
    created_at: Mapped[datetime] = created_at_column()


class Workload(Base):
    __tablename__ = "workload"
    __table_args__ = (UniqueConstraint("workspace_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspace.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(253))
    labels: Mapped[dict[str, str]] = mapped_column(default=dict, server_default="{}")
    source_url: Mapped[str | None]
    created_at: Mapped[datetime] = created_at_column()


class DeploymentTarget(Base):
    __tablename__ = "deployment_target"
    __table_args__ = (UniqueConstraint("workload_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workload.id", ondelete="CASCADE"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"), index=True)
    # Full name, "<workload>-<target>", as the scheduler uses it.
    name: Mapped[str] = mapped_column(String(253))
    labels: Mapped[dict[str, str]] = mapped_column(default=dict, server_default="{}")
    manifests_repository_id: Mapped[int | None] = mapped_column(ForeignKey("repository.id"))
    manifests_branch: Mapped[str | None]
    manifests_path: Mapped[str | None]
    created_at: Mapped[datetime] = created_at_column()


class ClusterType(Base):
    __tablename__ = "cluster_type"
    __table_args__ = (UniqueConstraint("environment_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"))
    name: Mapped[str] = mapped_column(String(63))
    labels: Mapped[dict[str, str]] = mapped_column(default=dict, server_default="{}")
    reconciler: Mapped[str | None]
    namespace_service: Mapped[str | None]
    config_type: Mapped[str | None]
    created_at: Mapped[datetime] = created_at_column()


class Cluster(Base):
    __tablename__ = "cluster"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(253), unique=True)
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environment.id"), index=True)
    cluster_type_id: Mapped[int | None] = mapped_column(ForeignKey("cluster_type.id"), index=True)
    labels: Mapped[dict[str, str]] = mapped_column(default=dict, server_default="{}")
    # HMAC-SHA256 of the cluster token; null once revoked. The token itself is never stored.
    token_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    registered_at: Mapped[datetime] = created_at_column()
    token_revoked_at: Mapped[datetime | None]
    first_seen_at: Mapped[datetime | None]
    last_seen_at: Mapped[datetime | None]
    decommissioned_at: Mapped[datetime | None]
    # The hub's time of the last change of its environment or cluster type, or of its coming
    # back from decommissioning: the drift rounds that look back past it judge its objects
    # again.
    placed_at: Mapped[datetime | None]
    # What the latest report claims (a valid name, or none): shown, never the placement.
    claimed_environment: Mapped[str | None] = mapped_column(String(63))
    claimed_cluster_type: Mapped[str | None] = mapped_column(String(63))
