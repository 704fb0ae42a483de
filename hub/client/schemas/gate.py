"""The promotion gate (GET /api/v1/gates/promotion) and the newest platform commit that passes
it (GET /api/v1/environments/{environment}/promotable)."""

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from hub.client.schemas.base import Answer, Listing


class Verdict(StrEnum):
    PASSED = "passed"
    PENDING = "pending"
    FAILED = "failed"


class ClusterState(StrEnum):
    """Where one expected cluster stands, furthest from compliance first."""

    FAILED = "failed"
    NEVER_REPORTED = "never_reported"
    STALE = "stale"
    UNKNOWN_REVISION = "unknown_revision"
    NOT_APPLIED = "not_applied"
    NOT_READY = "not_ready"
    SOAKING = "soaking"
    COMPLIANT = "compliant"


class GateAssignment(BaseModel):
    cluster_type: str
    deployment_target: str
    repository: str | None
    branch: str | None
    path: str | None


class GateTarget(BaseModel):
    kind: Literal["platform_commit", "workload_version"]
    environment: str
    description: str
    repository: str | None = None
    branch: str | None = None
    commit: str | None = None
    workload: str | None = None
    version: str | None = None
    assignments: list[GateAssignment] = Field(default_factory=list)


class GateOptionsOut(BaseModel):
    soak_seconds: float
    stale_after_seconds: float
    allow_stale: bool
    min_clusters: int


class GateCounts(BaseModel):
    expected: int
    reporting: int
    stale: int
    never_reported: int
    compliant: int
    by_state: dict[ClusterState, int]


class HarvestedBranch(BaseModel):
    repository: str
    branch: str
    head_sha: str | None
    harvested_at: datetime | None


class Freshness(BaseModel):
    oldest_report_at: datetime | None
    harvested: list[HarvestedBranch]


class GateCluster(BaseModel):
    name: str
    cluster_type: str | None
    state: ClusterState
    explanation: str
    object: str | None
    last_seen_at: datetime | None
    applied_revision: str | None
    attempted_revision: str | None
    ready: bool | None
    ready_since: datetime | None
    soak_ends_at: datetime | None
    soak_remaining_seconds: float | None
    reason: str | None
    message: str | None


class GateClusterPage(Listing):
    items: list[GateCluster]
    total: int
    limit: int
    offset: int


class GateResult(Answer):
    """passed, pending or failed, with the evidence of a page of the expected clusters
    (`clusters.to_dataframe()`), furthest from compliance first."""

    target: GateTarget
    verdict: Verdict
    reasons: list[str]
    evaluated_at: datetime
    earliest_pass_at: datetime | None
    reports_needed: list[str]
    reports_needed_count: int
    options: GateOptionsOut
    counts: GateCounts
    freshness: Freshness
    clusters: GateClusterPage


class Promotable(Answer):
    """The newest platform commit of the environment whose gate passes, with its evidence."""

    environment: str
    commit: str | None
    examined: int
    reason: str
    gate: GateResult | None
