"""Fixtures of the correlation tests (gate, drift, environment diff, DORA): the harvester's
(real git repositories harvested in the test's transaction) and a simulated fleet on top of
them; for the commands, the same on a hub served on a real port over a committed database."""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from typer.testing import CliRunner

from hub.cli import app as cli
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.envdiff.tasks import scheduled_refresh
from hub.harvest import service as harvest_service
from hub.harvest import tasks as harvest_tasks
from hub.harvest.schemas import RepositoryConfig
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest
from tests.agent.conftest import LiveHub
from tests.conftest import TOKEN_SECRET, MakeAgent, hub_settings
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import (
    Harvest,
    configure,
    harvest,
    harvest_settings,
    make_repo,
    sessions,
)
from tests.hub.harvest.gitrepo import Pristine, WorkRepo
from tests.hub.simulated_fleet import Fleet, SimCluster
from tests.support import Agent, FakeClock

__all__ = ["configure", "harvest", "harvest_settings", "make_repo", "sessions"]


@dataclass(frozen=True)
class ScenarioRemotes:
    """platform-gitops and app-gitops as in the scenario's step 1, with their heads."""

    platform: WorkRepo
    app: WorkRepo
    platform_heads: dict[str, str]
    app_heads: dict[str, str]
    pristine: Pristine


@pytest.fixture(scope="session")
def scenario_remotes(tmp_path_factory: pytest.TempPathFactory) -> ScenarioRemotes:
    """The scenario's repositories, built once per run; each test that uses them puts them back
    as built first (`pristine_remotes`)."""
    remotes = tmp_path_factory.mktemp("scenario") / "remotes"
    platform, app = WorkRepo(remotes / "platform-gitops"), WorkRepo(remotes / "app-gitops")
    platform_heads = scenario.build_platform(platform, app.url)
    app_heads = scenario.build_app(app)
    pristine = Pristine(remotes, platform, app)
    return ScenarioRemotes(platform, app, platform_heads, app_heads, pristine)


@pytest.fixture
def pristine_remotes(scenario_remotes: ScenarioRemotes) -> ScenarioRemotes:
    """The scenario's repositories put back as built, for the test to change."""
    scenario_remotes.pristine.restore()
    return scenario_remotes


@pytest.fixture
def unharvested_fleet(
    pristine_remotes: ScenarioRemotes,
    harvest: Harvest,
    make_agent: MakeAgent,
    configure: Callable[..., Awaitable[int]],
) -> Fleet:
    """platform-gitops and app-gitops as in the scenario's step 1, before `start`."""
    remotes = pristine_remotes
    return Fleet(
        remotes.platform,
        remotes.app,
        dict(remotes.platform_heads),
        dict(remotes.app_heads),
        harvest,
        make_agent,
        configure,
    )


@pytest.fixture
async def fleet(unharvested_fleet: Fleet) -> Fleet:
    """platform-gitops and app-gitops as in the scenario's step 1, harvested; no cluster yet."""
    await unharvested_fleet.start()
    return unharvested_fleet


class ServedFleet:
    """A hub on a port of its own over a committed database, with the platform-gitops and
    app-gitops remotes the test builds before `start`."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.clock = FakeClock()
        self.engine = create_async_engine(url)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self.hub = LiveHub(url, self.clock)
        self.platform = WorkRepo(tmp_path / "remotes" / "platform-gitops")
        self.app = WorkRepo(tmp_path / "remotes" / "app-gitops")
        self.data_dir = tmp_path / "data"
        self.token = ""
        # Each registered cluster's token, environment and cluster type, by name.
        self.registered: dict[str, tuple[str, str, str]] = {}

    async def start(self, clusters: Iterable[tuple[str, str, str]]) -> None:
        """Registers the platform repository, the clusters (name, environment, cluster type)
        and a read token, harvests, and serves."""
        async with self.sessions() as session:
            config = RepositoryConfig(
                url=self.platform.url, role="platform", branches=["dev", "stage"]
            )
            await harvest_service.add_repository(
                session, config, credentials_dir=None, allow_local=True, now=self.clock.now
            )
            for name, environment, cluster_type in clusters:
                registration = ClusterRegistration(
                    name=name, environment=environment, cluster_type=cluster_type
                )
                registered = await cluster_service.register(
                    session, registration, token_secret=TOKEN_SECRET
                )
                self.registered[name] = (registered.token, environment, cluster_type)
            read = await token_service.create(
                session, TokenRequest(name="ci", scope="read"), token_secret=TOKEN_SECRET
            )
            await session.commit()
        self.token = read.token
        await harvest_tasks.run_harvest(
            self.sessions, hub_settings(data_dir=self.data_dir), clock=self.clock
        )
        self.hub.start()

    @asynccontextmanager
    async def clusters(self) -> AsyncIterator[dict[str, SimCluster]]:
        """The registered clusters, each with an agent that reports to the served hub."""
        async with httpx.AsyncClient(base_url=self.hub.url) as client:
            yield {
                name: SimCluster(
                    Agent(client, self.clock, name, token),
                    environment,
                    cluster_type,
                    self.platform.url,
                    self.app.url,
                )
                for name, (token, environment, cluster_type) in self.registered.items()
            }

    async def fleetmark(self, *args: str, columns: int | None = None) -> Result:
        """`fleetmark <args>` against the served hub with the read token; `columns` widens the
        terminal so that no table row wraps."""
        options = ["--hub", self.hub.url, "--token", self.token]
        env = None if columns is None else {"COLUMNS": str(columns)}
        return await asyncio.to_thread(CliRunner().invoke, cli, [*args, *options], env=env)


@pytest.fixture
async def served_fleet(migrated_database: str, tmp_path: Path) -> AsyncIterator[ServedFleet]:
    served = ServedFleet(migrated_database, tmp_path)
    try:
        yield served
    finally:
        if served.hub.running:
            served.hub.stop()
        await served.engine.dispose()


def words(text: str) -> str:
    """Rich wraps long lines at the terminal width; compare words, not line breaks."""
    return " ".join(text.split())


# The environment diff's scenario: a cluster per environment and cluster type, with its
# deployment target.
DIFF_CLUSTERS = [
    ("drone-dev", "dev", "drone", "functional-test"),
    ("drone-stage", "stage", "drone", "uat-test"),
    ("large-stage", "stage", "large", "uat-test"),
]


async def serve_diff_scenario(live: ServedFleet) -> None:
    """The scenario's repositories harvested after hello-world 1.1.0 reached dev; the drone of
    dev runs it, the drone of stage runs stage's 1.0.0, the large of stage failed to apply it;
    the summary refreshed."""
    scenario.build_platform(live.platform, live.app.url)
    heads = scenario.build_app(live.app)
    heads["dev"] = live.app.commit("hello-world 1.1.0 on dev", scenario.app_gitops("dev", "1.1.0"))
    await live.start(
        (name, environment, cluster_type) for name, environment, cluster_type, _ in DIFF_CLUSTERS
    )
    async with live.clusters() as clusters:
        for name, environment, _, target in DIFF_CLUSTERS:
            cluster = clusters[name]
            if name == "large-stage":
                cluster.run_app(
                    target, None, attempted=heads["stage"], ready=False, message="sync failed"
                )
            else:
                cluster.run_app(target, heads[environment])
            await cluster.report()
    await scheduled_refresh(live.sessions, clock=live.clock)
