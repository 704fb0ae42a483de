"""Wire shapes of the scheduler: what to schedule, what a run did, and the stored results."""

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from hub.git.urls import (
    InvalidRepositoryUrl,
    RedactedText,
    RedactedUrl,
    has_credentials,
    normalise_repository_url,
)

Mode = Literal["direct", "branch"]
AssignmentStatus = Literal["rendered", "failed", "rejected"]
ErrorKind = Literal["load", "scheduling", "config", "template", "manifest", "git"]
Change = Literal["added", "updated", "removed"]


def _repository_location(text: str) -> str:
    """A repository URL as given, or a local path made absolute: the same repository whatever
    the directory the hub runs in, and the spelling the control plane's files may use."""
    text = text.strip()
    if has_credentials(text):
        raise ValueError(
            "a repository URL must not carry credentials (a user name or password); git reads "
            "them from its own configuration (a credential helper, an SSH key)"
        )
    if not text.startswith((".", "/", "~")):
        try:
            normalise_repository_url(text)
        except InvalidRepositoryUrl:
            pass
        else:
            return text
    return str(Path(text).expanduser().resolve())


class ScheduleRequest(BaseModel):
    control_plane: str = Field(
        description="The control-plane repository: `main` and a branch per environment."
    )
    gitops: str = Field(description="The platform GitOps repository: a branch per environment.")
    environments: list[str] | None = Field(
        default=None, description="None: every environment the control plane declares."
    )
    mode: Mode = "direct"

    @field_validator("control_plane", "gitops")
    @classmethod
    def _location(cls, value: str) -> str:
        return _repository_location(value)


class Problem(BaseModel):
    """Something a run could not do: a control-plane document that did not load, an
    assignment that could not be scheduled or rendered, a repository it could not use."""

    environment: str
    kind: ErrorKind = Field(
        description=(
            "load: a control-plane document or repository; scheduling: a pair refused; "
            "config: a schema violation; template: a Template missing, not parsing or failing; "
            "manifest: a rendered document that is not a Kubernetes object; git: the platform "
            "repository could not be read or written."
        )
    )
    message: RedactedText
    cluster_type: str | None = None
    deployment_target: str | None = None
    template: str | None = None
    source: RedactedText | None = Field(
        default=None, description="The repository, branch and commit a document was read from."
    )
    file: str | None = Field(
        default=None, description="Control-plane file (load) or output file (render)."
    )
    document: int | None = None
    line: int | None = None
    field: str | None = None


class AssignmentChange(BaseModel):
    cluster_type: str
    deployment_target: str
    change: Change
    status: AssignmentStatus | None = Field(description="None once removed.")


class EnvironmentOutcome(BaseModel):
    """One environment of a run: the commit written (if any) and every problem met."""

    environment: str
    gitops_url: RedactedUrl
    mode: Mode
    branch: str | None = Field(
        description="Where the commit went: the environment branch or deployment/<timestamp>."
    )
    commit: str | None = Field(description="The new commit; None when nothing was written.")
    parent: str | None = Field(description="The environment branch's head it was made on.")
    promoted_commit: str | None = Field(
        description="The control-plane commit of `main` this environment is promoted to."
    )
    promoted_changed: bool
    render: Literal["full", "incremental"] | None = Field(
        description="incremental: only what the control-plane change touched was rendered."
    )
    assignments: int
    failed: int = Field(description="Assignments failing to render; each keeps its old output.")
    written: list[str]
    deleted: list[str]
    held: list[str] = Field(
        description=(
            "Files this render no longer produces, kept because the control plane has load "
            "errors (the documents that failed may be what produced them)."
        )
    )
    already_proposed: str | None = Field(
        default=None,
        description="branch mode: the deployment branch that already holds this very change.",
    )
    changes: list[AssignmentChange]
    errors: list[Problem]
    failure: RedactedText | None = Field(
        default=None, description="Why nothing could be written for this environment."
    )


class ScheduleRun(BaseModel):
    control_plane: RedactedUrl
    environments: list[EnvironmentOutcome]
    seconds: float


class ScheduledAssignmentOut(BaseModel):
    environment: str
    cluster_type: str
    deployment_target: str
    workload: str
    namespace: str
    status: AssignmentStatus = Field(
        description=(
            "rendered: its folder holds the last run's output; failed: it keeps its previous "
            "output (see /api/v1/scheduling/errors); rejected: no folder, scheduling refused it."
        )
    )
    policies: list[str] = Field(description="Every SchedulingPolicy that selects the pair.")
    config_maps: list[str] = Field(description="Platform-config ConfigMaps, in precedence order.")
    files: list[str]
    content_hash: str | None = Field(description="sha256 over its folder's files.")
    config_hash: str | None
    gitops_url: RedactedUrl
    branch: str | None = Field(description="The branch of the commit that last changed its folder.")
    commit_sha: str | None
    changed_at: datetime | None
    scheduled_at: datetime = Field(description="The last run that scheduled it.")


class AssignmentPage(BaseModel):
    items: list[ScheduledAssignmentOut]
    total: int
    limit: int
    offset: int


class SchedulingErrorOut(Problem):
    gitops_url: RedactedUrl
    first_seen_at: datetime
    last_seen_at: datetime


class SchedulingErrorPage(BaseModel):
    items: list[SchedulingErrorOut]
    total: int
    limit: int
    offset: int


class ScheduleEventData(BaseModel):
    """`data` of fleetmark.schedule.failed and .recovered: nothing could be written for an
    environment (or the control plane could not be read), or some of its assignments fail to
    render; or its scheduling writes everything again."""

    environment: str | None = Field(
        description="null: the control plane could not be read, and no environment it "
        "schedules is known yet."
    )
    control_plane: RedactedUrl
    gitops_url: RedactedUrl
    failure: RedactedText | None = Field(
        description="Why it fails (assignments failing to render: their cluster types and the "
        "first error); null once recovered."
    )
    failing_cluster_types: list[str] = Field(
        description="The cluster types whose assignments fail to render, each keeping its old "
        "output while the others are written; empty when nothing could be written, and once "
        "recovered."
    )
    failed_assignments: int = Field(
        description="How many assignments fail to render; 0 when nothing could be written, "
        "and once recovered."
    )
    failing_since: datetime = Field(description="The run that first failed.")
    declared: bool = Field(
        description="false: the control plane no longer declares the environment (removed, "
        "or a mistyped name), so it is not scheduled and fails no more."
    )
    evidence_url: str = Field(
        description="The hub's answer listing what the environment's last run could not do."
    )


SCHEDULE_EVENTS: dict[str, type[BaseModel]] = {
    "fleetmark.schedule.failed": ScheduleEventData,
    "fleetmark.schedule.recovered": ScheduleEventData,
}
