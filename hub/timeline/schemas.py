"""API shapes of the timeline: a page of rows, newest first, each a kind of what happened."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from hub.client.schemas.timeline import TimelineKind


class TimelineRow(BaseModel):
    at: datetime = Field(description="When it happened; a health row: its bucket's start.")
    kind: TimelineKind
    environment: str | None
    workload: str | None
    cluster_types: list[str] | None = Field(description="The cluster types of its clusters.")
    clusters: int | None = Field(
        description="How many clusters it counts (a rollout: those that had reached it); "
        "null: it is not about clusters."
    )
    summary: str = Field(description="What happened, in a line.")
    detail: dict[str, Any] = Field(description="The facts behind it, by kind.")


class TimelinePage(BaseModel):
    """A page of the timeline, newest first."""

    since: datetime
    until: datetime
    items: list[TimelineRow]
    next: str | None = Field(
        description="The cursor of the next page (older rows); null: this is the last."
    )
