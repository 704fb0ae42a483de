"""The repositories file: what it configures, and errors that name file, line and field."""

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from hub.errors import InvalidConfiguration
from hub.git.urls import normalise_repository_url
from hub.harvest.config import load_repositories_file, parse_repositories
from hub.harvest.service import sync_repositories_file
from hub.models import Repository

FILE = """\
repositories:
  - url: https://github.com/contoso/platform-gitops.git
    role: platform
    branches: [dev, stage]
    credentials:
      token_file: /var/run/secrets/git/token
  - url: git@github.com:contoso/app-gitops.git
    role: app
    credentials:
      ssh_key_file: /var/run/secrets/git/id_ed25519
"""
CONTROL_PLANE = """\
control_planes:
  - url: https://github.com/contoso/control-plane.git
    platform: https://github.com/contoso/platform-gitops
    github:
      token_env: STATUSES_TOKEN
"""


def test_file_lists_repositories_with_credentials_references() -> None:
    configured = parse_repositories(FILE, "repositories.yaml")

    platform, app = configured.repositories
    assert (platform.normalised_url, platform.role, platform.branches) == (
        "https://github.com/contoso/platform-gitops",
        "platform",
        ["dev", "stage"],
    )
    assert platform.credentials is not None
    assert platform.credentials.token_file == Path("/var/run/secrets/git/token")
    assert (app.normalised_url, app.branches) == ("https://github.com/contoso/app-gitops", None)
    assert configured.environments is None
    ordered = parse_repositories("environments: [dev, stage, prod]\n" + FILE, "f")
    assert ordered.environments == ["dev", "stage", "prod"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            FILE.replace("role: app", "role: application"),
            "repositories.yaml: line 8: repositories[1].role: Input should be 'platform' or 'app'",
        ),
        (
            FILE.replace("token_file: /var/run/secrets/git/token", "token: ghp_s3cr3t"),
            "repositories.yaml: line 6: repositories[0].credentials.token: Extra inputs are not "
            "permitted",
        ),
        (
            FILE.replace("branches: [dev, stage]", "branches: [dev, stage]\n    token_env: X"),
            "repositories.yaml: line 5: repositories[0].token_env: Extra inputs are not permitted",
        ),
        (
            FILE.replace("      ssh_key_file: /var/run/secrets/git/id_ed25519", "      {}"),
            "repositories.yaml: line 10: repositories[1].credentials: Value error, give exactly "
            "one of token_file, token_env or ssh_key_file",
        ),
        (
            FILE + "  - url: https://GitHub.com/contoso/app-gitops\n    role: app\n",
            "repositories[2] is the same repository as repositories[1]",
        ),
        ("repositories:\n  - url: [unclosed\n", "repositories.yaml: line 3: invalid YAML"),
        (
            "environments: [dev, stage, dev]\n" + FILE,
            "repositories.yaml: line 1: environments: Value error, each environment is named "
            "once; repeated: dev",
        ),
    ],
)
def test_bad_file_names_line_and_field(text: str, message: str) -> None:
    with pytest.raises(InvalidConfiguration) as caught:
        parse_repositories(text, "repositories.yaml")

    assert message in caught.value.detail
    assert "ghp_s3cr3t" not in caught.value.detail


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfiguration, match=r"repositories\.yaml: cannot read"):
        load_repositories_file(tmp_path / "repositories.yaml")


async def test_file_is_the_truth_for_its_repositories(session: AsyncSession) -> None:
    await sync_repositories_file(session, parse_repositories(FILE, "f"))
    trimmed = FILE.split("  - url: git@")[0]

    await sync_repositories_file(session, parse_repositories(trimmed, "f"))

    rows = {
        row.url: row
        for row in await session.scalars(
            select(Repository).where(Repository.url.like("https://github.com/contoso/%"))
        )
    }
    platform = rows[normalise_repository_url("https://github.com/contoso/platform-gitops")]
    app = rows[normalise_repository_url("git@github.com:contoso/app-gitops.git")]
    assert (platform.source, platform.enabled, platform.branches) == (
        "file",
        True,
        ["dev", "stage"],
    )
    assert platform.credentials == {
        "username": "x-access-token",
        "token_file": "/var/run/secrets/git/token",
    }
    assert (app.source, app.enabled) == ("file", False)


