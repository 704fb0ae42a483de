"""Wire shapes of the harvester: repository configuration (file and admin API) and status."""

from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from hub.client.params import StorablePath, StorableText
from hub.git.urls import (
    CREDENTIALS_REFUSED,
    InvalidRepositoryUrl,
    RedactedText,
    RedactedUrl,
    check_clone_url,
    has_credentials,
    normalise_repository_url,
)

Role = Literal["platform", "app"]


def _branch_name(name: str) -> str:
    if ".." in name:
        raise ValueError("a branch name cannot contain '..'")
    return name


# Git's own rules, simplified: no spaces or control characters, no `..`, no leading `-`, no
# special characters.
_BRANCH_PATTERN = r"^[^-\s\x00-\x1f\x7f~^:?*\[\\][^\s\x00-\x1f\x7f~^:?*\[\\]*$"
BranchName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=255, pattern=_BRANCH_PATTERN),
    AfterValidator(_branch_name),
]
# An environment is a branch of the platform repository; the store keeps 63 characters.
EnvironmentName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=63, pattern=_BRANCH_PATTERN),
    AfterValidator(_branch_name),
]


class CredentialsReference(BaseModel):
    """Where the secret is, never the secret: a token in a file or a variable, or an SSH key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    username: StorableText = Field(
        default="x-access-token",
        description="User name sent with a token over https (GitHub accepts any).",
    )
    token_file: StorablePath | None = None
    token_env: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    ssh_key_file: StorablePath | None = None
    known_hosts_file: StorablePath | None = Field(
        default=None,
        description="Pinned SSH host keys; without it a host is trusted the first time it is seen.",
    )

    @model_validator(mode="after")
    def _one_secret(self) -> "CredentialsReference":
        given = [
            name
            for name in ("token_file", "token_env", "ssh_key_file")
            if getattr(self, name) is not None
        ]
        if len(given) != 1:
            raise ValueError("give exactly one of token_file, token_env or ssh_key_file")
        return self

    def files(self) -> list[Path]:
        return [
            path
            for path in (self.token_file, self.ssh_key_file, self.known_hosts_file)
            if path is not None
        ]


class RepositoryConfig(BaseModel):
    """One GitOps repository to harvest, as written in the repositories file or sent to the API."""

    model_config = ConfigDict(extra="forbid")

    url: StorableText = Field(
        description=(
            "https://, http://, ssh://, user@host:path, or (development mode, or with "
            "FLEETMARK_ALLOW_LOCAL_REPOSITORIES) a file:// URL or an absolute path; "
            "no credentials in it (no user name on http(s), no password)."
        )
    )
    role: Role
    branches: list[BranchName] | None = Field(
        default=None, description="Branches to harvest; default: the environment branches."
    )
    credentials: CredentialsReference | None = None

    @field_validator("url")
    @classmethod
    def _valid_url(cls, url: str) -> str:
        if has_credentials(url):
            raise ValueError(CREDENTIALS_REFUSED)
        url = url.strip()
        try:
            check_clone_url(url)
            normalise_repository_url(url)
        except InvalidRepositoryUrl as exc:
            raise ValueError(str(exc)) from None
        return url

    @property
    def normalised_url(self) -> str:
        return normalise_repository_url(self.url)


class RepositoriesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    environments: list[EnvironmentName] | None = Field(
        default=None,
        description="The promotion order, first to last (dev, stage, prod); set at each "
        "harvest. Default: none declared.",
    )
    repositories: list[RepositoryConfig] = Field(default_factory=list)

    @field_validator("environments")
    @classmethod
    def _once_each(cls, names: list[str] | None) -> list[str] | None:
        repeated = sorted({name for name in names if names.count(name) > 1}) if names else []
        if repeated:
            raise ValueError(f"each environment is named once; repeated: {', '.join(repeated)}")
        return names

    @model_validator(mode="after")
    def _unique(self) -> "RepositoriesFile":
        seen: dict[str, int] = {}
        for index, repository in enumerate(self.repositories):
            first = seen.setdefault(repository.normalised_url, index)
            if first != index:
                raise ValueError(
                    f"repositories[{index}] is the same repository as repositories[{first}] "
                    f"({repository.normalised_url})"
                )
        return self


class BranchStatus(BaseModel):
    name: str
    environment: str | None
    head_sha: str | None = Field(description="The last harvested commit.")
    head_committed_at: datetime | None
    harvested_at: datetime | None
    lag_seconds: float | None = Field(
        description="Seconds since the branch was last harvested (null: never)."
    )
    commits: int = Field(description="Commits of the branch in the store.")
    deleted_at: datetime | None = Field(description="When the branch vanished from the remote.")


class HarvestErrorOut(BaseModel):
    commit_sha: str | None
    path: str | None
    message: RedactedText
    occurrences: int
    occurred_at: datetime
    last_occurred_at: datetime


class RepositoryStatus(BaseModel):
    id: int
    url: RedactedUrl = Field(description="Normalised: one form for https, ssh and .git spellings.")
    clone_url: RedactedUrl
    role: Role
    source: Literal["file", "api", "discovered"]
    enabled: bool
    configured_branches: list[str] | None
    credentials: Literal["token_file", "token_env", "ssh_key_file"] | None = Field(
        description="How the secret is referenced; the reference itself is not shown."
    )
    fetched_at: datetime | None
    fetch_error: RedactedText | None
    branches: list[BranchStatus]
    error_count: int = Field(description="Distinct harvest errors recorded for the repository.")
    recent_errors: list[HarvestErrorOut]


class BranchOutcome(BaseModel):
    name: str
    new_commits: int
    head_sha: str | None
    rewritten: bool = Field(description="History was rewritten (force-push) since the last run.")
    errors: int = Field(default=0, description="Problems found in the new commits' content.")


class RepositoryOutcome(BaseModel):
    url: RedactedUrl
    role: Role
    branches: list[BranchOutcome]
    errors: int = Field(default=0, description="Problems recorded during this run.")


class HarvestReport(BaseModel):
    repositories: list[RepositoryOutcome]
    seconds: float


class HarvestEventData(BaseModel):
    """`data` of fleetmark.harvest.failing and .recovered: a repository's fetch began to fail,
    or succeeded again."""

    repository: RedactedUrl
    role: Role
    error: RedactedText | None = Field(description="Why the fetch fails; null once recovered.")
    previous_error: RedactedText | None = Field(description="The error it recovered from.")


HARVEST_EVENTS: dict[str, type[BaseModel]] = {
    "fleetmark.harvest.failing": HarvestEventData,
    "fleetmark.harvest.recovered": HarvestEventData,
}
