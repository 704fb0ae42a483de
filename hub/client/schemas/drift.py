"""Drift (GET /api/v1/drift): the drifted objects with their reasons and evidence; and drift
history (GET /api/v1/drift/history): how long each cluster or object was drifted. The questions,
which the hub's router takes as query models, and the answers."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from hub.client.params import MAX_REPEATED, Limit, Offset, Text, Timestamp
from hub.client.schemas.base import Listing


class Reason(StrEnum):
    """Why an object is drifted, in the order they are listed."""

    BEHIND = "behind"
    DIVERGED = "diverged"
    UNKNOWN_REVISION = "unknown_revision"
    NOT_APPLIED = "not_applied"
    FAILING = "failing"
    STALE = "stale"
    CONFIG_MISMATCH = "config_mismatch"
    LIVE_DRIFT = "live_drift"


class DriftQuery(BaseModel):
    """GET /api/v1/drift: the reconciler objects to list with their reasons (the listing's
    `sort` is the hub's, which knows the columns)."""

    model_config = ConfigDict(populate_by_name=True)

    environment: Text | None = None
    cluster_type: Text | None = None
    cluster: Text | None = None
    reasons: Annotated[
        Annotated[list[Reason], Field(max_length=MAX_REPEATED)] | None,
        Field(alias="reason", description="Only rows with any of these reasons (repeatable)."),
    ] = None
    include_in_sync: Annotated[
        bool, Field(description="Also list the objects that are not drifted.")
    ] = False
    limit: Limit = 100
    offset: Offset = 0


class DriftHistoryQuery(BaseModel):
    """GET /api/v1/drift/history: whose drift periods to list, over which range."""

    model_config = ConfigDict(populate_by_name=True)

    environment: Text | None = None
    cluster_type: Text | None = None
    cluster: Text | None = None
    level: Annotated[
        Literal["cluster", "object"],
        Field(description="Periods of whole clusters, or of each reconciler object."),
    ] = "cluster"
    since: Annotated[Timestamp | None, Field(description="Inclusive; none: all.")] = None
    until: Annotated[Timestamp | None, Field(description="Exclusive; none: now.")] = None
    open_only: Annotated[
        bool, Field(alias="open", description="Only periods still open: drifted now.")
    ] = False
    limit: Limit = 100
    offset: Offset = 0


Revision = Literal[
    "at_head",
    "ahead",
    "behind",
    "diverged",
    "unknown_revision",
    "not_applied",
    "no_commit",
    "untracked",
]
AgentStatus = Literal["reporting", "stale", "never_reported"]


class ObjectRef(BaseModel):
    reconciler: str
    kind: str
    namespace: str
    name: str


class ObjectSource(BaseModel):
    url: str | None
    ref: str | None
    path: str | None


class Desired(BaseModel):
    """The harvested branch the object follows and its head."""

    repository: str
    branch: str
    head_sha: str | None


class ConfigMismatch(BaseModel):
    deployment_target: str
    applied_config_hash: str | None
    desired_config_hash: str | None
    keys: list[str]


class DriftReason(BaseModel):
    """One reason with its evidence; fields that do not concern the reason are None."""

    reason: Reason
    detail: str
    commits: int | None = None
    since: datetime | None = None
    seconds: float | None = None
    reconciler_reason: str | None = None
    message: str | None = None
    config: list[ConfigMismatch] | None = None


class DriftItem(BaseModel):
    """A reconciler object of a cluster (or a cluster without one) as last judged."""

    cluster: str
    environment: str | None
    cluster_type: str | None
    object: ObjectRef | None
    source: ObjectSource | None
    desired: Desired | None
    revision: Revision | None
    applied_revision: str | None
    applied_sha: str | None
    ready: bool | None
    suspended: bool | None
    agent: AgentStatus
    last_seen_at: datetime | None
    drifted: bool
    drifted_since: datetime | None
    reasons: list[DriftReason]


class EnvironmentDrift(BaseModel):
    environment: str | None
    position: int | None
    objects: int
    clusters: int
    reasons: dict[Reason, int]


class DriftSummary(BaseModel):
    """Counts over every row matching the filters, not only the page."""

    objects: int
    clusters: int
    drifted_objects: int
    drifted_clusters: int
    reasons: dict[Reason, int]
    environments: list[EnvironmentDrift]
    untracked: int


class DriftReport(Listing):
    """A page of drifted objects (in sync ones too when asked), with the summary of all."""

    evaluated_at: datetime | None
    now: datetime
    stale_after_seconds: int
    summary: DriftSummary
    items: list[DriftItem]
    total: int
    limit: int
    offset: int


class DriftPeriod(BaseModel):
    started_at: datetime
    ended_at: datetime | None
    seconds: float
    reasons: list[Reason]


class DriftSubject(BaseModel):
    """A cluster (`object` None) or one of its objects, with its drift periods in the range."""

    cluster: str
    environment: str | None
    cluster_type: str | None
    object: ObjectRef | None
    drifted_seconds: float
    open: bool
    periods: list[DriftPeriod]


class DriftHistory(Listing):
    now: datetime
    since: datetime | None
    until: datetime
    level: Literal["cluster", "object"]
    items: list[DriftSubject]
    total: int
    limit: int
    offset: int
