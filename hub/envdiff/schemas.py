"""API shapes of the environment diff."""

from datetime import datetime

from pydantic import BaseModel, Field

from hub.envdiff.compare import CellState, DifferenceKind, Reason
from hub.git.urls import RedactedUrl


class AppSource(BaseModel):
    """What the assignment's reconciler follows in the application GitOps repository."""

    repository: RedactedUrl | None = Field(description="Normalised URL.")
    branch: str | None = Field(description="None: the repository's default branch.")
    path: str | None
    pinned_ref: str | None = Field(
        description="The fixed revision followed instead of the branch head (a commit, "
        "refs/tags/<tag>, semver:<range>), as agents report it; None: the branch head."
    )
    commit: str | None = Field(
        description="Head of the branch as harvested: the commit clusters should apply."
    )


class Desired(BaseModel):
    """What the app source's manifests carry at the head of the app branch."""

    version: str | None = Field(
        description="None when pinned, or when the manifests are not harvested."
    )
    version_source: str | None = Field(description="descriptor, label or image.")
    images: list[str]
    manifest_digest: str | None
    manifests_commit: str | None = Field(description="The app commit that brought them.")
    manifests_committed_at: datetime | None


class DeployedVersion(BaseModel):
    version: str | None = Field(description="None: not known for this commit.")
    commit: str | None = Field(description="The applied commit, when its version is unknown.")
    clusters: int


class Deployed(BaseModel):
    """The clusters of the environment's cluster type and what they run for the assignment."""

    clusters: int = Field(description="Registered clusters of the cluster type.")
    in_sync: int = Field(description="Running the desired version, not failing, no live drift.")
    drifted: int = Field(description="Another version, live drift, or suspended; not failing.")
    failing: int = Field(description="Reconciliation failing.")
    live_drift: int = Field(description="Argo CD OutOfSync or Flux Drifted; overlaps the above.")
    not_reporting: int = Field(
        description="Clusters that report no object following the assignment (never reported, "
        "or not reconciling it yet). A cluster with two objects on one assignment at different "
        "revisions counts under each."
    )
    versions: list[DeployedVersion] = Field(description="Most clusters first.")


class EnvironmentCell(BaseModel):
    environment: str
    state: CellState
    assigned: bool
    deployment_target: str | None = Field(description="Full name, <workload>-<target>.")
    namespace: str | None
    platform_commit: str | None = Field(
        description="Head of the environment's platform branch as harvested."
    )
    app: AppSource | None
    desired: Desired | None
    config: dict[str, str] = Field(description="The composed platform config.")
    deployed: Deployed | None


class Difference(BaseModel):
    kind: DifferenceKind
    reason: Reason
    detail: str = Field(description="The difference in words.")
    environment: str | None = Field(
        description="The environment it is about; None for a config key."
    )
    compared_with: str | None = Field(
        description="For a version: the environment before it in promotion order."
    )
    key: str | None = Field(description="For config: the key.")
    values: dict[str, str | None] | None = Field(
        description="For config: the value per environment that has the assignment "
        "(None: the key is missing there)."
    )


class DiffRow(BaseModel):
    workload: str
    cluster_type: str
    deployment_target: str | None = Field(
        description="Set when the row pairs environments by deployment target: one "
        "environment has several of the workload's targets on this cluster type."
    )
    environments: list[EnvironmentCell] = Field(description="In promotion order.")
    differences: list[Difference]


class DiffRowPage(BaseModel):
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


class EnvironmentDiff(BaseModel):
    environments: list[str] = Field(
        description="The order of each row's cells: the promotion order, whatever the order "
        "asked for when every environment has a declared position."
    )
    promotion_order: list[str] = Field(
        description="The order versions are compared in: the declared one when every "
        "environment has a position, else the order asked for."
    )
    evaluated_at: datetime
    deployed_at: datetime | None = Field(
        description="What clusters run is as of this time: the hub sums it up every "
        "env_diff_interval. None: nothing summed up yet."
    )
    filters: DiffFilters
    rows: DiffRowPage
