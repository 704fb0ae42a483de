"""How environments differ (GET /api/v1/diff): per workload and cluster type, what each
environment is meant to run and what its clusters run, with each difference and its reason:
the question, which the hub's router takes as a query model, and the answer."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from hub.client.params import Limit, Offset, Text, TextList
from hub.client.schemas.base import Answer, Listing


class DiffOptions(BaseModel):
    """Which rows of the environments' diff to list (the listing's `sort` is the hub's, which
    knows the columns)."""

    model_config = ConfigDict(populate_by_name=True)

    workload: Text | None = None
    cluster_type: Text | None = None
    deployment_target: Annotated[
        Text | None,
        Field(description="Rows where this target is assigned: <workload>-<target> or <target>."),
    ] = None
    only_differences: Annotated[
        bool,
        Field(
            description="Only rows that differ: an assignment in some environments only, "
            "another desired version or pin, a config key, or clusters that do not run what "
            "their environment is meant to (failed, drifted)."
        ),
    ] = True
    ignored_keys: Annotated[
        TextList | None,
        Field(alias="ignore_key", description="Platform config keys not to compare (repeatable)."),
    ] = None
    limit: Limit = 100
    offset: Offset = 0


class _Environments(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    environments: Annotated[
        TextList,
        Field(
            alias="environment",
            description="Two or more environments, each once; rows show them in this order. "
            "Versions are compared in promotion order: the declared one, or this one.",
        ),
    ]


# The environments first, as the API has always listed them.
class DiffQuery(DiffOptions, _Environments):
    """GET /api/v1/diff: the environments to compare, and which rows to list."""


class DifferenceKind(StrEnum):
    ASSIGNMENT = "assignment"
    VERSION = "version"
    CONFIG = "config"
    DEPLOYMENT = "deployment"


class Reason(StrEnum):
    """Why environments differ."""

    NOT_ASSIGNED = "not_assigned"
    AWAITING_PROMOTION = "awaiting_promotion"
    PINNED = "pinned"
    DIVERGED = "diverged"
    CONFIG = "config"
    FAILED = "failed"
    DRIFTED = "drifted"


class CellState(StrEnum):
    """What an environment's clusters run for the assignment, in a word."""

    NOT_ASSIGNED = "not_assigned"
    NO_CLUSTERS = "no_clusters"
    FAILING = "failing"
    DRIFTED = "drifted"
    NOT_REPORTING = "not_reporting"
    IN_SYNC = "in_sync"


class AppSource(BaseModel):
    repository: str | None
    branch: str | None
    path: str | None
    pinned_ref: str | None
    commit: str | None


class Desired(BaseModel):
    version: str | None
    version_source: str | None
    images: list[str]
    manifest_digest: str | None
    manifests_commit: str | None
    manifests_committed_at: datetime | None


class DeployedVersion(BaseModel):
    version: str | None
    commit: str | None
    clusters: int


class Deployed(BaseModel):
    clusters: int
    in_sync: int
    drifted: int
    failing: int
    live_drift: int
    not_reporting: int
    versions: list[DeployedVersion]


class EnvironmentCell(BaseModel):
    environment: str
    state: CellState
    assigned: bool
    deployment_target: str | None
    namespace: str | None
    platform_commit: str | None
    app: AppSource | None
    desired: Desired | None
    config: dict[str, str]
    deployed: Deployed | None


class Difference(BaseModel):
    kind: DifferenceKind
    reason: Reason
    detail: str
    environment: str | None
    compared_with: str | None
    key: str | None
    values: dict[str, str | None] | None


class DiffRow(BaseModel):
    workload: str
    cluster_type: str
    deployment_target: str | None
    environments: list[EnvironmentCell]
    differences: list[Difference]


class DiffRowPage(Listing):
    items: list[DiffRow]
    total: int
    limit: int
    offset: int


class DiffFilters(BaseModel):
    workload: str | None
    cluster_type: str | None
    deployment_target: str | None
    only_differences: bool
    ignored_keys: list[str]


class EnvironmentDiff(Answer):
    """The rows (`rows.to_dataframe()`), each environment's cell in `environments` order."""

    environments: list[str]
    promotion_order: list[str]
    evaluated_at: datetime
    deployed_at: datetime | None
    filters: DiffFilters
    rows: DiffRowPage
