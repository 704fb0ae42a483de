"""The commit statuses the hub sets on control-plane commits: the kept gate answer for the
platform commit that carries each, as `fleetmark/promotion/<next environment>`, posted to
GitHub's (or GitLab's) REST API on loopback when it changes."""

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from structlog.testing import capture_logs

from hub.app import create_app
from hub.database import write_session
from hub.gate import service as gate_service
from hub.gate import tasks as gate_tasks
from hub.harvest import service as harvest_service
from hub.harvest import tasks as harvest_tasks
from hub.harvest.schemas import RepositoryConfig
from hub.settings import HubSettings
from hub.statuses import service
from hub.statuses import tasks as statuses_tasks
from hub.statuses.repository import PromotedAnswer
from hub.statuses.tasks import COMMIT_STATUSES
from hub.tasks import TASKS
from tests.conftest import hub_settings
from tests.hub.harvest import scenario
from tests.hub.harvest.gitrepo import WorkRepo
from tests.hub.harvest.scenario import PROMOTED
from tests.hub.simulated_fleet import Fleet
from tests.hub.statuses.forge import Forge, Reply, Request, serving
from tests.support import FakeClock, samples

TOKEN = "ghp_statuses0123456789abcdefghijklmnopqrstu"
PUBLIC_URL = "https://fleetmark.example.com"
OPTIONS = gate_service.AnswerOptions(
    soak=timedelta(minutes=10),
    stale_after=timedelta(seconds=600),
    newest=5,
    source="https://fleetmark.example.com",
)
NEW_PROMOTED = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def github() -> Iterator[Forge]:
    with serving() as served:
        yield served


def write_file(path: Path, platform: str, forge: str = "github", **api: str) -> Path:
    """A repositories file: dev, stage and prod in order, and the control plane on the
    loopback forge whose commits platform-gitops carries."""
    plane = {
        "url": "https://127.0.0.1/contoso/control-plane",
        "platform": platform,
        forge: api,
    }
    document = {"environments": ["dev", "stage", "prod"], "control_planes": [plane]}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.fixture
def settings(
    tmp_path: Path, fleet: Fleet, github: Forge, monkeypatch: pytest.MonkeyPatch
) -> HubSettings:
    monkeypatch.setenv("STATUSES_TOKEN", TOKEN)
    path = write_file(
        tmp_path / "repositories.yaml",
        fleet.platform.url,
        token_env="STATUSES_TOKEN",
        api_url=github.url,
    )
    return hub_settings(data_dir=tmp_path / "data", repositories_file=path, public_url=PUBLIC_URL)


