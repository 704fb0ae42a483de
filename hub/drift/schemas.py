"""API shapes of drift: the drifted objects with their reasons and evidence, and drift history."""

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from hub.git.urls import RedactedText, RedactedUrl


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
    """What the object follows, as its agent reported it (for a Flux object that names a source
    object, that object's URL and ref)."""

    url: RedactedUrl | None
    ref: str | None
    path: str | None


class Desired(BaseModel):
    """The harvested branch the object follows and its head: what it should run."""

    repository: RedactedUrl = Field(description="Normalised URL of the harvested repository.")
    branch: str
    head_sha: str | None


class ConfigMismatch(BaseModel):
    """An assignment of the cluster's type whose platform config at the applied platform commit
    differs from the one at the head."""

    deployment_target: str
    applied_config_hash: str | None = Field(
        description="None: the assignment did not exist at the applied commit."
    )
    desired_config_hash: str | None
    keys: list[str] = Field(description="Config keys whose values differ.")


class DriftReason(BaseModel):
    """One reason with its evidence; fields that do not concern the reason are None."""

    reason: Reason
    detail: RedactedText = Field(description="The reason in words, with its evidence.")
    commits: int | None = Field(
        default=None, description="behind: commits of the branch not applied yet."
    )
    since: datetime | None = Field(
        default=None,
        description="behind: commit time of the oldest commit not applied yet; "
        "stale: when the agent last reported.",
    )
    seconds: float | None = Field(
        default=None,
        description="behind: seconds since `since`; stale: seconds the agent has been silent.",
    )
    reconciler_reason: str | None = Field(default=None, description="failing: the Ready reason.")
    message: RedactedText | None = Field(default=None, description="failing: the Ready message.")
    config: list[ConfigMismatch] | None = Field(default=None, description="config_mismatch.")


class DriftItem(BaseModel):
    """A reconciler object of a cluster, or a cluster whose agent has reported no object
    (`object` None), as the drift job last judged it."""

    cluster: str
    environment: str | None
    cluster_type: str | None
    object: ObjectRef | None
    source: ObjectSource | None
    desired: Desired | None = Field(
        description="None: the object follows no harvested repository branch (revision "
        "`untracked`), so whether it is behind cannot be told."
    )
    revision: Revision | None = Field(
        description="How the applied revision compares with the head: at_head; ahead (a "
        "descendant of the head, harvested on another branch); behind; diverged (harvested, "
        "but neither the head, an ancestor nor a descendant of it); unknown_revision (a commit "
        "not harvested, e.g. newer than the last harvest, or a revision of no known form); "
        "not_applied (nothing applied yet); "
        "no_commit (a chart version or digest, not comparable); untracked."
    )
    applied_revision: str | None
    applied_sha: str | None
    ready: bool | None
    suspended: bool | None
    agent: AgentStatus
    last_seen_at: datetime | None = Field(description="When its agent last reported (hub time).")
    drifted: bool
    drifted_since: datetime | None = Field(
        description="Start of the current drift period (drift history), when there is one."
    )
    reasons: list[DriftReason]


class EnvironmentDrift(BaseModel):
    environment: str | None = Field(description="None: clusters not placed in an environment.")
    position: int | None
    objects: int = Field(description="Rows listed (objects, or clusters without one).")
    clusters: int = Field(description="Clusters with rows listed.")
    reasons: dict[Reason, int] = Field(description="Rows with each reason.")


class DriftSummary(BaseModel):
    """Counts over every row matching the filters, not only the page."""

    objects: int = Field(description="Rows listed: `total`.")
    clusters: int = Field(description="Clusters with rows listed.")
    drifted_objects: int
    drifted_clusters: int
    reasons: dict[Reason, int] = Field(description="Rows with each reason; a row may have several.")
    environments: list[EnvironmentDrift] = Field(
        description="Every environment with clusters in scope, in promotion order."
    )
    untracked: int = Field(
        description="Objects of the clusters in scope that follow no harvested repository "
        "branch, drifted or not: never judged behind, listed when drifted otherwise or with "
        "include_in_sync."
    )


class DriftReport(BaseModel):
    evaluated_at: datetime | None = Field(
        description="When the drift job last judged the fleet; None: not yet. Reasons other than "
        "stale are as of then."
    )
    now: datetime = Field(description="The hub's time, against which staleness is judged.")
    stale_after_seconds: int
    summary: DriftSummary
    items: list[DriftItem] = Field(
        description="In promotion order, then by cluster type, cluster and object."
    )
    total: int
    limit: int
    offset: int


class DriftPeriod(BaseModel):
    started_at: datetime = Field(description="The first evaluation that found it drifted.")
    ended_at: datetime | None = Field(description="The first that found it in sync; None: open.")
    seconds: float = Field(description="Its length, up to now while it is open.")
    reasons: list[Reason] = Field(description="Every reason seen while it was open.")


class DriftSubject(BaseModel):
    """A cluster (`object` None) or one of its objects, with its drift periods in the range."""

    cluster: str
    environment: str | None
    cluster_type: str | None
    object: ObjectRef | None
    drifted_seconds: float = Field(description="Time drifted within the range.")
    open: bool = Field(description="Drifted now.")
    periods: list[DriftPeriod] = Field(description="Newest first.")


class DriftHistory(BaseModel):
    now: datetime
    since: datetime | None = Field(description="Start of the range; None: all history.")
    until: datetime
    level: Literal["cluster", "object"]
    items: list[DriftSubject] = Field(
        description="In promotion order, then by cluster type, cluster and object."
    )
    total: int
    limit: int
    offset: int


# The clusters an event lists at most; `count` says how many there are.
LISTED_CLUSTERS = 100


class DriftEventData(BaseModel):
    """`data` of fleetmark.drift.started and .resolved: a cluster's drift outlived the grace in
    an environment, or none of its clusters is drifted any more."""

    environment: str
    since: datetime = Field(description="When the drift of the listed clusters was first seen.")
    clusters: list[str] = Field(
        description=f"The clusters drifted longer than the grace (the first {LISTED_CLUSTERS}); "
        "none once resolved."
    )
    count: int = Field(description="How many clusters are drifted longer than the grace.")
    evidence_url: str = Field(description="The hub's drift page for the environment.")


class StaleEventData(BaseModel):
    """`data` of fleetmark.cluster.stale and .recovered: clusters of an environment went
    silent (no report within stale_after), or reported again."""

    environment: str
    clusters: list[str] = Field(description=f"The clusters (the first {LISTED_CLUSTERS}).")
    count: int = Field(description="How many clusters went stale (or recovered).")
    stale_after_seconds: int
    evidence_url: str = Field(
        description="The hub's fleet page for the environment: its clusters' last reports."
    )


DRIFT_EVENTS: dict[str, type[BaseModel]] = {
    "fleetmark.drift.started": DriftEventData,
    "fleetmark.drift.resolved": DriftEventData,
    "fleetmark.cluster.stale": StaleEventData,
    "fleetmark.cluster.recovered": StaleEventData,
}
