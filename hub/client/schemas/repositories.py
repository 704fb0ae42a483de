"""The GitOps repositories the hub harvests (GET /api/v1/repositories) and what adding one
sends (admin)."""

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from hub.client.schemas.base import Answer, ItemList

Role = Literal["platform", "app"]


class CredentialsReference(BaseModel):
    """Where the hub finds the secret for git, never the secret: one of a token file, a
    variable of the hub's or an SSH key file, on the hub's host."""

    username: str = "x-access-token"
    token_file: Path | None = None
    token_env: str | None = None
    ssh_key_file: Path | None = None
    known_hosts_file: Path | None = None


class RepositoryConfig(BaseModel):
    url: str
    role: Role
    branches: list[str] | None = None
    credentials: CredentialsReference | None = None


class BranchStatus(BaseModel):
    name: str
    environment: str | None
    head_sha: str | None
    head_committed_at: datetime | None
    harvested_at: datetime | None
    lag_seconds: float | None
    commits: int
    deleted_at: datetime | None


class HarvestErrorOut(BaseModel):
    commit_sha: str | None
    path: str | None
    message: str
    occurrences: int
    occurred_at: datetime
    last_occurred_at: datetime


class RepositoryStatus(Answer):
    id: int
    url: str
    clone_url: str
    role: Role
    source: Literal["file", "api", "discovered"]
    enabled: bool
    configured_branches: list[str] | None
    credentials: Literal["token_file", "token_env", "ssh_key_file"] | None
    fetched_at: datetime | None
    fetch_error: str | None
    branches: list[BranchStatus]
    error_count: int
    recent_errors: list[HarvestErrorOut]


class RepositoryList(ItemList[RepositoryStatus]):
    pass
