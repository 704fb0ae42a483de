"""Registered clusters (GET /api/v1/clusters, /clusters/{name}) and what registering, placing
and their tokens answer (admin)."""

from datetime import datetime
from typing import ClassVar

from pydantic import BaseModel, Field

from hub.client.schemas.base import Answer, Listing


class ClusterRegistration(BaseModel):
    name: str
    environment: str | None = None
    cluster_type: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class ClusterPlacement(BaseModel):
    environment: str
    cluster_type: str | None = None


class RegisteredCluster(Answer):
    """A cluster's token, shown once: only its hash is stored."""

    name: str
    token: str


class ClusterSummary(BaseModel):
    name: str
    environment: str | None
    cluster_type: str | None
    claimed_environment: str | None
    claimed_cluster_type: str | None
    labels: dict[str, str]
    registered_at: datetime
    first_seen_at: datetime | None
    last_seen_at: datetime | None
    stale: bool
    token_active: bool
    decommissioned_at: datetime | None
    objects: int
    ready: int
    failing: int


class ClusterPage(Listing):
    items: list[ClusterSummary]
    total: int
    limit: int
    offset: int


class ObjectStateOut(BaseModel):
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
    attempted_revision: str | None
    ready: bool | None
    reason: str | None
    message: str | None
    health: str | None
    drifted: bool
    suspended: bool
    last_transition_at: datetime | None
    changed_at: datetime


class SkippedKindOut(BaseModel):
    kind: str
    api_group: str
    reason: str


class AgentStatus(BaseModel):
    """The agent boot that reported last."""

    boot_id: str
    version: str
    instance: str
    started_at: datetime
    last_report_at: datetime
    sequence: int
    reports: int
    skipped_kinds: list[SkippedKindOut]


class ClusterDetail(Listing):
    """A cluster, its agent and its reconciler objects (a row each in `to_dataframe()`)."""

    rows: ClassVar[str] = "objects"

    name: str
    environment: str | None
    cluster_type: str | None
    claimed_environment: str | None
    claimed_cluster_type: str | None
    labels: dict[str, str]
    registered_at: datetime
    first_seen_at: datetime | None
    last_seen_at: datetime | None
    stale: bool
    token_active: bool
    decommissioned_at: datetime | None
    agent: AgentStatus | None
    objects: list[ObjectStateOut]
