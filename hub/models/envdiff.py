"""Environment diff: the diff of every environment, in promotion order, kept by the environment
diff job for dashboards (migration 0027_promotion_gates): what GET /api/v1/diff answers, one
row per cell (workload, cluster type, environment) and one per differing config value.
"""

from datetime import datetime
from typing import Any

from sqlalchemy import String
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base


class EnvironmentDiffCell(Base):
    """One environment of a diff row: what it is meant to run, what its clusters run, and
    the differences that are about it, with their reasons."""

    __tablename__ = "environment_diff_cell"

    id: Mapped[int] = mapped_column(primary_key=True)
    workload: Mapped[str]
    cluster_type: Mapped[str]
    # Set when the row pairs environments by deployment target.
    paired_target: Mapped[str | None]
    environment: Mapped[str]
    environment_position: Mapped[int | None]
    # The place of the environment in the promotion order the versions are compared in.
    environment_order: Mapped[int]
    state: Mapped[str]
    assigned: Mapped[bool]
    deployment_target: Mapped[str | None]
    desired_version: Mapped[str | None]
    pinned_ref: Mapped[str | None]
    clusters: Mapped[int]
    in_sync: Mapped[int]
    drifted: Mapped[int]
    failing: Mapped[int]
    not_reporting: Mapped[int]
    # Most clusters first: version, commit, clusters each.
    deployed: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    # The differences about this environment (assignment, version, deployment), in order.
    reasons: Mapped[list[str]] = mapped_column(ARRAY(String))
    details: Mapped[list[str]] = mapped_column(ARRAY(String))
    evaluated_at: Mapped[datetime]


class EnvironmentDiffConfig(Base):
    """A platform config key that differs between the environments of a diff row: its value
    in one of them (None: missing there)."""

    __tablename__ = "environment_diff_config"

    id: Mapped[int] = mapped_column(primary_key=True)
    workload: Mapped[str]
    cluster_type: Mapped[str]
    paired_target: Mapped[str | None]
    key: Mapped[str]
    environment: Mapped[str]
    environment_order: Mapped[int]
    value: Mapped[str | None]
