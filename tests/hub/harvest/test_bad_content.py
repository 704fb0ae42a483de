"""Bad content and bad remotes become harvest errors with repository, commit and path;
everything else is still harvested and the run goes on."""

import base64
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.harvest import service, tasks
from hub.settings import HubSettings
from tests.conftest import hub_settings
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import GIT_TOKEN, Harvest, MakeRepo
from tests.hub.harvest.gitrepo import GitServer, WorkRepo
from tests.hub.harvest.store import HarvestedRepo
from tests.hub.outbox import published
from tests.support import FakeClock

Configure = Callable[..., Awaitable[int]]
DRONE = "drone/hello-world-app-functional-test"
LARGE = "large/hello-world-app-performance-test"


@pytest.fixture
async def platform(make_repo: MakeRepo, configure: Configure) -> WorkRepo:
    app = make_repo("app-gitops")
    scenario.build_app(app)
    repo = make_repo("platform-gitops")
    repo.commit("Promote dev", scenario.platform_dev(app.url))
    await configure(repo.url, "platform", branches=["dev"])
    return repo


async def messages(store: HarvestedRepo) -> dict[tuple[str | None, str | None], str]:
    return {
        (error["commit_sha"], error["path"]): error["message"] for error in await store.errors()
    }


async def test_malformed_platform_files_are_recorded_and_the_rest_is_harvested(
    platform: WorkRepo, harvest: Harvest, session: AsyncSession
) -> None:
    bad = platform.commit(
        "Broken promotion",
        {
            f"{DRONE}/namespace.yaml": "kind: Namespace\nmetadata:\n  name: [oops\n",
            f"{DRONE}/platform-config.yaml": b"\x00\x01binary\x00",
            f"{DRONE}/reconciler.yaml": None,
            "small/hello-world-app-functional-test/namespace.yaml": scenario.namespace_yaml(
                "dev", "small", "functional-test"
            ),
        },
    )
    platform.symlink("small/hello-world-app-functional-test/reconciler.yaml", "../../README.md")
    platform.symlink("small/shortcut", f"../{DRONE}")
    linked = platform.commit("A link")

    report = await harvest()

    store = HarvestedRepo(session, platform.url)
    assert report.repositories[0].errors == len(await store.errors())
    found = await messages(store)
    namespace = found[(bad, f"{DRONE}/namespace.yaml")]
    assert namespace.startswith(f"{DRONE}/namespace.yaml: line 4, column 1: invalid YAML")
    assert found[(bad, f"{DRONE}/platform-config.yaml")] == (
        f"{DRONE}/platform-config.yaml: binary file, expected YAML text"
    )
    assert found[(bad, f"{DRONE}/reconciler.yaml")] == f"{DRONE}/reconciler.yaml: missing"
    link = "small/hello-world-app-functional-test/reconciler.yaml"
    assert found[(linked, link)] == f"{link}: symbolic link, not followed"
    assert found[(linked, "small/shortcut")] == "small/shortcut: symbolic link, not followed"
    current = await store.current_assignments("dev")
    # What could be read is kept; the unreadable parts are empty, not guessed.
    drone = current[("drone", "hello-world-app-functional-test")]
    assert (drone["namespace"], drone["config_hash"], drone["reconciler_kind"]) == (
        None,
        None,
        None,
    )
    assert drone["valid_from"] == bad
    # The untouched assignment and the promoted commit of the good commit are unaffected.
    assert current[("large", "hello-world-app-performance-test")]["namespace"] == (
        "dev-large-hello-world-app-performance-test"
    )
    small = current[("small", "hello-world-app-functional-test")]
    assert small["namespace"] == "dev-small-hello-world-app-functional-test"
    assert (await store.branch("dev"))["head_sha"] == linked


