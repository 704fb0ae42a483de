"""The fleet's state (GET /api/v1/fleet) and its deployment history (GET /api/v1/history): the
questions, which the hub's router takes as query models, and the answers."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from hub.client.params import Limit, Offset, Text, Timestamp
from hub.client.schemas.base import Answer, Listing


class FleetQuery(BaseModel):
    """GET /api/v1/fleet: where to count, and which page of clusters to list (the listing's
    `sort` is the hub's, which knows the columns)."""

    environment: Text | None = None
    cluster_type: Text | None = None
    limit: Limit = 100
    offset: Offset = 0


class HistoryQuery(BaseModel):
    """GET /api/v1/history: the changes of applied revisions to list, newest first."""

    model_config = ConfigDict(populate_by_name=True)

    environment: Text | None = None
    cluster_type: Text | None = None
    cluster: Text | None = None
    object_name: Annotated[
        Text | None, Field(alias="object", description="Reconciler object name.")
    ] = None
    since: Annotated[Timestamp | None, Field(description="Inclusive.")] = None
    until: Annotated[Timestamp | None, Field(description="Exclusive.")] = None
    limit: Limit = 100
    offset: Offset = 0


AgentStatus = Literal["reporting", "stale", "never_reported"]


class ObjectCounts(BaseModel):
    """Live reconciler objects by state; `drifted` is live drift, overlapping the states."""

    total: int
    ready: int
    failing: int
    progressing: int
    suspended: int
    drifted: int


class DriftCounts(BaseModel):
    """Drift as GET /api/v1/drift counts it: drifted objects, then per reason."""

    drift_total: int
    drift_behind: int
    drift_failing: int
    drift_stale: int
    drift_live: int
    drift_other: int


class GroupState(DriftCounts):
    clusters: int
    reporting: int
    stale: int
    never_reported: int
    drift_clusters: int
    objects: ObjectCounts


class ClusterTypeState(GroupState):
    name: str | None


class EnvironmentState(GroupState):
    name: str | None
    position: int | None
    cluster_types: list[ClusterTypeState]


class FleetCluster(DriftCounts):
    name: str
    environment: str | None
    cluster_type: str | None
    first_seen_at: datetime | None
    last_seen_at: datetime | None
    agent: AgentStatus
    objects: ObjectCounts


class FleetClusterPage(Listing):
    items: list[FleetCluster]
    total: int
    limit: int
    offset: int


class FleetState(Answer):
    """Clusters and their objects by state, per environment and cluster type; a page of
    clusters (`clusters.to_dataframe()`)."""

    evaluated_at: datetime
    stale_after_seconds: int
    totals: GroupState
    environments: list[EnvironmentState]
    clusters: FleetClusterPage


class Deployment(BaseModel):
    """One change of what a reconciler object applied."""

    deployed_at: datetime
    cluster: str
    environment: str | None
    cluster_type: str | None
    reconciler: str
    kind: str
    namespace: str
    name: str
    source_url: str | None
    source_ref: str | None
    source_path: str | None
    applied_revision: str | None
    applied_sha: str | None
    applied_version: str | None
    previous_revision: str | None
    previous_sha: str | None
    previous_version: str | None
    ready: bool | None
    reason: str | None


class DeploymentPage(Listing):
    """Newest first; `next_offset` is where the next page starts (None on the last)."""

    items: list[Deployment]
    limit: int
    offset: int
    next_offset: int | None
