"""The timeline (GET /api/v1/timeline): what happened to the fleet, newest first, from several
histories merged. The question, which the hub's router takes as a query model, and the answer."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from hub.client.params import Limit, Text, Timestamp
from hub.client.schemas.base import Listing


class TimelineKind(StrEnum):
    """What a row of the timeline tells (docs/concepts.md, "Timeline")."""

    COMMIT = "commit"
    SCHEDULE = "schedule"
    ROLLOUT_STARTED = "rollout.started"
    ROLLOUT_FIRST_CLUSTER = "rollout.first_cluster"
    ROLLOUT_HALF = "rollout.half"
    ROLLOUT_CONVERGED = "rollout.converged"
    ROLLOUT_FAILED = "rollout.failed"
    ROLLOUT_STALLED = "rollout.stalled"
    HEALTH_REGRESSED = "health.regressed"
    HEALTH_RECOVERED = "health.recovered"
    DRIFT_STARTED = "drift.started"
    DRIFT_RESOLVED = "drift.resolved"
    CLUSTER_STALE = "cluster.stale"
    CLUSTER_RECOVERED = "cluster.recovered"
    CLUSTER_DECOMMISSIONED = "cluster.decommissioned"
    HARVEST_ERROR = "harvest.error"
    HARVEST_FAILING = "harvest.failing"
    HARVEST_RECOVERED = "harvest.recovered"
    SCHEDULE_FAILED = "schedule.failed"
    SCHEDULE_RECOVERED = "schedule.recovered"


# A cursor is what an answer's `next` says: opaque, short.
Cursor = Annotated[str, StringConstraints(max_length=200)]


class TimelineQuery(BaseModel):
    """GET /api/v1/timeline: which rows, over which range, from where on (`cursor`)."""

    model_config = ConfigDict(populate_by_name=True)

    environment: Annotated[Text | None, Field(description="Only rows of this environment.")] = None
    workload: Annotated[
        Text | None,
        Field(description="Only rows of this workload: its commits, versions and runs."),
    ] = None
    cluster_type: Annotated[
        Text | None, Field(description="Only rows about clusters of this cluster type.")
    ] = None
    cluster: Annotated[Text | None, Field(description="Only rows about this cluster.")] = None
    selector: Annotated[
        Text | None,
        Field(
            description="Only rows about clusters whose labels it selects, as kubectl's -l: "
            "key=value,key!=value,key in (a,b),key notin (a),key,!key.",
        ),
    ] = None
    since: Annotated[
        Timestamp | None, Field(description="Inclusive; default: 24 hours before until.")
    ] = None
    until: Annotated[Timestamp | None, Field(description="Exclusive; default: now.")] = None
    limit: Limit = 100
    cursor: Annotated[
        Cursor | None,
        Field(description="The `next` of the page before: the rows older than its last."),
    ] = None


class TimelineRow(BaseModel):
    at: datetime
    kind: TimelineKind
    environment: str | None
    workload: str | None
    cluster_types: list[str] | None
    clusters: int | None
    summary: str
    detail: dict[str, Any]


class TimelinePage(Listing):
    """A page of the timeline, newest first."""

    since: datetime
    until: datetime
    items: list[TimelineRow]
    next: str | None
