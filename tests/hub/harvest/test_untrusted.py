"""Repository URLs and credentials from outside reach git only as data.

Three ways lead a URL to git: the admin API, the repositories file, and repository content (a
Flux GitRepository or an Argo CD Application in a harvested platform repository, which needs
no token at all). Through none of them does a URL run a command; a remote repository cannot
point the hub at its own files; credential files are checked where they are read; and
discovery can be limited to known hosts.
"""

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.errors import InvalidConfiguration
from hub.harvest import tasks
from hub.models import HarvestError, Repository
from hub.settings import HubSettings
from tests.conftest import TOKEN_SECRET, hub_settings
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import GIT_TOKEN, Harvest, MakeRepo
from tests.hub.harvest.gitrepo import GitServer
from tests.hub.harvest.store import HarvestedRepo
from tests.support import FakeClock, bearer

Configure = Callable[..., Awaitable[int]]
MARKER = "FLEETMARK_TEST_MARKER"
# Each would run `touch $FLEETMARK_TEST_MARKER` if git read it as an option, a transport
# helper or an ssh host: none has a space, so none is refused for that alone.
INJECTIONS = [
    "--upload-pack=touch${IFS}$FLEETMARK_TEST_MARKER;x:y",
    "--config=core.sshCommand=touch${IFS}$FLEETMARK_TEST_MARKER",
    "-utouch${IFS}$FLEETMARK_TEST_MARKER;x:y",
    "ext::sh${IFS}-c${IFS}touch${IFS}$FLEETMARK_TEST_MARKER",
    "ssh://-oProxyCommand=touch${IFS}$FLEETMARK_TEST_MARKER/repo",
    "ssh://git@-oProxyCommand=touch${IFS}$FLEETMARK_TEST_MARKER/repo",
    "-oProxyCommand=touch${IFS}$FLEETMARK_TEST_MARKER:repo",
]


