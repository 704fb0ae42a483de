"""The rollouts' events: what a rollout's change of state tells subscribers."""

from datetime import datetime

from pydantic import BaseModel, Field

from hub.rollouts.policy import RolloutState


class RolloutEventData(BaseModel):
    """`data` of fleetmark.rollout.started, .converged, .failed and .stalled: a rollout of a
    platform commit or a workload version in an environment changed state."""

    environment: str
    workload: str | None = Field(description="null: a platform commit.")
    revision: str = Field(description="The platform commit's sha, or the version.")
    commit_sha: str
    state: RolloutState
    previous_state: RolloutState | None = Field(description="null: a rollout seen first.")
    expected_clusters: int
    reached_clusters: int
    failed_clusters: int
    started_at: datetime
    since: datetime = Field(description="When it entered its state.")
    failed_cluster: str | None = Field(description="The first cluster that failed it.")
    failure_reason: str | None
    evidence_url: str = Field(
        description="The hub's gate page for the rollout's target: where each of its clusters "
        "stands."
    )


ROLLOUT_EVENTS: dict[str, type[BaseModel]] = {
    "fleetmark.rollout.started": RolloutEventData,
    **{
        f"fleetmark.rollout.{state.value}": RolloutEventData
        for state in RolloutState
        if state is not RolloutState.IN_PROGRESS
    },
}