async def test_files_over_the_size_limit_are_not_read(
    make_repo: MakeRepo,
    configure: Configure,
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    app = make_repo("app-gitops")
    head = app.commit(
        "Manifests",
        {
            "uat-test/deployment.yaml": scenario.deployment("2.0.0"),
            "uat-test/dump.json": "x" * 5000,
        },
    )
    await configure(app.url, "app", branches=["dev"])
    settings = hub_settings(data_dir=tmp_path / "data", harvest_max_file_bytes=4096)

    await tasks.run_harvest(sessions, settings, clock=clock)

    store = HarvestedRepo(session, app.url)
    assert await messages(store) == {
        (head, "uat-test/dump.json"): "uat-test/dump.json: 5000 bytes, over the 4096-byte limit"
    }
    assert (await store.current_manifests("dev"))["uat-test"]["workload_version"] == "2.0.0"


async def test_unreachable_remote_is_an_error_and_other_repositories_still_run(
    platform: WorkRepo,
    configure: Configure,
    harvest: Harvest,
    session: AsyncSession,
    tmp_path: Path,
) -> None:
    missing = (tmp_path / "nowhere" / "gone.git").as_uri()
    await configure(missing, "app", branches=["dev"])

    first = await harvest()
    second = await harvest()

    outcomes = {outcome.url: outcome for outcome in first.repositories}
    assert outcomes[missing.removesuffix(".git")].errors == 1
    assert len(await HarvestedRepo(session, platform.url).current_assignments("dev")) == 2
    [error] = await HarvestedRepo(session, missing).errors()
    assert error["message"].startswith(f"fetching {missing} failed: ")
    assert (error["commit_sha"], error["path"], error["occurrences"]) == (None, None, 2)
    assert len(second.repositories) == 3


async def test_a_repository_failing_to_fetch_is_announced_once_and_its_recovery_too(
    platform: WorkRepo,
    harvest: Harvest,
    harvest_settings: HubSettings,
    session: AsyncSession,
    tmp_path: Path,
) -> None:
    await harvest()
    moved = platform.path.rename(tmp_path / "moved")
    await harvest()
    await harvest()
    moved.rename(platform.path)
    await harvest()
    await harvest()

    events = await published(session, "fleetmark.harvest.")
    url = platform.url.removesuffix(".git")
    assert [(e["type"], e["subject"], e["environment"]) for e in events] == [
        ("fleetmark.harvest.failing", f"repositories/{url}", None),
        ("fleetmark.harvest.recovered", f"repositories/{url}", None),
    ]
    failing, recovered = (e["data"] for e in events)
    assert failing["error"].startswith(f"fetching {platform.url} failed: ")
    assert (recovered["error"], recovered["previous_error"]) == (None, failing["error"])
    assert {e["data"]["evidence_url"] for e in events} == {
        f"{harvest_settings.effective_public_url}/repositories"
    }


async def test_missing_configured_branch_is_an_error(
    make_repo: MakeRepo, configure: Configure, harvest: Harvest, session: AsyncSession
) -> None:
    app = make_repo("app-gitops")
    app.commit("Manifests", {"uat-test/deployment.yaml": scenario.deployment("1.0.0")})
    await configure(app.url, "app", branches=["dev", "prod"])

    report = await harvest()

    assert [branch.name for branch in report.repositories[0].branches] == ["dev"]
    assert await messages(HarvestedRepo(session, app.url)) == {
        (None, None): "branch 'prod' does not exist on the remote"
    }


@pytest.fixture
def git_server(make_repo: MakeRepo, served_git: Callable[[], GitServer]) -> GitServer:
    source = make_repo("private-app")
    source.commit("Manifests", {"uat-test/deployment.yaml": scenario.deployment("3.1.4")})
    server = served_git()
    server.publish(source)
    return server


def settings_with_file(tmp_path: Path, url: str, variable: str) -> HubSettings:
    file = tmp_path / "repositories.yaml"
    file.write_text(
        f"repositories:\n- url: {url}\n  role: app\n  branches: [dev]\n"
        f"  credentials:\n    token_env: {variable}\n"
    )
    return hub_settings(data_dir=tmp_path / "data", repositories_file=file)


async def test_token_is_sent_to_the_remote_and_never_shown(
    git_server: GitServer,
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
    clock: FakeClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    url = git_server.url("private-app.git")
    monkeypatch.setenv("FLEETMARK_GIT_TOKEN", GIT_TOKEN)
    monkeypatch.setenv("FLEETMARK_GIT_WRONG", "wr0ng-t0ken-value")
    caplog.set_level(logging.DEBUG)

    good = await tasks.run_harvest(
        sessions, settings_with_file(tmp_path, url, "FLEETMARK_GIT_TOKEN"), clock=clock
    )
    clock.advance(minutes=1)
    bad = await tasks.run_harvest(
        sessions, settings_with_file(tmp_path, url, "FLEETMARK_GIT_WRONG"), clock=clock
    )

    store = HarvestedRepo(session, url)
    assert good.repositories[0].branches[0].new_commits == 1
    assert (await store.current_manifests("dev"))["uat-test"]["workload_version"] == "3.1.4"
    assert bad.repositories[0].errors == 1
    [error] = await store.errors()
    assert "failed" in error["message"]
    statuses = await service.list_repositories(session, now=clock.now)
    shown = [
        error["message"],
        caplog.text,
        *capfd.readouterr(),
        *(s.model_dump_json() for s in statuses),
    ]
    for secret in (GIT_TOKEN, "wr0ng-t0ken-value"):
        encoded = base64.b64encode(f"x-access-token:{secret}".encode()).decode()
        assert not any(secret in text or encoded in text for text in shown)
    assert git_server.requests[0] is not None


async def test_unreadable_credentials_are_an_error_naming_the_reference(
    git_server: GitServer,
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    url = git_server.url("private-app.git")

    await tasks.run_harvest(
        sessions, settings_with_file(tmp_path, url, "FLEETMARK_GIT_UNSET"), clock=clock
    )

    [error] = await HarvestedRepo(session, url).errors()
    assert error["message"] == "credentials: variable FLEETMARK_GIT_UNSET is not set"
    assert git_server.requests == []
