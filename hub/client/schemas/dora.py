"""DORA figures per environment (GET /api/v1/dora) and the rollouts behind them
(GET /api/v1/dora/deployments)."""

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import BaseModel

from hub.client.schemas.base import Listing

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
