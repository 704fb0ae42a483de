"""DORA figures per environment (GET /api/v1/dora) and the rollouts behind them
(GET /api/v1/dora/deployments): the questions, which the hub's router takes as query models,
and the answers."""

from datetime import datetime
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from hub.client.params import Limit, Offset, Text, TextList, Timestamp
from hub.client.schemas.base import Listing


class DoraQuery(BaseModel):
    """What a DORA question names: environments (none: all of them), a workload (none: the
    platform commits) and the range."""

    model_config = ConfigDict(populate_by_name=True)

    environments: Annotated[
        TextList | None,
        Field(alias="environment", description="Repeat for several; absent: every environment."),
    ] = None
    workload: Annotated[
        Text | None,
        Field(description="Figures of this workload's versions instead of the platform commits."),
    ] = None
    since: Annotated[
        Timestamp | None, Field(description="Inclusive; default: 30 days before until.")
    ] = None
    until: Annotated[
        Timestamp | None,
        Field(description="Exclusive; default: now. Facts from then on are not seen."),
    ] = None


class _Page(BaseModel):
    limit: Limit = 100
    offset: Offset = 0


# The page's parameters first, as the API has always listed them.
class DoraDeploymentsQuery(DoraQuery, _Page):
    """GET /api/v1/dora/deployments: a page of the rollouts the figures count."""


Subject = Literal["platform_commits", "workload_versions"]


class Spread(BaseModel):
    """Durations in seconds; None when there is nothing to measure."""

    median_seconds: float | None
    p90_seconds: float | None
    mean_seconds: float | None


class EnvironmentDora(BaseModel):
    environment: str
    position: int | None
    deployments: int
    deployments_per_day: float
    lead_time: Spread
    rollouts_started: int
    rollouts_failed: int
    change_failure_rate: float | None
    in_progress: int
    restored: int
    unrestored: int
    time_to_restore: Spread


class DoraReport(Listing):
    """The figures of each environment in promotion order (a row each in `to_dataframe()`)."""

    rows: ClassVar[str] = "environments"

    since: datetime
    until: datetime
    evaluated_at: datetime | None
    now: datetime
    subject: Subject
    workload: str | None
    environments: list[EnvironmentDora]


class DoraDeployment(BaseModel):
    """A rollout the figures count: a deployment once completed."""

    environment: str
    subject: Subject
    workload: str | None
    revision: str
    commit: str
    repository: str | None
    branch: str | None
    committed_at: datetime
    started_at: datetime
    completed_at: datetime | None
    lead_time_seconds: float | None
    expected_clusters: int
    reached_clusters: int
    failed_at: datetime | None
    failed_clusters: int
    failed_cluster: str | None
    failure_reason: str | None
    failure_message: str | None
    restored_at: datetime | None
    time_to_restore_seconds: float | None
    completed_in_range: bool
    started_in_range: bool


class DoraDeploymentPage(Listing):
    """By environment in promotion order, newest rollout first."""

    since: datetime
    until: datetime
    evaluated_at: datetime | None
    now: datetime
    subject: Subject
    workload: str | None
    items: list[DoraDeployment]
    total: int
    limit: int
    offset: int
