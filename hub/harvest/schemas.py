"""Wire shapes of the harvester: repository configuration (file and admin API) and status."""

import ipaddress
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

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
    github_repository,
    gitlab_project,
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


GITHUB_API_URL = "https://api.github.com"
GITLAB_API_URL = "https://gitlab.com/api/v4"
VariableName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _api_url(value: str) -> str:
    """An https base URL (http only to this machine: a token never crosses a network in the
    clear), with no user, query or fragment, without a trailing slash."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - reading the port checks it
    except ValueError as exc:
        raise ValueError(f"not a URL: {exc}") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError("must be an https:// URL with a host, such as https://api.github.com")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError("must be https: the token is sent with every request")
    if parts.username is not None or parts.query or parts.fragment:
        raise ValueError("must hold no user, query or fragment")
    return value.rstrip("/")


ApiUrl = Annotated[StorableText, AfterValidator(_api_url)]


class StatusesApi(BaseModel):
    """The API that sets the control plane's commit statuses, and where its token is (a file
    or a variable, never the token itself). The token goes to `api_url` and nowhere else."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_file: StorablePath | None = Field(
        default=None, description="A file holding the token that writes commit statuses."
    )
    token_env: VariableName | None = Field(
        default=None, description="A variable holding the token, instead of a file."
    )
    api_url: ApiUrl

    @model_validator(mode="after")
    def _one_secret(self) -> "StatusesApi":
        if (self.token_file is None) == (self.token_env is None):
            raise ValueError("give exactly one of token_file or token_env")
        return self

    @property
    def api_host(self) -> str:
        return urlsplit(self.api_url).hostname or ""


class GitHubStatuses(StatusesApi):
    """GitHub's: a token with `statuses: write` on the repository."""

    api_url: ApiUrl = Field(
        default=GITHUB_API_URL,
        description="The REST API's base URL; GitHub Enterprise Server: https://HOST/api/v3.",
    )


class GitLabStatuses(StatusesApi):
    """GitLab's: a token with scope `api` of a Developer (or higher) of the project."""

    api_url: ApiUrl = Field(
        default=GITLAB_API_URL,
        description="The REST API's base URL; GitLab Self-Managed: https://HOST/api/v4.",
    )


class ControlPlane(BaseModel):
    """A control-plane repository on GitHub or GitLab whose commits the platform repository's
    commits promote (their `.github/tracking/Promoted_Commit_Id`): each gets a status per
    promotion."""

    model_config = ConfigDict(extra="forbid")

    url: StorableText = Field(
        description="The control-plane repository: https://github.com/OWNER/REPO, or a GitLab "
        "project's URL."
    )
    platform: StorableText = Field(
        description="The platform repository whose commits carry the control plane's commits."
    )
    github: GitHubStatuses | None = None
    gitlab: GitLabStatuses | None = None

    @field_validator("url", "platform")
    @classmethod
    def _valid_url(cls, url: str) -> str:
        if has_credentials(url):
            raise ValueError(CREDENTIALS_REFUSED)
        try:
            normalise_repository_url(url.strip())
        except InvalidRepositoryUrl as exc:
            raise ValueError(str(exc)) from None
        return url.strip()

    @model_validator(mode="after")
    def _on_its_forge(self) -> "ControlPlane":
        if (self.github is None) == (self.gitlab is None):
            raise ValueError("give exactly one of github or gitlab")
        try:
            self.project  # noqa: B018 - naming the project checks the URL
        except InvalidRepositoryUrl as exc:
            raise ValueError(f"url: {exc}") from None
        return self

    @property
    def forge(self) -> Literal["github", "gitlab"]:
        return "github" if self.github is not None else "gitlab"

    @property
    def statuses(self) -> StatusesApi:
        api = self.github or self.gitlab
        assert api is not None
        return api

    @property
    def project(self) -> str:
        """OWNER/REPO on GitHub, GROUP/…/PROJECT on GitLab."""
        if self.github is not None:
            return "/".join(github_repository(self.url, self.github.api_host))
        return gitlab_project(self.url, self.statuses.api_host)

    @property
    def normalised_url(self) -> str:
        return normalise_repository_url(self.url)

    @property
    def platform_url(self) -> str:
        return normalise_repository_url(self.platform)


def _listed_once(field: str, urls: list[str]) -> None:
    """ValueError naming the first entry of `field` that lists a repository again."""
    seen: dict[str, int] = {}
    for index, url in enumerate(urls):
        first = seen.setdefault(url, index)
        if first != index:
            raise ValueError(f"{field}[{index}] is the same repository as {field}[{first}] ({url})")


class RepositoriesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    environments: list[EnvironmentName] | None = Field(
        default=None,
        description="The promotion order, first to last (dev, stage, prod); set at each "
        "harvest. Default: none declared.",
    )
    repositories: list[RepositoryConfig] = Field(default_factory=list)
    control_planes: list[ControlPlane] = Field(
        default_factory=list,
        description=(
            "Control-plane repositories on GitHub or GitLab the hub sets promotion commit "
            "statuses on "
            "(docs/integrations.md)."
        ),
    )

    @field_validator("environments")
    @classmethod
    def _once_each(cls, names: list[str] | None) -> list[str] | None:
        repeated = sorted({name for name in names if names.count(name) > 1}) if names else []
        if repeated:
            raise ValueError(f"each environment is named once; repeated: {', '.join(repeated)}")
        return names

    @model_validator(mode="after")
    def _unique(self) -> "RepositoriesFile":
        _listed_once("repositories", [item.normalised_url for item in self.repositories])
        _listed_once("control_planes", [plane.normalised_url for plane in self.control_planes])
        roles = {item.normalised_url: item.role for item in self.repositories}
        for index, plane in enumerate(self.control_planes):
            if roles.get(plane.platform_url, "platform") != "platform":
                raise ValueError(
                    f"control_planes[{index}].platform names {plane.platform_url}, listed with "
                    "role app: it names the platform repository"
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
    evidence_url: str = Field(
        description="The hub's repositories page: each repository's fetch and recent errors."
    )


HARVEST_EVENTS: dict[str, type[BaseModel]] = {
    "fleetmark.harvest.failing": HarvestEventData,
    "fleetmark.harvest.recovered": HarvestEventData,
}
