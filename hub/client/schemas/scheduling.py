"""What the scheduler rendered (GET /api/v1/assignments) and the errors it met
(GET /api/v1/scheduling/errors)."""

from datetime import datetime

from pydantic import BaseModel

from hub.client.schemas.base import Listing
from hub.client.schemas.runs import AssignmentStatus, Problem


class ScheduledAssignmentOut(BaseModel):
    environment: str
    cluster_type: str
    deployment_target: str
    workload: str
    namespace: str
    status: AssignmentStatus
    policies: list[str]
    config_maps: list[str]
    files: list[str]
    content_hash: str | None
    config_hash: str | None
    gitops_url: str
    branch: str | None
    commit_sha: str | None
    changed_at: datetime | None
    scheduled_at: datetime


class AssignmentPage(Listing):
    items: list[ScheduledAssignmentOut]
    total: int
    limit: int
    offset: int


class SchedulingErrorOut(Problem):
    gitops_url: str
    first_seen_at: datetime
    last_seen_at: datetime


class SchedulingErrorPage(Listing):
    items: list[SchedulingErrorOut]
    total: int
    limit: int
    offset: int
