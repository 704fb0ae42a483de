"""The reference scenario on a hub served over real HTTP, for the built-in pages' tests: built
once per module (real git repositories harvested, agents reporting through the report API, the
drift job and the environment diff's summary run), and read by the tests without changing it.

dev: drone-01 runs dev's previous platform commit (one behind) and hello-world 1.1.0; large-01
failed to sync dev's newest platform commit (SyncFailed); drone-03 is registered, labelled with
markup, and never reported. stage: drone-02 runs stage's head and 1.0.0; large-02 failed to
apply 1.0.0, with markup in its message. drone-02 also follows a repository whose URL holds a
password. drone-04 ran dev's previous platform commit, then was decommissioned (a minute
before the drift job ran).
"""

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest

from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.envdiff.tasks import scheduled_refresh
from hub.simulation import records
from tests.agent.conftest import LiveHub
from tests.conftest import TOKEN_SECRET, DatabaseServer
from tests.hub.conftest import ServedFleet
from tests.hub.drifting import evaluate
from tests.hub.harvest import scenario

CLUSTERS = [
    ("drone-01", "dev", "drone"),
    ("large-01", "dev", "large"),
    ("drone-02", "stage", "drone"),
    ("large-02", "stage", "large"),
    ("drone-04", "dev", "drone"),
]
RETIRED = "drone-04"
HOSTILE = '<script>alert("fleet")</script>'
# A repository drone-02 follows besides the scenario's, as its agent reports it.
WITH_PASSWORD = "https://deploy:s3cret-password@git.example.com/contoso/tools.git"


@dataclass(frozen=True)
class Scenario:
    live: ServedFleet
    # Heads of the branches of platform-gitops (dev's: the commit drone-01 has not applied)
    # and app-gitops.
    platform: dict[str, str]
    app: dict[str, str]

    @property
    def url(self) -> str:
        return self.live.hub.url

    @property
    def token(self) -> str:
        return self.live.token


@pytest.fixture(scope="module")
async def pages_scenario(
    database_server: DatabaseServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Scenario]:
    folder = tmp_path_factory.mktemp("pages")
    with database_server.migrated_database() as url:
        live = ServedFleet(url, folder)
        try:
            yield await _build(live)
        finally:
            if live.hub.running:
                live.hub.stop()
            await live.engine.dispose()


async def _build(live: ServedFleet) -> Scenario:
    platform = scenario.build_platform(live.platform, live.app.url)
    app = scenario.build_app(live.app)
    app["dev"] = live.app.commit("hello-world 1.1.0 on dev", scenario.app_gitops("dev", "1.1.0"))
    newer = live.platform.commit("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await live.start(CLUSTERS)
    async with live.sessions() as session:
        registration = ClusterRegistration(
            name="drone-03", environment="dev", cluster_type="drone", labels={"owner": HOSTILE}
        )
        await cluster_service.register(session, registration, token_secret=TOKEN_SECRET)
        await session.commit()
    async with live.clusters() as clusters:
        clusters["drone-01"].run_platform(platform["dev"])
        clusters["drone-01"].run_app("functional-test", app["dev"])
        clusters["large-01"].run_platform(
            platform["dev"], attempted=newer, ready=False, reason="SyncFailed"
        )
        clusters["large-01"].run_app("performance-test", app["dev"])
        clusters["drone-02"].run_platform(platform["stage"])
        clusters["drone-02"].run_app("uat-test", app["stage"])
        clusters["drone-02"].objects["tools"] = records(
            "flux",
            "tools",
            url=WITH_PASSWORD,
            branch="main",
            path="./tools",
            applied=None,
            attempted=None,
            ready=True,
            reason="ReconciliationSucceeded",
            message=None,
        )
        clusters["large-02"].run_platform(platform["stage"])
        clusters["large-02"].run_app(
            "uat-test", None, attempted=app["stage"], ready=False, message=HOSTILE
        )
        clusters[RETIRED].run_platform(platform["dev"])
        for cluster in clusters.values():
            await cluster.report()
    live.clock.advance(minutes=4)
    async with live.sessions() as session:
        await cluster_service.decommission(
            session, RETIRED, now=live.clock(), stale_after=timedelta(minutes=5)
        )
        await session.commit()
    live.clock.advance(minutes=1)
    async with live.sessions() as session:
        await evaluate(session, live.clock)
    await scheduled_refresh(live.sessions, clock=live.clock)
    return Scenario(live, platform | {"dev": newer}, app)


@pytest.fixture(scope="module")
def production_hub(pages_scenario: Scenario) -> Iterator[LiveHub]:
    """The same store behind a hub in production mode: every page needs a read token."""
    hub = LiveHub(
        pages_scenario.live.hub.database_url,
        pages_scenario.live.clock,
        mode="production",
        harvest_enabled=False,
    )
    hub.start()
    yield hub
    hub.stop()