class Hub:
    """The jobs a status follows, as the hub runs them: a harvest (which reads the promotion
    order from the file), the gate answers, and the commit statuses."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        session: AsyncSession,
        settings: HubSettings,
        clock: FakeClock,
    ) -> None:
        self.sessions, self.session, self.settings, self.clock = sessions, session, settings, clock

    async def harvest(self) -> None:
        await harvest_tasks.run_harvest(self.sessions, self.settings, clock=self.clock)

    async def judge(self) -> None:
        await gate_service.keep_answers(self.session, OPTIONS, now=self.clock.now)
        await self.session.commit()

    async def post(self) -> dict[str, int]:
        return dict(
            await service.post_statuses(
                lambda: write_session(self.sessions), self.settings, self.clock
            )
        )


@pytest.fixture
async def hub(
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
    settings: HubSettings,
    clock: FakeClock,
) -> Hub:
    running = Hub(sessions, session, settings, clock)
    await running.harvest()
    return running


def posted(requests: list[Request]) -> list[tuple[str, str, str]]:
    """(commit, context, state) of each request."""
    return [
        (request.path.rsplit("/", 1)[-1], request.body["context"], request.body["state"])
        for request in requests
    ]


def gate_page(environment: str, commit: str) -> str:
    return f"{PUBLIC_URL}/gate?environment={environment}&commit={commit}"


async def test_pending_then_success_once_the_soak_passes(
    hub: Hub, fleet: Fleet, github: Forge, clock: FakeClock
) -> None:
    head = fleet.platform_heads["dev"]
    drone = await fleet.add("drone-01", "drone")
    drone.run_platform(head)
    await fleet.report()
    await hub.judge()

    assert await hub.post() == {"posted": 2}
    requests = github.take()
    assert sorted(posted(requests)) == sorted(
        [
            (PROMOTED["dev"], "fleetmark/promotion/stage", "pending"),
            # stage promotes to prod; no cluster runs it yet.
            (PROMOTED["stage"], "fleetmark/promotion/prod", "pending"),
        ]
    )
    dev = next(r for r in requests if r.body["context"] == "fleetmark/promotion/stage")
    assert dev.path == f"/repos/contoso/control-plane/statuses/{PROMOTED['dev']}"
    assert dev.headers["Authorization"] == f"Bearer {TOKEN}"
    assert dev.headers["Accept"] == "application/vnd.github+json"
    assert dev.body["target_url"] == gate_page("dev", head)
    assert dev.body["description"].startswith("gate pending in dev: 0 of 1 cluster(s) compliant")
    assert "\n" not in dev.body["description"]
    assert len(dev.body["description"]) <= 140

    # Nothing changed: nothing is posted again.
    await hub.judge()
    assert await hub.post() == {}
    assert github.take() == []

    clock.advance(minutes=11)
    await fleet.report()
    await hub.judge()
    assert await hub.post() == {"posted": 1}
    requests = github.take()
    assert posted(requests) == [(PROMOTED["dev"], "fleetmark/promotion/stage", "success")]
    assert requests[0].body["description"] == "gate passed in dev: 1 of 1 cluster(s) compliant"


async def test_a_failing_gate_sets_failure_on_the_commit_it_promotes(
    hub: Hub, fleet: Fleet, github: Forge, clock: FakeClock
) -> None:
    first = fleet.platform_heads["dev"]
    second = fleet.promote(
        "Promote dev: new control-plane commit",
        {".github/tracking/Promoted_Commit_Id": NEW_PROMOTED + "\n"},
    )
    await hub.harvest()
    large = await fleet.add("large-01", "large")
    large.run_platform(first, attempted=second, ready=False, reason="SyncFailed", message="boom")
    await fleet.report()
    await hub.judge()

    await hub.post()
    statuses = {(sha, context): state for sha, context, state in posted(github.take())}

    assert statuses[NEW_PROMOTED, "fleetmark/promotion/stage"] == "failure"
    # The commit before it still carries its own control-plane commit's status.
    assert statuses[PROMOTED["dev"], "fleetmark/promotion/stage"] == "pending"


async def test_the_rate_limit_is_waited_out(
    hub: Hub, fleet: Fleet, github: Forge, clock: FakeClock
) -> None:
    reset = clock.now + timedelta(minutes=5)
    github.answer(
        Reply(
            403,
            {
                "x-ratelimit-limit": "5000",
                "x-ratelimit-remaining": "0",
                "x-ratelimit-reset": str(int(reset.timestamp())),
            },
            {"message": "API rate limit exceeded for installation ID 1."},
        )
    )
    await hub.judge()

    # One request answered with the limit; the other status waits without asking.
    assert await hub.post() == {"rate_limited": 1, "held": 1}
    assert len(github.take()) == 1
    clock.advance(minutes=4)
    assert await hub.post() == {}
    assert github.take() == []

    clock.advance(minutes=1, seconds=1)
    assert await hub.post() == {"posted": 2}
    assert len(github.take()) == 2


async def test_a_secondary_rate_limit_waits_retry_after(
    hub: Hub, github: Forge, clock: FakeClock
) -> None:
    github.answer(Reply(429, {"retry-after": "90"}, {"message": "secondary rate limit"}))
    await hub.judge()

    assert await hub.post() == {"rate_limited": 1, "held": 1}
    clock.advance(seconds=80)
    assert await hub.post() == {}
    clock.advance(seconds=11)
    assert await hub.post() == {"posted": 2}
    assert len(github.take()) == 3


async def test_a_5xx_is_retried_with_backoff(hub: Hub, github: Forge, clock: FakeClock) -> None:
    github.answer(Reply(502, body={"message": "Server Error"}), Reply(503), Reply(500))
    await hub.judge()

    # Both statuses fail once; the first is tried again after 30 s, then after a minute.
    assert await hub.post() == {"unavailable": 2}
    clock.advance(seconds=29)
    assert await hub.post() == {}
    clock.advance(seconds=1)
    assert await hub.post() == {"unavailable": 1, "posted": 1}
    clock.advance(seconds=59)
    assert await hub.post() == {}
    clock.advance(seconds=1)
    assert await hub.post() == {"posted": 1}
    assert len(github.take()) == 5


async def test_bad_credentials_are_logged_and_not_spun_on(
    hub: Hub, github: Forge, clock: FakeClock
) -> None:
    github.answer(Reply(401, body={"message": "Bad credentials"}))
    await hub.judge()

    with capture_logs() as logs:
        assert await hub.post() == {"refused": 1, "held": 1}
    refused = [entry for entry in logs if entry["log_level"] == "error"]
    assert [(e["repository"], e["status"], e["error"]) for e in refused] == [
        ("https://127.0.0.1/contoso/control-plane", 401, "401 Bad credentials")
    ]
    assert TOKEN not in str(logs)
    for _ in range(5):
        clock.advance(minutes=10)
        assert await hub.post() == {}
    assert len(github.take()) == 1
    clock.advance(minutes=11)
    assert await hub.post() == {"posted": 2}


async def test_the_token_goes_to_the_api_url_alone(
    hub: Hub, github: Forge, clock: FakeClock
) -> None:
    with serving() as elsewhere:
        github.answer(
            Reply(307, {"Location": f"{elsewhere.url}/repos/contoso/control-plane/statuses/x"})
        )
        await hub.judge()
        with capture_logs():
            outcomes = await hub.post()
        assert elsewhere.take() == []
    # A moved repository holds its other statuses, as a refusal of the whole repository does.
    assert outcomes == {"refused": 1, "held": 1}
    assert [request.headers["Host"] for request in github.take()] == [
        github.url.removeprefix("http://")
    ]


async def test_a_control_plane_without_a_token_gets_no_statuses(
    hub: Hub, fleet: Fleet, github: Forge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await hub.judge()
    monkeypatch.delenv("STATUSES_TOKEN")
    with capture_logs() as logs:
        assert await hub.post() == {"no_token": 1}
    assert [entry["error"] for entry in logs if entry["log_level"] == "error"] == [
        "control_planes[0].github.token_env: variable STATUSES_TOKEN is not set"
    ]
    path = tmp_path / "without.yaml"
    path.write_text("environments: [dev, stage, prod]\n", encoding="utf-8")
    hub.settings = hub_settings(data_dir=tmp_path / "data", repositories_file=path)
    assert await hub.post() == {}
    assert github.take() == []


def answer(
    environment: str, platform: str, promoted: str, newest: int, verdict: str
) -> PromotedAnswer:
    return PromotedAnswer(
        environment=environment,
        platform_sha=platform * 40,
        promoted_sha=promoted * 40,
        newest=newest,
        verdict=verdict,
        reasons=["drone-02: reconciling failed (HealthCheckFailed)\nthen " + "x" * 200],
        expected=3,
        compliant=2,
    )


def test_the_newest_platform_commit_carrying_a_control_plane_commit_answers() -> None:
    answers = [
        answer("dev", "a", "c", 1, "failed"),
        answer("dev", "b", "c", 2, "passed"),
        answer("stage", "d", "e", 1, "pending"),
        answer("prod", "f", "0", 1, "passed"),
    ]
    wanted = service.wanted_statuses(
        answers, ["dev", "stage", "prod"], public_url=PUBLIC_URL, soak=timedelta(minutes=30)
    )

    assert [(w.sha[0], w.context, w.state) for w in wanted] == [
        ("c", "fleetmark/promotion/stage", "failure"),
        ("e", "fleetmark/promotion/prod", "pending"),
    ]
    failed = wanted[0]
    assert failed.target_url == f"{gate_page('dev', 'a' * 40)}&soak=1800.0"
    assert "\n" not in failed.description
    assert len(failed.description) == 140
    assert failed.description.startswith(
        "gate failed in dev: 2 of 3 cluster(s) compliant; drone-02: reconciling failed"
    )


async def test_the_job_runs_with_a_repositories_file(
    hub: Hub, github: Forge, sessions: async_sessionmaker[AsyncSession]
) -> None:
    await hub.judge()

    assert COMMIT_STATUSES in TASKS
    assert COMMIT_STATUSES.enabled(hub.settings)
    assert not COMMIT_STATUSES.enabled(hub_settings())
    assert await statuses_tasks.post(sessions, hub.settings, hub.clock) == 2
    assert len(github.take()) == 2


async def test_metrics_count_statuses_by_state_and_those_waiting(
    migrated_database: str, github: Forge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    platform = WorkRepo(tmp_path / "remotes" / "platform-gitops")
    scenario.build_platform(platform, WorkRepo(tmp_path / "remotes" / "app-gitops").url)
    monkeypatch.setenv("STATUSES_TOKEN", TOKEN)
    path = write_file(
        tmp_path / "repositories.yaml", platform.url, token_env="STATUSES_TOKEN", api_url=github.url
    )
    settings = hub_settings(
        data_dir=tmp_path / "data",
        repositories_file=path,
        metrics_refresh_interval=0,
        harvest_enabled=False,
    )
    engine = create_async_engine(migrated_database)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    try:
        async with write_session(sessions) as session:
            config = RepositoryConfig(url=platform.url, role="platform", branches=["dev", "stage"])
            await harvest_service.add_repository(
                session, config, credentials_dir=None, allow_local=True, now=clock.now
            )
        await harvest_tasks.run_harvest(sessions, settings, clock=clock)
        await gate_tasks.scheduled_answers(sessions, settings, clock)
        # No cluster yet: both commits' gates are pending; Forge fails the second post.
        github.answer(Reply(201), Reply(502))
        assert await statuses_tasks.post(sessions, settings, clock) == 1
    finally:
        await engine.dispose()

    app = create_app(settings, migrated_database, clock=clock)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hub") as client,
    ):
        scraped = samples((await client.get("/metrics")).text)

    assert scraped[("fleetmark_commit_statuses", frozenset({("state", "pending")}))] == 1
    assert scraped[("fleetmark_commit_statuses", frozenset({("state", "success")}))] == 0
    assert scraped[("fleetmark_commit_statuses_waiting", frozenset())] == 1


async def test_a_gitlab_control_plane_gets_the_status_as_gitlab_names_it(
    hub: Hub, fleet: Fleet, github: Forge, clock: FakeClock, tmp_path: Path
) -> None:
    gitlab = github
    path = write_file(
        tmp_path / "gitlab.yaml",
        fleet.platform.url,
        forge="gitlab",
        token_env="STATUSES_TOKEN",
        api_url=f"{gitlab.url}/api/v4",
    )
    hub.settings = hub_settings(
        data_dir=tmp_path / "data", repositories_file=path, public_url=PUBLIC_URL
    )
    second = fleet.promote(
        "Promote dev: new control-plane commit",
        {".github/tracking/Promoted_Commit_Id": NEW_PROMOTED + "\n"},
    )
    await hub.harvest()
    large = await fleet.add("large-01", "large")
    large.run_platform(
        fleet.platform_heads["dev"], attempted=second, ready=False, reason="SyncFailed"
    )
    await fleet.report()
    await hub.judge()
    reset = clock.now + timedelta(minutes=1)
    gitlab.answer(
        Reply(
            429,
            {"RateLimit-Remaining": "0", "RateLimit-Reset": str(int(reset.timestamp()))},
            {"message": "Retry later"},
        )
    )

    assert await hub.post() == {"rate_limited": 1, "held": 2}
    clock.advance(minutes=1)
    assert await hub.post() == {"posted": 3}
    requests = gitlab.take()[1:]
    failed = next(r for r in requests if r.path.endswith(NEW_PROMOTED))
    assert failed.path == f"/api/v4/projects/contoso%2Fcontrol-plane/statuses/{NEW_PROMOTED}"
    assert (failed.body["name"], failed.body["state"]) == ("fleetmark/promotion/stage", "failed")
    assert failed.body["target_url"] == gate_page("dev", second)
    assert failed.headers["PRIVATE-TOKEN"] == TOKEN
    assert "Authorization" not in failed.headers
    assert sorted(r.body["state"] for r in requests) == ["failed", "pending", "pending"]
