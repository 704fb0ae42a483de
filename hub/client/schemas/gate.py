"""The promotion gate (GET /api/v1/gates/promotion), the same gate as a promotion engine reads
it (GET /api/v1/gates/decision) and the newest platform commit that passes it
(GET /api/v1/environments/{environment}/promotable): the questions, which the hub's router
takes as query models, and the answers."""

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from hub.client.params import Count, Limit, Offset, Text, TextList
from hub.client.schemas.base import Answer, Listing
from hub.client.schemas.suspects import Halt
from hub.client.text import Duration

DEFAULT_SOAK = timedelta(minutes=10)
# How far back `promotable` walks the environment branch at most.
MAX_PROMOTABLE_COMMITS = 500


class GateOptions(BaseModel):
    """What both gate questions take: how the gate judges, and which expected clusters it lists
    (the listing's `sort` is the hub's, which knows the columns)."""

    model_config = ConfigDict(populate_by_name=True)

    soak: Annotated[
        Duration,
        Field(
            description="How long every expected cluster must have run the target, Ready: "
            "seconds (600), ISO 8601 (PT10M) or 10m, 1h30m.",
        ),
    ] = DEFAULT_SOAK
    allow_stale: Annotated[
        bool,
        Field(description="Judge a silent cluster on its last report instead of blocking on it."),
    ] = False
    min_clusters: Annotated[
        Count, Field(description="Pending unless at least this many clusters are expected.")
    ] = 1
    min_converged_ratio: Annotated[
        float | None,
        Field(
            gt=0,
            le=1,
            description="Pass once this share of the expected clusters is compliant (none "
            "failed), instead of all of them: 0.9 for 90%.",
        ),
    ] = None
    max_time_to_converge: Annotated[
        Duration | None,
        Field(
            description="Fail when this long after the target's commit time fewer expected "
            "clusters run it Ready than the gate requires: as soak takes it.",
        ),
    ] = None
    cluster_types: Annotated[
        TextList | None,
        Field(
            alias="cluster_type",
            description="Only the expected clusters of this cluster type; repeatable (any of "
            "them).",
        ),
    ] = None
    selector: Annotated[
        Text | None,
        Field(
            description="Only the expected clusters whose labels it selects, as kubectl's -l: "
            "key=value,key!=value,key in (a,b),key notin (a),key,!key.",
        ),
    ] = None
    limit: Annotated[
        Limit,
        Field(
            description="Expected clusters listed with their evidence, furthest from "
            "compliance first; the counts cover them all.",
        ),
    ] = 100
    offset: Annotated[Offset, Field(description="Expected clusters skipped before the list.")] = 0


class TargetQuery(BaseModel):
    """What the gate is asked about: a platform commit or a workload version (in an
    environment, which the pages ask for apart)."""

    commit: Annotated[
        Text | None, Field(description="A platform GitOps commit: full sha or a prefix of 7+.")
    ] = None
    workload: Text | None = None
    version: Annotated[Text | None, Field(description="With workload: its version.")] = None


class _InEnvironment(BaseModel):
    environment: Annotated[Text, Field(description="The environment the target is in.")]


# The target's parameters first, as the API has always listed them.
class GateQuery(GateOptions, TargetQuery, _InEnvironment):
    """GET /api/v1/gates/promotion: may the platform commit (or the workload version) leave the
    environment?"""


class PromotableQuery(GateOptions):
    """GET /api/v1/environments/{environment}/promotable: the newest commit of the
    environment's platform branch whose gate passes."""

    max_commits: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_PROMOTABLE_COMMITS,
            description="How many commits of the branch to walk back at most.",
        ),
    ] = 50


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
    min_converged_ratio: float | None
    max_time_to_converge_seconds: float | None
    halt_on_regression: bool = False


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
    halt: Halt | None = None


class Promotable(Answer):
    """The newest platform commit of the environment whose gate passes, with its evidence."""

    environment: str
    commit: str | None
    examined: int
    reason: str
    gate: GateResult | None


class DecisionCounts(Answer):
    expected: int
    compliant: int
    failed: int
    reporting: int
    stale: int
    never_reported: int


class PromotionDecision(Answer):
    """The gate as a promotion engine reads it (fleetmark.gate.decision/v1): `allowed` only when
    passed, why in one sentence, and the page with the evidence."""

    decision_schema: Literal["fleetmark.gate.decision/v1"] = Field(alias="schema")
    allowed: bool
    verdict: Verdict
    reason: str
    opens_at: datetime | None
    evidence_url: str
    counts: DecisionCounts
