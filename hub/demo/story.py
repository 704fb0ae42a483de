"""The demo's story: the reference scenario's repositories in real git, a simulated fleet on
them, and the steps that change both, one after the other.

`DemoRepositories.create` writes the four repositories; `demo_fleet` is a few clusters per
cluster type; each of `STEPS` commits, names the branches to schedule and moves the fleet.
"""

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hub.demo import scenario
from hub.demo.repos import WorkRepo
from hub.simulation import (
    ARGO_ROOT,
    ROOT,
    Failure,
    Followed,
    SimulatedCluster,
    Simulation,
    folder,
)

__all__ = [
    "ENVIRONMENTS",
    "NEW_DATABASE_URL",
    "STEPS",
    "DemoRepositories",
    "Step",
    "demo_fleet",
    "write_control_plane",
]

ENVIRONMENTS = ("dev", "stage")
# What the control plane's scheduling policies assign, by environment and cluster type, and
# the reconciler its cluster type's template renders (scenario.dev_branch, stage_branch).
ASSIGNED: dict[tuple[str, str], tuple[str, ...]] = {
    ("dev", "drone"): ("functional-test",),
    ("dev", "command-center"): (),
    ("dev", "large"): ("performance-test",),
    ("dev", "small"): (),
    ("stage", "drone"): ("uat-test",),
    ("stage", "large"): ("uat-test",),
}
RECONCILER = {("dev", "large"): "argocd"}
LABELS = {
    "drone": {"region": "east-us", "restricted": "true", "edge": "true"},
    "command-center": {"region": "east-us", "restricted": "true"},
    "large": {"region": "west-us", "size": "large"},
    "small": {"region": "west-us", "size": "small"},
}


def write_control_plane(repo: WorkRepo, urls: scenario.Repositories) -> str:
    """The control plane's `main`, then `dev` and `stage` each pinning that commit of `main`
    (their BaseRepo); returns it. `main` is checked out after."""
    main = repo.commit("Environments, templates, workloads", scenario.main_branch(urls))
    for environment, files in (
        ("dev", scenario.dev_branch(urls)),
        ("stage", scenario.stage_branch(urls)),
    ):
        repo.orphan(environment)
        pinned = {"base-repo.yaml": scenario.base_repo(main, urls.control_plane)}
        repo.commit(f"The {environment} environment", {**files, **pinned})
    repo.checkout("main")
    return main


def _url(path: Path, served_at: str | None) -> str:
    return path.as_uri() if served_at is None else f"{served_at.rstrip('/')}/{path.name}"