class Marker:
    """The file an injected command would create: git inherits the hub's environment."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def created(self) -> bool:
        return self.path.exists()


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Marker:
    monkeypatch.setenv(MARKER, str(tmp_path / "injected"))
    return Marker(tmp_path / "injected")


async def errors_of(session: AsyncSession, url: str) -> list[str]:
    return [error["message"] for error in await HarvestedRepo(session, url).errors()]


def reconcilers(url: str) -> dict[str, str]:
    """A platform commit whose Flux and Argo CD reconcilers both point at `url`."""
    quoted = json.dumps(url)
    return {
        **scenario.assignment(
            "dev",
            "drone",
            "functional-test",
            scenario.flux_reconciler(
                "functional-test", "dev-drone-functional-test", quoted, "dev", "./functional"
            ),
        ),
        **scenario.assignment(
            "dev",
            "large",
            "performance-test",
            scenario.argocd_reconciler(
                "performance-test", "dev-large-performance-test", quoted, "dev", "performance"
            ),
        ),
    }


@pytest.mark.parametrize("url", INJECTIONS)
async def test_the_admin_api_refuses_injections(
    url: str, client: httpx.AsyncClient, admin_token: str, harvest: Harvest, marker: Marker
) -> None:
    response = await client.post(
        "/api/v1/repositories", json={"url": url, "role": "app"}, headers=bearer(admin_token)
    )
    await harvest()

    assert response.status_code == 422
    assert "url" in response.text
    assert not marker.created()


@pytest.mark.parametrize("url", INJECTIONS)
async def test_the_repositories_file_refuses_injections(
    url: str,
    tmp_path: Path,
    sessions: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    marker: Marker,
) -> None:
    file = tmp_path / "repositories.yaml"
    file.write_text(f"repositories:\n- url: {json.dumps(url)}\n  role: platform\n")
    settings = hub_settings(data_dir=tmp_path / "data", repositories_file=file)

    with pytest.raises(InvalidConfiguration) as refused:
        await tasks.run_harvest(sessions, settings, clock=clock)

    assert f"{file}: line 2: repositories[0].url:" in refused.value.detail
    assert not marker.created()


async def test_injections_in_harvested_manifests_run_nothing_and_are_harvest_errors(
    make_repo: MakeRepo,
    configure: Configure,
    harvest: Harvest,
    session: AsyncSession,
    marker: Marker,
) -> None:
    platform = make_repo("platform-gitops")
    commits = [
        platform.commit(f"Promote {index}", reconcilers(url))
        for index, url in enumerate(INJECTIONS)
    ]
    await configure(platform.url, "platform", branches=["dev"])

    report = await harvest()

    assert not marker.created()
    found = await HarvestedRepo(session, platform.url).errors()
    refused = {(error["commit_sha"], error["message"]) for error in found}
    for commit, url in zip(commits, INJECTIONS, strict=True):
        assert any(
            sha == commit and message.startswith(f"repository not harvested: {url!r}")
            for sha, message in refused
        ), url
    assert report.repositories[0].errors == len(found)
    assert (
        await session.scalar(select(Repository.id).where(Repository.source == "discovered")) is None
    )


@pytest.mark.parametrize("url", INJECTIONS)
async def test_a_stored_injection_is_never_fetched(
    url: str, session: AsyncSession, harvest: Harvest, marker: Marker
) -> None:
    """Defence in depth: a URL an earlier version let into the store is checked at the fetch."""
    await session.execute(
        insert(Repository).values(
            url=f"https://attacker.example/{len(url)}", clone_url=url, role="app", source="api"
        )
    )
    await session.commit()

    report = await harvest()

    assert not marker.created()
    [outcome] = report.repositories
    assert outcome.errors == 1
    message = await session.scalar(select(HarvestError.message))
    assert message is not None
    assert message.startswith(f"fetching {url} failed: {url!r}")


async def test_a_remote_repository_cannot_point_the_hub_at_local_paths(
    make_repo: MakeRepo,
    served_git: Callable[[], GitServer],
    tmp_path: Path,
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
    clock: FakeClock,
    client: httpx.AsyncClient,
    read_token: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = make_repo("app-gitops")
    scenario.build_app(app)
    platform = make_repo("platform-gitops")
    platform.commit("Local app by URL", scenario.platform_dev(app.url))
    platform.commit("Local app by path", scenario.platform_dev(str(app.path)))
    remote = served_git().publish(platform)
    monkeypatch.setenv("FLEETMARK_GIT_TOKEN", GIT_TOKEN)
    file = tmp_path / "repositories.yaml"
    file.write_text(
        f"repositories:\n- url: {remote}\n  role: platform\n  branches: [dev]\n"
        "  credentials:\n    token_env: FLEETMARK_GIT_TOKEN\n"
    )

    await tasks.run_harvest(
        sessions, hub_settings(data_dir=tmp_path / "data", repositories_file=file), clock=clock
    )

    messages = await errors_of(session, remote)
    for local in (app.url, str(app.path)):
        assert (
            f"repository not harvested: {local} is a local path, named by {remote}, which is "
            "not local: only a local repository may point the hub at its own files"
        ) in messages
    listed = await client.get("/api/v1/repositories", headers=bearer(read_token))
    assert [item["clone_url"] for item in listed.json()] == [remote]


async def test_a_local_repository_may_name_local_ones(
    make_repo: MakeRepo, configure: Configure, harvest: Harvest, session: AsyncSession
) -> None:
    app = make_repo("app-gitops")
    scenario.build_app(app)
    platform = make_repo("platform-gitops")
    platform.commit("Promote dev", scenario.platform_dev(str(app.path)))
    await configure(platform.url, "platform", branches=["dev"])

    await harvest()

    assert await errors_of(session, platform.url) == []
    manifests = await HarvestedRepo(session, str(app.path)).current_manifests("dev")
    assert manifests["functional-test"]["workload_version"] is not None


async def test_a_discovered_local_repository_is_checked_at_each_fetch(
    make_repo: MakeRepo,
    configure: Configure,
    harvest: Harvest,
    session: AsyncSession,
) -> None:
    """A discovered local repository whose origin is no longer known (stored before the hub
    kept it, or its origin removed) is not fetched."""
    app = make_repo("app-gitops")
    scenario.build_app(app)
    platform = make_repo("platform-gitops")
    platform.commit("Promote dev", scenario.platform_dev(app.url))
    await configure(platform.url, "platform", branches=["dev"])
    await harvest()
    await session.execute(
        Repository.__table__.update()
        .where(Repository.source == "discovered")
        .values(discovered_from_id=None)
    )
    app.commit("Next", {"functional-test/deployment.yaml": scenario.deployment("9.9.9")})

    await harvest()

    [message] = await errors_of(session, app.url)
    assert message == (
        f"not fetched: {app.url} is a local path, named by a repository no longer known: only "
        "a local repository may point the hub at its own files"
    )


async def test_production_refuses_configured_local_repositories_unless_allowed(
    make_client: Callable[..., Awaitable[httpx.AsyncClient]],
    admin_token: str,
    make_repo: MakeRepo,
    tmp_path: Path,
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
    clock: FakeClock,
) -> None:
    app = make_repo("app-gitops")
    scenario.build_app(app)
    production = {"mode": "production", "token_secret": TOKEN_SECRET}
    client = await make_client(**production)
    file = tmp_path / "repositories.yaml"
    file.write_text(f"repositories:\n- url: {app.url}\n  role: app\n  branches: [dev]\n")

    refused = await client.post(
        "/api/v1/repositories", json={"url": app.url, "role": "app"}, headers=bearer(admin_token)
    )
    await tasks.run_harvest(
        sessions,
        hub_settings(data_dir=tmp_path / "data", repositories_file=file, **production),
        clock=clock,
    )
    first = await errors_of(session, app.url)
    clock.advance(minutes=1)
    allowed = await tasks.run_harvest(
        sessions,
        hub_settings(
            data_dir=tmp_path / "data",
            repositories_file=file,
            allow_local_repositories=True,
            **production,
        ),
        clock=clock,
    )

    assert refused.status_code == 422
    assert "FLEETMARK_ALLOW_LOCAL_REPOSITORIES=true" in refused.json()["detail"]
    assert first == [
        f"not fetched: {app.url} is on the hub's own file system: "
        "local repositories are refused when FLEETMARK_MODE is not 'development' unless "
        "FLEETMARK_ALLOW_LOCAL_REPOSITORIES=true"
    ]
    assert allowed.repositories[0].branches[0].new_commits > 0


def test_production_refuses_local_scheduler_repositories_unless_allowed() -> None:
    local = {"schedule_control_plane": "/srv/control-plane", "schedule_gitops": "/srv/gitops"}
    production = {"mode": "production", "token_secret": "p" * 40}

    with pytest.raises(ValueError, match="FLEETMARK_SCHEDULE_CONTROL_PLANE is a local path"):
        HubSettings(**production, **local)
    assert HubSettings(**production, **local, allow_local_repositories=True).schedule_gitops


async def test_a_token_file_swapped_for_a_link_outside_the_credentials_folder_is_not_read(
    make_repo: MakeRepo,
    served_git: Callable[[], GitServer],
    tmp_path: Path,
    make_client: Callable[..., Awaitable[httpx.AsyncClient]],
    admin_token: str,
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
    clock: FakeClock,
) -> None:
    app = make_repo("app-gitops")
    scenario.build_app(app)
    server = served_git()
    remote = server.publish(app)
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    token_file = credentials / "token"
    token_file.write_text("not-the-token")
    outside = tmp_path / "hub-secret"
    outside.write_text(GIT_TOKEN)
    settings = hub_settings(data_dir=tmp_path / "data", git_credentials_dir=credentials)
    client = await make_client(git_credentials_dir=credentials)
    added = await client.post(
        "/api/v1/repositories",
        json={"url": remote, "role": "app", "credentials": {"token_file": str(token_file)}},
        headers=bearer(admin_token),
    )
    assert added.status_code == 201, added.text
    token_file.unlink()
    token_file.symlink_to(outside)

    await tasks.run_harvest(sessions, settings, clock=clock)

    assert await errors_of(session, remote) == [
        f"credentials: {token_file} is outside FLEETMARK_GIT_CREDENTIALS_DIR"
    ]
    assert server.requests == []


async def test_discovery_is_limited_to_the_allowed_urls(
    make_repo: MakeRepo,
    configure: Configure,
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    app = make_repo("app-gitops")
    scenario.build_app(app)
    platform = make_repo("platform-gitops")
    platform.commit("Promote dev", scenario.platform_dev(app.url))
    await configure(platform.url, "platform", branches=["dev"])

    def allowing(*allowed: str) -> HubSettings:
        return hub_settings(data_dir=tmp_path / "data", discovery_allowed_urls=list(allowed))

    await tasks.run_harvest(sessions, allowing("github.com"), clock=clock)
    refused = await errors_of(session, platform.url)
    clock.advance(minutes=1)
    await tasks.run_harvest(
        sessions, allowing((tmp_path / "remotes").as_uri()), clock=clock, backfill=True
    )

    assert (
        refused
        == [
            f"repository not harvested: {app.url}, named by {platform.url}, is not in "
            "FLEETMARK_DISCOVERY_ALLOWED_URLS"
        ]
        * 2
    )
    assert await HarvestedRepo(session, app.url).current_manifests("dev")
