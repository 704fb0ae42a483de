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
