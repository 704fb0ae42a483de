"""A simulated fleet for the correlation tests: gate, drift, environment diff, DORA.

The reference scenario's GitOps repositories (platform-gitops and app-gitops, branches dev and
stage) are real git repositories, harvested into the test's store; clusters are registered and
their agents report what their reconcilers run, over the API, at the injected clock's time.

Each cluster follows the platform repository's environment branch with a root reconciler
(a Flux GitRepository + Kustomization `flux-system`, or an Argo CD Application `platform`)
and, for each assignment of its cluster type, the app repository's folder. Agents spell the
repository URLs in their own ways, as real ones do.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hub.simulation import ARGO_ROOT, RECONCILERS, ROOT, folder, records, spelled
from tests.conftest import MakeAgent
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import Harvest
from tests.hub.harvest.gitrepo import WorkRepo
from tests.support import Agent


@dataclass
class SimCluster:
    agent: Agent
    environment: str
    cluster_type: str
    platform_url: str
    app_url: str
    # What the agent reports, by reconciler object name.
    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.agent.cluster

    @property
    def reconciler(self) -> str:
        return RECONCILERS[self.cluster_type]

    def run_platform(
        self,
        applied: str | None,
        *,
        attempted: str | None = None,
        ready: bool | None = True,
        reason: str | None = "ReconciliationSucceeded",
        message: str | None = None,
    ) -> None:
        """The root reconciler: applied `applied`, last attempted `attempted` (default: the
        same), Ready as given."""
        name = ROOT if self.reconciler == "flux" else ARGO_ROOT
        self.objects[name] = records(
            self.reconciler,
            name,
            url=spelled(self.platform_url, self.reconciler),
            branch=self.environment,
            path=folder(self.reconciler, self.cluster_type),
            applied=applied,
            attempted=applied if attempted is None else attempted,
            ready=ready,
            reason=reason,
            message=message,
        )

    def run_app(
        self,
        target: str,
        applied: str | None,
        *,
        attempted: str | None = None,
        ready: bool | None = True,
        reason: str | None = "ReconciliationSucceeded",
        message: str | None = None,
        ref: str | None = None,
    ) -> None:
        """The reconciler of deployment target `target` (e.g. functional-test), following its
        app-gitops folder on the environment's branch (or at `ref`, a pinned revision)."""
        name = scenario.target_name(target)
        self.objects[name] = records(
            self.reconciler,
            name,
            url=spelled(self.app_url, self.reconciler),
            branch=ref or self.environment,
            path=folder(self.reconciler, target),
            applied=applied,
            attempted=applied if attempted is None else attempted,
            ready=ready,
            reason=reason,
            message=message,
        )

    async def report(self) -> None:
        """A full snapshot of what its reconcilers run now."""
        records = [record for records in self.objects.values() for record in records]
        await self.agent.send_ok(records, full_snapshot=True)


class Fleet:
    """The scenario's repositories, harvested, and the clusters added to it."""

    def __init__(
        self,
        platform: WorkRepo,
        app: WorkRepo,
        platform_heads: dict[str, str],
        app_heads: dict[str, str],
        harvest: Harvest,
        make_agent: MakeAgent,
        configure: Callable[..., Awaitable[int]],
    ) -> None:
        """`platform` and `app` as scenario.build_platform and build_app left them, with the
        heads they returned."""
        self.platform, self.app = platform, app
        self.platform_heads, self.app_heads = platform_heads, app_heads
        self._harvest, self._make_agent, self._configure = harvest, make_agent, configure
        self.environments = ["dev", "stage"]
        self.clusters: dict[str, SimCluster] = {}

    async def start(self) -> None:
        """Configure the platform repository (it leads to app-gitops) and harvest both."""
        await self._configure(self.platform.url, "platform", branches=self.environments)
        await self.harvest()

    def assignment(
        self, environment: str, cluster_type: str, target: str, config: dict[str, str]
    ) -> dict[str, str]:
        """The platform folder of an assignment whose Flux reconciler follows the target's
        app-gitops folder on the environment's branch."""
        namespace = scenario.namespace_of(environment, cluster_type, target)
        reconciler = scenario.flux_reconciler(
            target, namespace, self.app.url, environment, f"./{target}"
        )
        return scenario.assignment(environment, cluster_type, target, reconciler, config)

    def open_environment(self, name: str, platform: dict[str, str], version: str = "1.0.0") -> None:
        """Before `start`: environment `name` as a platform branch off the initial layout with
        `platform`'s files, and an app-gitops branch whose folders carry `version`."""
        initial = self.platform.head(f"{self.platform_heads['stage']}~1")
        self.platform.checkout(name, new=True, start=initial)
        self.platform_heads[name] = self.platform.commit(f"Promote {name}", platform)
        self.platform.checkout("dev")
        self.app.checkout(name, new=True, start=self.app_heads["stage"])
        self.app_heads[name] = self.app.commit(
            f"hello-world {version} on {name}", scenario.app_gitops(name, version)
        )
        self.app.checkout("dev")
        self.environments.append(name)

    async def harvest(self) -> None:
        report = await self._harvest()
        assert not any(outcome.errors for outcome in report.repositories), report

    async def add(
        self,
        name: str,
        cluster_type: str,
        environment: str = "dev",
        labels: dict[str, str] | None = None,
    ) -> SimCluster:
        agent = await self._make_agent(
            name, environment=environment, cluster_type=cluster_type, labels=labels
        )
        cluster = SimCluster(agent, environment, cluster_type, self.platform.url, self.app.url)
        self.clusters[name] = cluster
        return cluster

    def promote(self, message: str, files: dict[str, str | None], branch: str = "dev") -> str:
        """A new platform commit on the environment branch (as the scheduler writes one)."""
        return self.commit(self.platform, branch, message, files)

    def release(self, version: str, branch: str = "dev") -> str:
        """A new app version in every folder of app-gitops on the branch."""
        return self.commit(
            self.app,
            branch,
            f"hello-world {version} on {branch}",
            scenario.app_gitops(branch, version),
        )

    @staticmethod
    def commit(repo: WorkRepo, branch: str, message: str, files: dict[str, str | None]) -> str:
        """A commit on `branch` of either repository; the work tree goes back to dev."""
        repo.checkout(branch)
        sha = repo.commit(message, files)
        repo.checkout("dev")
        return sha

    async def report(self, *names: str) -> None:
        """Each named cluster (default: all) sends a full snapshot now."""
        for name in names or tuple(self.clusters):
            await self.clusters[name].report()


def prod_layout(fleet: Fleet, config: dict[str, dict[str, str]]) -> dict[str, str]:
    """prod: uat-test on drone and large, as on stage, with the given config per type."""
    files = {".github/tracking/Promoted_Commit_Id": scenario.PROMOTED["stage"] + "\n"}
    for cluster_type in ("drone", "large"):
        files |= fleet.assignment("prod", cluster_type, "uat-test", config[cluster_type])
    return files
