"""Harvests and scheduling runs asked for through the API (POST /api/v1/runs/harvest,
/runs/schedule; admin), and a run's state until it is done (GET /api/v1/runs/{id})."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from hub.client.schemas.base import Answer

RequestedJob = Literal["harvest", "schedule"]
RunOutcome = Literal["running", "succeeded", "failed"]
Mode = Literal["direct", "branch"]
AssignmentStatus = Literal["rendered", "failed", "rejected"]
ErrorKind = Literal["load", "scheduling", "config", "template", "manifest", "git"]
Change = Literal["added", "updated", "removed"]


class HarvestRequest(BaseModel):
    repository: str | None = None
    backfill: bool = False


class ScheduleRequest(BaseModel):
    control_plane: str
    gitops: str
    environments: list[str] | None = None
    mode: Mode = "direct"


class BranchOutcome(BaseModel):
    name: str
    new_commits: int
    head_sha: str | None
    rewritten: bool
    errors: int = 0


class RepositoryOutcome(BaseModel):
    url: str
    role: Literal["platform", "app"]
    branches: list[BranchOutcome]
    errors: int = 0


class HarvestReport(Answer):
    """What a harvest read, repository by repository."""

    repositories: list[RepositoryOutcome]
    seconds: float


class Problem(BaseModel):
    """Something a scheduling run could not do, and where."""

    environment: str
    kind: ErrorKind
    message: str
    cluster_type: str | None = None
    deployment_target: str | None = None
    template: str | None = None
    source: str | None = None
    file: str | None = None
    document: int | None = None
    line: int | None = None
    field: str | None = None


class AssignmentChange(BaseModel):
    cluster_type: str
    deployment_target: str
    change: Change
    status: AssignmentStatus | None


class EnvironmentOutcome(BaseModel):
    """One environment of a scheduling run: the commit written (if any) and every problem."""

    environment: str
    gitops_url: str
    mode: Mode
    branch: str | None
    commit: str | None
    parent: str | None
    promoted_commit: str | None
    promoted_changed: bool
    render: Literal["full", "incremental"] | None
    assignments: int
    failed: int
    written: list[str]
    deleted: list[str]
    held: list[str]
    already_proposed: str | None = None
    changes: list[AssignmentChange]
    errors: list[Problem]
    failure: str | None = None


class ScheduleRun(Answer):
    """What a scheduling run did, environment by environment."""

    control_plane: str
    environments: list[EnvironmentOutcome]
    seconds: float


class RequestedRun(Answer):
    """A harvest or scheduling run asked for through the API, running or done."""

    id: int
    job: RequestedJob
    outcome: RunOutcome
    started_at: datetime
    finished_at: datetime | None
    error: str | None
    harvest: HarvestReport | None = None
    schedule: ScheduleRun | None = None
