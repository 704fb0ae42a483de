"""API shapes of the promotion gate: its verdict with the evidence."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hub.client.schemas.suspects import Halt
from hub.gate.policy import ClusterState, Verdict
from hub.git.urls import RedactedText, RedactedUrl


class GateAssignment(BaseModel):
    """An assignment that makes a cluster type expected for a workload version."""

    cluster_type: str
    deployment_target: str
    repository: RedactedUrl | None = Field(
        description="The app GitOps repository (normalised URL)."
    )
    branch: str | None
    path: str | None


class GateTarget(BaseModel):
    kind: Literal["platform_commit", "workload_version"]
    environment: str
    description: str = Field(description="The target in words, as the reasons name it.")
    repository: RedactedUrl | None = Field(
        default=None, description="The platform GitOps repository (normalised URL)."
    )
    branch: str | None = Field(default=None, description="The environment's platform branch.")
    commit: str | None = Field(default=None, description="Full sha of the platform commit.")
    workload: str | None = None
    version: str | None = None
    assignments: list[GateAssignment] = Field(
        default_factory=list, description="For a workload version: its current assignments."
    )


class GateOptionsOut(BaseModel):
    soak_seconds: float
    stale_after_seconds: float
    allow_stale: bool
    min_clusters: int
    min_converged_ratio: float | None = Field(description="null: every expected cluster.")
    max_time_to_converge_seconds: float | None = Field(description="null: no deadline.")
    halt_on_regression: bool = Field(
        default=False,
        description="The environment halts the promotion of its clear suspects "
        "(FLEETMARK_HALT_ON_REGRESSION).",
    )


class GateCounts(BaseModel):
    expected: int
    reporting: int = Field(description="Expected clusters that reported within stale_after.")
    stale: int
    never_reported: int
    compliant: int
    by_state: dict[ClusterState, int] = Field(
        description="Expected clusters per state, every state listed."
    )


class HarvestedBranch(BaseModel):
    repository: RedactedUrl
    branch: str
    head_sha: str | None
    harvested_at: datetime | None = Field(description="When the harvester last read the branch.")


class Freshness(BaseModel):
    oldest_report_at: datetime | None = Field(
        description="When the expected cluster silent longest (of those that ever reported) "
        "last reported."
    )
    harvested: list[HarvestedBranch] = Field(
        description="The branches whose desired state and history the answer read."
    )


class GateCluster(BaseModel):
    name: str
    cluster_type: str | None
    state: ClusterState
    explanation: RedactedText
    object: str | None = Field(
        description="The reconciler object judged (<reconciler>/<kind>/<namespace>/<name>); "
        "None when none tracks the target's source."
    )
    last_seen_at: datetime | None
    applied_revision: str | None
    attempted_revision: str | None
    ready: bool | None
    ready_since: datetime | None
    soak_ends_at: datetime | None
    soak_remaining_seconds: float | None
    reason: str | None
    message: RedactedText | None


class GateClusterPage(BaseModel):
    items: list[GateCluster] = Field(
        description="Furthest from compliance first (failed, never reported, stale, unknown "
        "revision, not applied, not ready, soaking, compliant), then by name."
    )
    total: int = Field(description="Every expected cluster.")
    limit: int
    offset: int


class GateResult(BaseModel):
    target: GateTarget
    verdict: Verdict
    reasons: list[RedactedText]
    evaluated_at: datetime
    earliest_pass_at: datetime | None = Field(
        description="When the gate opens (the last soak end) if clusters keep reporting; None "
        "when it cannot without new facts."
    )
    reports_needed: list[str] = Field(
        description="Without allow_stale: the clusters whose newest report goes stale before "
        "earliest_pass_at, oldest report first (at most 20): the gate opens then only if they "
        "report again."
    )
    reports_needed_count: int = Field(description="How many clusters reports_needed stands for.")
    options: GateOptionsOut
    counts: GateCounts
    freshness: Freshness
    clusters: GateClusterPage
    halt: Halt | None = Field(
        default=None,
        description="The halt that fails the gate, whatever the clusters (docs/suspects.md).",
    )


class Promotable(BaseModel):
    environment: str
    commit: str | None = Field(description="The newest platform commit that passes; None if none.")
    examined: int = Field(description="How many commits of the chain were evaluated.")
    reason: str
    gate: GateResult | None = Field(description="The passing gate's evidence.")


DECISION_SCHEMA: Literal["fleetmark.gate.decision/v1"] = "fleetmark.gate.decision/v1"


class DecisionCounts(BaseModel):
    expected: int = Field(description="Clusters the gate expects to run the target.")
    compliant: int = Field(description="Expected clusters that run it, Ready and soaked.")
    failed: int = Field(description="Expected clusters that attempted it and failed.")
    reporting: int = Field(description="Expected clusters that reported within stale_after.")
    stale: int
    never_reported: int


class PromotionDecision(BaseModel):
    """The gate's answer as a promotion engine reads it (fleetmark.gate.decision/v1). v1 does
    not change: a field added, renamed, retyped or meaning otherwise is a new version."""

    # `schema` is always answered, so the document says it is required.
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    decision_schema: Literal["fleetmark.gate.decision/v1"] = Field(
        default=DECISION_SCHEMA, alias="schema"
    )
    allowed: bool = Field(description="True when the verdict is passed, and only then.")
    verdict: Verdict
    reason: RedactedText = Field(description="Why, in one sentence.")
    opens_at: datetime | None = Field(
        description="While the clusters soak (pending, only time left): when the gate opens if "
        "they keep reporting; otherwise None."
    )
    evidence_url: str = Field(
        description="The hub's gate page for the same question, with every expected cluster's "
        "evidence."
    )
    counts: DecisionCounts


class GateEventData(BaseModel):
    """`data` of fleetmark.gate.passed, .failed and .pending: a kept gate's verdict changed."""

    environment: str
    target: GateTarget
    verdict: Verdict
    previous_verdict: Verdict | None = Field(
        description="The kept verdict before; null: the target is judged for the first time."
    )
    reasons: list[str]
    counts: DecisionCounts
    evidence_url: str = Field(description="The hub's gate page for the same question.")


GATE_EVENTS: dict[str, type[BaseModel]] = {
    f"fleetmark.gate.{verdict.value}": GateEventData for verdict in Verdict
}
