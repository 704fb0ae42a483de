"""API shapes of the DORA queries: figures per environment, and the rollouts behind them."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from hub.git.urls import RedactedText, RedactedUrl

Subject = Literal["platform_commits", "workload_versions"]


class Spread(BaseModel):
    """Durations in seconds; None when there is nothing to measure."""

    median_seconds: float | None
    p90_seconds: float | None = Field(
        description="90th percentile, interpolated linearly between the closest ranks."
    )
    mean_seconds: float | None


class EnvironmentDora(BaseModel):
    environment: str
    position: int | None = Field(description="Order in the promotion chain, when declared.")
    deployments: int = Field(
        description="Rollouts completed in the range: every expected cluster Ready at the "
        "revision or a later one."
    )
    deployments_per_day: float
    lead_time: Spread = Field(
        description="Commit time to completion, over the deployments completed in the range."
    )
    rollouts_started: int
    rollouts_failed: int = Field(
        description="Rollouts started in the range on which an expected cluster failed to "
        "reconcile the revision before it completed."
    )
    change_failure_rate: float | None = Field(
        description="rollouts_failed / rollouts_started; None without rollouts started."
    )
    in_progress: int = Field(description="Rollouts started in the range, not completed by its end.")
    restored: int
    unrestored: int
    time_to_restore: Spread = Field(
        description="From the first failure of a failed rollout to every cluster Ready again."
    )


class DoraReport(BaseModel):
    since: datetime = Field(description="Inclusive.")
    until: datetime = Field(description="Exclusive.")
    evaluated_at: datetime | None = Field(
        description="When the DORA job last refreshed the rollup the rollouts are read from; "
        "what happened later is not seen yet. None: not refreshed yet, so the rollouts were "
        "judged from the transitions for this answer, as of now."
    )
    now: datetime = Field(description="The hub's time; the range's end defaults to it.")
    subject: Subject
    workload: str | None
    environments: list[EnvironmentDora] = Field(description="In promotion order.")


class DoraDeployment(BaseModel):
    """A rollout the figures count: a deployment once completed."""

    environment: str
    subject: Subject
    workload: str | None
    revision: str = Field(description="The platform commit, or the workload version.")
    commit: str = Field(
        description="The commit that brought the revision: the platform commit, or the first "
        "app commit that carried the version."
    )
    repository: RedactedUrl | None = Field(
        description="The platform repository; None for a version."
    )
    branch: str | None
    committed_at: datetime
    started_at: datetime = Field(description="A cluster first attempted or applied it.")
    completed_at: datetime | None = Field(description="The last expected cluster reached it.")
    lead_time_seconds: float | None
    expected_clusters: int
    reached_clusters: int
    failed_at: datetime | None = Field(description="First failure before completion.")
    failed_clusters: int
    failed_cluster: str | None = Field(description="The cluster that failed first.")
    failure_reason: str | None
    failure_message: RedactedText | None
    restored_at: datetime | None = Field(description="Every cluster Ready again after failing.")
    time_to_restore_seconds: float | None
    completed_in_range: bool = Field(description="Counts in deployment frequency and lead time.")
    started_in_range: bool = Field(description="Counts in change failure rate and time to restore.")


class DoraDeploymentPage(BaseModel):
    """By environment in promotion order, newest rollout first."""

    since: datetime
    until: datetime
    evaluated_at: datetime | None = Field(
        description="When the DORA job last refreshed the rollup the rollouts are read from; "
        "what happened later is not seen yet. None: not refreshed yet, so the rollouts were "
        "judged from the transitions for this answer, as of now."
    )
    now: datetime = Field(description="The hub's time; the range's end defaults to it.")
    subject: Subject
    workload: str | None
    items: list[DoraDeployment]
    total: int
    limit: int
    offset: int