@dataclass
class DemoRepositories:
    """The scenario's four repositories under one directory. The hub reaches them on its own
    file system (their file:// URLs), or `served_at` a URL under which each is served by its
    directory's name (hub/demo/gitserver.py): the URLs the repositories' files name."""

    control_plane: WorkRepo
    app_src: WorkRepo
    app_gitops: WorkRepo
    platform_gitops: Path
    served_at: str | None = None

    @classmethod
    def create(cls, root: Path, served_at: str | None = None) -> "DemoRepositories":
        """The control plane (`main`, `dev`, `stage`, each environment pinning a commit of
        `main`), the application's source (the Workload), its GitOps repository (`dev`,
        `stage`: hello-world 1.0.0) and the platform GitOps repository, bare and empty for the
        scheduler to write."""
        platform_gitops = root / "platform-gitops"
        urls = scenario.Repositories(
            control_plane=_url(root / "control-plane", served_at),
            app_src=_url(root / "app-src", served_at),
            platform_gitops=_url(platform_gitops, served_at),
            app_gitops=_url(root / "app-gitops", served_at),
        )
        app_src = WorkRepo(root / "app-src", "main")
        app_src.commit("hello-world-app: the Workload", scenario.app_src_main(urls))
        control_plane = WorkRepo(root / "control-plane", "main")
        write_control_plane(control_plane, urls)
        app_gitops = WorkRepo(root / "app-gitops", "dev")
        app_gitops.commit("hello-world 1.0.0 on dev", scenario.app_gitops("dev", "1.0.0"))
        app_gitops.orphan("stage")
        app_gitops.commit("hello-world 1.0.0 on stage", scenario.app_gitops("stage", "1.0.0"))
        app_gitops.checkout("dev")
        subprocess.run(  # noqa: S603 - git on a directory of our own
            ["git", "init", "--quiet", "--bare", "--initial-branch=dev", str(platform_gitops)],  # noqa: S607
            check=True,
        )
        return cls(control_plane, app_src, app_gitops, platform_gitops, served_at)

    @property
    def urls(self) -> scenario.Repositories:
        return scenario.Repositories(
            control_plane=_url(self.control_plane.path, self.served_at),
            app_src=_url(self.app_src.path, self.served_at),
            platform_gitops=_url(self.platform_gitops, self.served_at),
            app_gitops=_url(self.app_gitops.path, self.served_at),
        )

    def platform_head(self, environment: str) -> str:
        result = subprocess.run(  # noqa: S603 - git on a repository of our own
            ["git", "rev-parse", environment],  # noqa: S607
            cwd=self.platform_gitops,
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.strip()

    def heads(self, environment: str) -> tuple[str, str]:
        """What a cluster of `environment` should run: (platform commit, app commit)."""
        return self.platform_head(environment), self.app_gitops.head(environment)

    def promote(self, environment: str, message: str, main: dict[str, str] | None = None) -> str:
        """Pin `environment` to `main`'s head (after committing `main`'s files, if any)."""
        if main is not None:
            self.control_plane.commit_on("main", message, main)
        head = self.control_plane.head("main")
        pinned = {"base-repo.yaml": scenario.base_repo(head, self.urls.control_plane)}
        self.control_plane.commit_on(environment, f"Promote {head[:12]} to {environment}", pinned)
        return head

    def release(self, environment: str, version: str) -> str:
        """hello-world `version` in every folder of the app's GitOps branch."""
        return self.app_gitops.commit_on(
            environment,
            f"hello-world {version} on {environment}",
            scenario.app_gitops(environment, version),
        )


def demo_fleet(repos: DemoRepositories, clusters_per_type: int) -> Simulation:
    """`clusters_per_type` clusters of each cluster type of each environment, on its heads."""
    urls = repos.urls
    clusters = []
    for (environment, cluster_type), targets in ASSIGNED.items():
        reconciler = RECONCILER.get((environment, cluster_type), "flux")
        root = ROOT if reconciler == "flux" else ARGO_ROOT
        followed = (
            Followed(root, urls.platform_gitops, folder(reconciler, cluster_type), app=False),
            *(
                Followed(scenario.target_name(target), urls.app_gitops, f"./{target}", app=True)
                for target in targets
            ),
        )
        clusters += [
            SimulatedCluster(
                name=f"{cluster_type}-{environment}-{index + 1}",
                environment=environment,
                cluster_type=cluster_type,
                labels=LABELS[cluster_type],
                reconciler=reconciler,
                followed=followed,
                applied=repos.heads(environment),
            )
            for index in range(clusters_per_type)
        ]
    return Simulation(
        clusters=clusters,
        heads={environment: repos.heads(environment) for environment in ENVIRONMENTS},
    )


@dataclass
class Step:
    """One step of the story: what it says, what it does to the repositories and the fleet
    (returning the control-plane environments to schedule), and which cluster to decommission."""

    title: str
    act: Callable[[DemoRepositories, Simulation], list[str]]
    decommission: str | None = None


def _cluster(simulation: Simulation, name: str) -> SimulatedCluster:
    return next(found for found in simulation.clusters if found.name == name)


NAMESPACE_TEAM_LABEL = scenario.NAMESPACE_TEMPLATE.replace(
    '          deploymentTarget: "{{ .DeploymentTargetName }}"\n',
    '          deploymentTarget: "{{ .DeploymentTargetName }}"\n          team: kaizen\n',
)
NEW_DATABASE_URL = "mysql://west-host-2:8806/mysql"


def _promote_dev(repos: DemoRepositories, simulation: Simulation) -> list[str]:
    _cluster(simulation, "drone-dev-2").suspended = True
    repos.promote(
        "dev",
        "Namespaces carry the team label",
        {"templates/namespace.yaml": NAMESPACE_TEAM_LABEL},
    )
    return ["dev"]


def _release_dev(repos: DemoRepositories, simulation: Simulation) -> list[str]:
    repos.release("dev", "1.1.0")
    return []


def _promote_stage(repos: DemoRepositories, simulation: Simulation) -> list[str]:
    _cluster(simulation, "drone-stage-1").failure = Failure(
        "HealthCheckFailed",
        "Deployment/hello-world: ImagePullBackOff: ghcr.io/contoso/hello-world:1.1.0",
    )
    repos.promote("stage", "Promote to stage")
    repos.release("stage", "1.1.0")
    return ["stage"]


def _config_change(repos: DemoRepositories, simulation: Simulation) -> list[str]:
    repos.control_plane.commit_on(
        "stage",
        "west-us: the new database",
        {
            "cluster-types/west-us/west-us-config.yaml": scenario.config_map(
                "west-us-config",
                scenario.WEST_US,
                {"REGION": "West US", "DATABASE_URL": NEW_DATABASE_URL},
            )
        },
    )
    return ["stage"]


def _silence(repos: DemoRepositories, simulation: Simulation) -> list[str]:
    _cluster(simulation, "large-dev-2").silent = True
    return []


def _leave(repos: DemoRepositories, simulation: Simulation) -> list[str]:
    simulation.clusters.remove(_cluster(simulation, "small-dev-2"))
    return []


STEPS = [
    Step(
        "Promotion to dev: a control-plane change (namespaces get a team label) is pinned on "
        "dev and scheduled; dev clusters apply it one by one. drone-dev-2 has its "
        "reconciliation suspended: it stays behind (drift).",
        _promote_dev,
    ),
    Step(
        "App release: hello-world 1.1.0 in app-gitops on dev; dev clusters apply it.",
        _release_dev,
    ),
    Step(
        "Promotion dev -> stage: the control-plane commit is pinned on stage and scheduled, "
        "hello-world 1.1.0 lands on stage; drone-stage-1 fails to apply it (ImagePullBackOff).",
        _promote_stage,
    ),
    Step(
        "Config change on stage: west-us-config gets a new DATABASE_URL; only the large "
        "cluster type's assignment changes.",
        _config_change,
    ),
    Step(
        "large-dev-2's agent stops reporting: the cluster turns stale.",
        _silence,
    ),
    Step(
        "small-dev-2 is decommissioned: the gate, drift and the environment diff no longer "
        "expect it.",
        _leave,
        decommission="small-dev-2",
    ),
]
