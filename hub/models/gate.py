"""Promotion gate: the answers kept for the newest platform commits and workload versions of
each environment (migration 0027_promotion_gates), which the promotion job writes with the
gate's own code and dashboards and alert rules read."""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, String, UniqueConstraint
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base


class GateAnswer(Base):
    """The gate's answer for one platform commit (workload None) or workload version in an
    environment, as of the promotion job's last run."""

    __tablename__ = "gate_answer"
    __table_args__ = (
        UniqueConstraint("environment", "workload", "revision", postgresql_nulls_not_distinct=True),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    environment: Mapped[str]
    environment_position: Mapped[int | None]
    # None: a platform commit.
    workload: Mapped[str | None] = mapped_column(String(253))
    # The platform commit's sha, or the version.
    revision: Mapped[str]
    # 1 for the newest commit of the environment's branch (or the workload's newest version).
    newest: Mapped[int]
    verdict: Mapped[str]
    reasons: Mapped[list[str]] = mapped_column(ARRAY(String))
    expected: Mapped[int]
    compliant: Mapped[int]
    stale: Mapped[int]
    never_reported: Mapped[int]
    # The clusters furthest from compliance that are not compliant (at most REASONS_NAMED):
    # name, cluster_type, state, explanation each.
    blocking: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    # Every expected cluster not compliant yet.
    blocking_count: Mapped[int]
    earliest_pass_at: Mapped[datetime | None]
    evaluated_at: Mapped[datetime]
