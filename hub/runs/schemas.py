"""API shapes of the runs asked for through the API: what to harvest, and a run's state."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hub.client.params import StorableText
from hub.git.urls import RedactedText
from hub.harvest.schemas import HarvestReport
from hub.scheduling.schemas import ScheduleRun

RequestedJob = Literal["harvest", "schedule"]
RunOutcome = Literal["running", "succeeded", "failed"]


class HarvestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repository: StorableText | None = Field(
        default=None, description="Harvest only the repository with this URL; None: every one."
    )
    backfill: bool = Field(
        default=False, strict=True, description="Read every branch again from its first commit."
    )


class RequestedRun(BaseModel):
    """A harvest or scheduling run asked for through the API, running or done."""

    id: int
    job: RequestedJob
    outcome: RunOutcome
    started_at: datetime
    finished_at: datetime | None = Field(description="None while it runs.")
    error: RedactedText | None = Field(description="Why it failed, when it did.")
    harvest: HarvestReport | None = Field(
        default=None, description="What a harvest did, once it succeeded."
    )
    schedule: ScheduleRun | None = Field(
        default=None,
        description="What a scheduling run did, once it ran (it may have failed in parts: "
        "each environment's failure and errors are in it).",
    )
