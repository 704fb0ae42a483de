"""API shapes for clusters."""

from datetime import datetime
from typing import Annotated

from pydantic import (
    BaseModel,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from hub.client.params import StorableText
from hub.git.urls import RedactedText, RedactedUrl

ClusterName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
]
DimensionName = Annotated[
    str, StringConstraints(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
]
DIMENSION_NAME_RULE = "lowercase letters, digits and '-', at most 63 characters"
_DIMENSION_NAME: TypeAdapter[str] = TypeAdapter(DimensionName)


def is_dimension_name(text: str) -> bool:
    """Whether registration takes `text` as an environment or cluster type name."""
    try:
        _DIMENSION_NAME.validate_python(text)
    except ValidationError:
        return False
    return True


class ClusterRegistration(BaseModel):
    name: ClusterName
    environment: DimensionName | None = None
    cluster_type: DimensionName | None = None
    labels: dict[StorableText, StorableText] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _cluster_type_needs_environment(self) -> "ClusterRegistration":
        if self.cluster_type is not None and self.environment is None:
            raise ValueError("cluster_type: a cluster type belongs to an environment; give both")
        return self


class ClusterPlacement(BaseModel):
    """Where a cluster counts: set by an admin, never by its agent's claim."""

    environment: DimensionName
    cluster_type: DimensionName | None = None


class RegisteredCluster(BaseModel):
    name: str
    token: str = Field(description="Shown once; only its hash is stored.")


class ClusterSummary(BaseModel):
    name: str
    environment: str | None
    cluster_type: str | None
    claimed_environment: str | None = Field(
        description="The environment the agent's latest report claims; it places nothing."
    )
    claimed_cluster_type: str | None = Field(
        description="The cluster type the agent's latest report claims; it places nothing."
    )
    labels: dict[str, str]
    registered_at: datetime
    first_seen_at: datetime | None
    last_seen_at: datetime | None
    stale: bool = Field(description="Registered, but no report within the stale threshold.")
    token_active: bool
    decommissioned_at: datetime | None = Field(
        description="When the cluster was decommissioned; None while it is in service."
    )
    objects: int
    ready: int
    failing: int


class ClusterPage(BaseModel):
    items: list[ClusterSummary]
    total: int
    limit: int
    offset: int


class ObjectStateOut(BaseModel):
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
    attempted_revision: str | None
    ready: bool | None
    reason: str | None
    message: RedactedText | None
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
    sequence: int = Field(description="The newest sequence number received from this boot.")
    reports: int
    skipped_kinds: list[SkippedKindOut] = Field(
        description="Kinds the agent could not watch (e.g. their CRD is absent)."
    )


class ClusterDetail(BaseModel):
    name: str
    environment: str | None
    cluster_type: str | None
    claimed_environment: str | None = Field(
        description="The environment the agent's latest report claims; it places nothing."
    )
    claimed_cluster_type: str | None = Field(
        description="The cluster type the agent's latest report claims; it places nothing."
    )
    labels: dict[str, str]
    registered_at: datetime
    first_seen_at: datetime | None
    last_seen_at: datetime | None
    stale: bool
    token_active: bool
    decommissioned_at: datetime | None = Field(
        description="When the cluster was decommissioned: no longer expected by the gate, "
        "drift, the environment diff or the dashboards; its history stays. None while it is in "
        "service."
    )
    agent: AgentStatus | None = Field(description="None until the first report.")
    objects: list[ObjectStateOut]