def test_control_planes_name_their_repository_on_github_or_gitlab() -> None:
    configured = parse_repositories(FILE + CONTROL_PLANE, "f")
    enterprise = parse_repositories(
        CONTROL_PLANE.replace("github.com/contoso/control", "git.contoso.com/platform/control")
        + "      api_url: https://git.contoso.com/api/v3/\n",
        "f",
    )

    gitlab = parse_repositories(
        CONTROL_PLANE.replace(
            "github.com/contoso/control", "gitlab.com/contoso/fleet/control"
        ).replace("github:", "gitlab:"),
        "f",
    )

    (plane,) = configured.control_planes
    assert (plane.forge, plane.project, plane.platform_url, plane.statuses.api_url) == (
        "github",
        "contoso/control-plane",
        "https://github.com/contoso/platform-gitops",
        "https://api.github.com",
    )
    (on_premises,) = enterprise.control_planes
    assert on_premises.project == "platform/control-plane"
    assert on_premises.statuses.api_url == "https://git.contoso.com/api/v3"
    (project,) = gitlab.control_planes
    assert (project.forge, project.project, project.statuses.api_url) == (
        "gitlab",
        "contoso/fleet/control-plane",
        "https://gitlab.com/api/v4",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            CONTROL_PLANE.replace(
                "https://github.com/contoso/control-plane.git", "https://gitlab.com/c/cp"
            ),
            "repositories.yaml: line 2: control_planes[0]: Value error, url: 'https://gitlab.com/"
            "c/cp' is not a repository on github.com, the GitHub host of the API at "
            "api.github.com (expected https://github.com/OWNER/REPOSITORY)",
        ),
        (
            CONTROL_PLANE.replace("control-plane.git", "group/control-plane"),
            "control_planes[0]: Value error, url: 'https://github.com/contoso/group/control-"
            "plane' does not name a GitHub repository as OWNER/REPOSITORY",
        ),
        (
            CONTROL_PLANE + "      api_url: http://git.contoso.com/api/v3\n",
            "repositories.yaml: line 6: control_planes[0].github.api_url: Value error, must be "
            "https: the token is sent with every request",
        ),
        (
            CONTROL_PLANE.replace("token_env: STATUSES_TOKEN", "token: ghp_s3cr3t"),
            "control_planes[0].github.token: Extra inputs are not permitted",
        ),
        (
            CONTROL_PLANE.replace("token_env: STATUSES_TOKEN", "{}"),
            "control_planes[0].github: Value error, give exactly one of token_file or token_env",
        ),
        (
            CONTROL_PLANE.replace("github:", "gitlab:").replace(
                "STATUSES_TOKEN", "STATUSES_TOKEN\n      api_url: https://git.contoso.com/api/v4"
            ),
            "control_planes[0]: Value error, url: 'https://github.com/contoso/control-plane.git' "
            "is not a project on git.contoso.com, the GitLab host of the API (expected "
            "https://git.contoso.com/GROUP/PROJECT)",
        ),
        (
            CONTROL_PLANE + "    gitlab:\n      token_env: STATUSES_TOKEN\n",
            "control_planes[0]: Value error, give exactly one of github or gitlab",
        ),
        (
            FILE + CONTROL_PLANE.replace("contoso/platform-gitops", "contoso/app-gitops"),
            "control_planes[0].platform names https://github.com/contoso/app-gitops, listed "
            "with role app",
        ),
    ],
)
def test_bad_control_plane_is_named(text: str, message: str) -> None:
    with pytest.raises(InvalidConfiguration) as caught:
        parse_repositories(text, "repositories.yaml")

    assert message in caught.value.detail
    assert "ghp_s3cr3t" not in caught.value.detail
