"""Rollout health (GET /api/v1/rollouts): the current rollout of each workload and of the
platform commits per environment, as numbers; the question, which the hub's router takes as a
query model, and the answer."""

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from hub.client.params import Text, TextList
from hub.client.schemas.base import Answer, Listing


class RolloutHealthQuery(BaseModel):
    """Which current rollouts: of these environments (none: all) and this workload (none:
    the platform commits' and every workload's)."""

    model_config = ConfigDict(populate_by_name=True)

    environments: Annotated[
        TextList | None,
        Field(alias="environment", description="Repeat for several; absent: every environment."),
    ] = None
    workload: Annotated[
        Text | None, Field(description="Only this workload's rollouts, not the platform commits'.")
    ] = None


class TimeToConverge(BaseModel):
    """Per cluster, from the target's commit time (for a version: the app commit that first
    carried it) to when the cluster ran it Ready; across the clusters that did, in seconds."""

    p50_seconds: float | None = Field(description="None: no cluster converged yet.")
    p95_seconds: float | None = Field(
        description="95th percentile, interpolated linearly between the closest ranks."
    )
    max_seconds: float | None = Field(
        description="While not converged (max_open): the time so far, as of evaluated_at."
    )
    max_open: bool = Field(description="True while an expected cluster has not converged.")


class RolloutHealth(BaseModel):
    environment: str
    position: int | None = Field(description="Order in the promotion chain, when declared.")
    workload: str | None = Field(description="null: a platform commit.")
    revision: str = Field(description="The platform commit's sha, or the version.")
    commit: str
    committed_at: datetime
    started_at: datetime = Field(description="When the first expected cluster applied it.")
    state: str = Field(description="in_progress, stalled, failed or converged.")
    expected_clusters: int
    converged_clusters: int = Field(description="Expected clusters that ran it Ready.")
    converged_ratio: float | None = Field(description="converged / expected.")
    failed_clusters: int
    failed_cluster: str | None = Field(description="The first cluster that failed it.")
    failure_reason: str | None
    time_to_converge: TimeToConverge
    converged_at: datetime | None
    evaluated_at: datetime = Field(description="The DORA job's refresh the figures are as of.")


class RolloutHealthList(Listing):
    """The current rollout (the newest started) of each workload and of the platform commits
    in each environment, in promotion order."""

    items: list[RolloutHealth]


__all__ = ["Answer", "RolloutHealth", "RolloutHealthList", "RolloutHealthQuery", "TimeToConverge"]
