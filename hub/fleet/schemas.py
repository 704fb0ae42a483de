"""API shapes of the query endpoints."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from hub.git.urls import RedactedUrl

AgentStatus = Literal["reporting", "stale", "never_reported"]


class ObjectCounts(BaseModel):
    """Live reconciler objects by state; the four states add up to `total`."""

    total: int
    ready: int
    failing: int
    progressing: int = Field(description="Neither Ready nor failing: reconciling, or unknown.")
    suspended: int
    drifted: int = Field(
        description="Live drift (Argo CD OutOfSync, Flux Drifted); overlaps the states above. "
        "Every kind of drift: the drift_* counts."
    )


class DriftCounts(BaseModel):
    """Drift as `GET /api/v1/drift` counts it: drifted objects (every object of a stale
    cluster; one for a stale cluster without any), then per reason. An object can have
    several reasons, so the reasons may add up to more than the total."""

    drift_total: int = Field(description="Drifted objects: as the drift summary counts them.")
    drift_behind: int = Field(description="Behind the harvested head of what they follow.")
    drift_failing: int = Field(description="Failing reconciliation, as the drift job judged.")
    drift_stale: int = Field(description="Of clusters whose agent is stale or never reported.")
    drift_live: int = Field(description="Live drift: Argo CD OutOfSync, Flux Drifted.")
    drift_other: int = Field(
        description="Diverged, unknown revision, nothing applied or config mismatch."
    )


class GroupState(DriftCounts):
    clusters: int
    reporting: int = Field(description="Clusters that reported within the stale threshold.")
    stale: int = Field(description="Clusters that reported, but not within the stale threshold.")
    never_reported: int
    drift_clusters: int = Field(
        description="Clusters with a drifted object, or whose agent is stale: the drift "
        "summary's drifted_clusters."
    )
    objects: ObjectCounts


class ClusterTypeState(GroupState):
    name: str | None = Field(description="None: clusters not placed in a cluster type.")


class EnvironmentState(GroupState):
    name: str | None = Field(description="None: clusters not placed in an environment.")
    position: int | None = Field(description="Order in the promotion chain, when declared.")
    cluster_types: list[ClusterTypeState]


class FleetCluster(DriftCounts):
    name: str
    environment: str | None
    cluster_type: str | None
    first_seen_at: datetime | None
    last_seen_at: datetime | None
    agent: AgentStatus
    objects: ObjectCounts


class FleetClusterPage(BaseModel):
    items: list[FleetCluster]
    total: int
    limit: int
    offset: int


class FleetState(BaseModel):
    evaluated_at: datetime
    stale_after_seconds: int
    totals: GroupState
    environments: list[EnvironmentState] = Field(
        description="In promotion order; empty environments and cluster types included."
    )
    clusters: FleetClusterPage


class Deployment(BaseModel):
    """One change of what a reconciler object applied."""

    deployed_at: datetime = Field(description="When the agent observed the new revision.")
    cluster: str
    environment: str | None
    cluster_type: str | None
    reconciler: str
    kind: str
    namespace: str
    name: str
    source_url: RedactedUrl | None
    source_ref: str | None
    source_path: str | None
    applied_revision: str | None
    applied_sha: str | None
    applied_version: str | None
    previous_revision: str | None = Field(description="None on the first revision seen.")
    previous_sha: str | None
    previous_version: str | None
    ready: bool | None = Field(description="Readiness reported with the new revision.")
    reason: str | None


class DeploymentPage(BaseModel):
    """Newest first. No total: counting would read the whole history."""

    items: list[Deployment]
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; None on the last.")
