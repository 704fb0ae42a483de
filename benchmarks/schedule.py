"""Scheduler benchmark: a generated control plane rendered in full, then after a one-ConfigMap
change, incrementally.

The control plane, the figures and the 2 % target are in docs/benchmarks.md ("Scheduler").
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

from hub.demo.scenario import ARC_FLUX_TEMPLATE, CONFIGMAP_TEMPLATE
from scheduler_core.incremental import render_incremental
from scheduler_core.loader import Fetched, FetchError, load_control_plane
from scheduler_core.output import RenderResult, render_environment
from scheduler_core.plan import plan_environment
from scheduler_core.snapshot import ControlPlaneSnapshot, RepoRef

CONTROL_PLANE = "https://git.example.com/platform/control-plane.git"
APP_SRC = "https://git.example.com/apps/workloads.git"
APP_GITOPS = "https://git.example.com/apps/app-gitops.git"
ENVIRONMENTS = ("dev", "stage", "prod")
CLUSTER_TYPES_PER_REGION = 10
# Regions with a ConfigMap of their own; the benchmark's change edits the one of CHANGED_REGION.
REGION_CONFIG_MAPS = 10
CHANGED_REGION = 7
SIZES = ("small", "medium", "large")
WORKSPACES = 10
NOW = datetime(2026, 1, 1, tzinfo=UTC)
T = TypeVar("T")

TEMPLATES = {
    "templates/arc-flux.yaml": ARC_FLUX_TEMPLATE,
    "templates/argocd.yaml": """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Template
metadata:
  name: argocd
spec:
  type: reconciler
  manifests:
    - |
      apiVersion: argoproj.io/v1alpha1
      kind: Application
      metadata:
        name: {{ .DeploymentTargetName }}
        namespace: argocd
      spec:
        project: default
        destination:
          server: https://kubernetes.default.svc
          namespace: {{ .Namespace }}
        source:
          repoURL: {{ .Manifests.repo }}
          targetRevision: {{ .Manifests.branch }}
          path: {{ .Manifests.path }}
        syncPolicy:
          automated:
            prune: true
            selfHeal: true
""",
    "templates/namespace.yaml": """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Template
metadata:
  name: default
spec:
  type: namespace
  manifests:
    - |
      apiVersion: v1
      kind: Namespace
      metadata:
        name: {{ .Namespace }}
        labels:
          environment: {{ .Environment }}
          workspace: {{ .Workspace }}
          workload: {{ .Workload }}
          deploymentTarget: {{ .DeploymentTargetName }}
""",
    "templates/configmap.yaml": CONFIGMAP_TEMPLATE,
}


def region(number: int) -> str:
    return f"region-{number:02d}"


def cluster_type(index: int) -> str:
    reconciler = "argocd" if index % 3 == 0 else "arc-flux"
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: ClusterType
metadata:
  name: ct-{index:03d}
  labels:
    region: {region(index // CLUSTER_TYPES_PER_REGION)}
    size: {SIZES[index % len(SIZES)]}
spec:
  reconciler: {reconciler}
  namespaceService: default
  configType: configmap
"""


def config_map(name: str, labels: Mapping[str, str], data: Mapping[str, str]) -> str:
    label_lines = "".join(f"    {key}: {value}\n" for key, value in labels.items())
    data_lines = "".join(f"  {key}: {value}\n" for key, value in data.items())
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n"
        f'    platform-config: "true"\n{label_lines}data:\n{data_lines}'
    )


def config_maps(environment: str, database_host: str) -> dict[str, str]:
    """20 ConfigMaps: the environment's, three by size, ten by region, six by cluster type."""
    files = {
        "configs/environment.yaml": config_map(
            f"{environment}-config", {}, {"ENVIRONMENT": environment, "LOG_LEVEL": "info"}
        )
    }
    for size in SIZES:
        files[f"configs/size-{size}.yaml"] = config_map(
            f"{size}-config", {"size": size}, {"NODE_POOL": f"pool-{size}"}
        )
    for number in range(REGION_CONFIG_MAPS):
        name = region(number)
        host = database_host if number == CHANGED_REGION else "db"
        files[f"configs/{name}.yaml"] = config_map(
            f"{name}-config",
            {"region": name},
            {"REGION": name, "DATABASE_URL": f"mysql://{host}.{name}:3306/app"},
        )
    for number in range(6):
        name = f"ct-{number * 41:03d}"
        files[f"configs/{name}.yaml"] = config_map(
            f"{name}-config", {"cluster-type": name}, {"CLUSTER_NAME": name}
        )
    return files


def environment_branch(environment: str, cluster_types: int, database_host: str) -> dict[str, str]:
    files = {
        f"cluster-types/ct-{index:03d}.yaml": cluster_type(index) for index in range(cluster_types)
    }
    files.update(config_maps(environment, database_host))
    files["scheduling/everything.yaml"] = f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: {environment}-everything
spec:
  deploymentTargetSelector:
    labelSelector:
      matchExpressions:
        - {{key: tier, operator: In, values: [frontend, backend]}}
  clusterTypeSelector:
    labelSelector: {{}}
"""
    return files


def main_branch() -> dict[str, str]:
    files = dict(TEMPLATES)
    for environment in ENVIRONMENTS:
        files[f".environments/{environment}.yaml"] = f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Environment
metadata:
  name: {environment}
spec:
  controlPlane:
    repo: {CONTROL_PLANE}
    branch: {environment}
    path: .
"""
    for team in range(WORKSPACES):
        files[f"workloads/team-{team:02d}.yaml"] = f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: WorkloadRegistration
metadata:
  name: team-{team:02d}
spec:
  workload:
    repo: {APP_SRC}
    branch: main
    path: teams/team-{team:02d}
  workspace: team-{team:02d}
"""
    return files


def workloads(count: int) -> dict[str, str]:
    files = {}
    for index in range(count):
        name = f"app-{index:04d}"
        targets = "".join(
            f"""\
    - name: {environment}
      labels:
        purpose: {environment}
      environment: {environment}
      manifests:
        repo: {APP_GITOPS}
        branch: {environment}
        path: ./{name}
"""
            for environment in ENVIRONMENTS
        )
        files[f"teams/team-{index % WORKSPACES:02d}/{name}.yaml"] = f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Workload
metadata:
  name: {name}
  labels:
    tier: {"frontend" if index % 2 else "backend"}
spec:
  deploymentTargets:
{targets}"""
    return files


class Repositories:
    """Branch heads held in memory, read the way the loader's Fetch asks."""

    def __init__(self) -> None:
        self.branches: dict[tuple[str, str], dict[str, bytes]] = {}

    def put(self, repo: str, branch: str, files: Mapping[str, str]) -> None:
        self.branches[(repo, branch)] = {path: text.encode() for path, text in files.items()}

    def __call__(self, ref: RepoRef) -> Fetched:
        files = self.branches.get((ref.repo, ref.branch))
        if files is None:
            raise FetchError(f"no branch {ref.branch}")
        return Fetched(files=files, commit=None)


def control_plane(
    workload_count: int, cluster_types: int, database_host: str
) -> Mapping[str, ControlPlaneSnapshot]:
    repositories = Repositories()
    repositories.put(CONTROL_PLANE, "main", main_branch())
    for environment in ENVIRONMENTS:
        repositories.put(
            CONTROL_PLANE,
            environment,
            environment_branch(
                environment, cluster_types, database_host if environment == "dev" else "db"
            ),
        )
    repositories.put(APP_SRC, "main", workloads(workload_count))
    loaded = load_control_plane(RepoRef(repo=CONTROL_PLANE, branch="main"), repositories)
    if loaded.errors:
        raise SystemExit("\n".join(str(error) for error in loaded.errors))
    return loaded.snapshots


def timed(run: Callable[[], T], profile: int) -> tuple[T, float]:
    gc.collect()
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    result = run()
    if profiler is not None:
        profiler.disable()
    elapsed = time.perf_counter() - started
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(profile)
    return result, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--cluster-types", type=int, default=300)
    parser.add_argument("--profile", type=int, default=0, metavar="LINES")
    arguments = parser.parse_args()
    if arguments.cluster_types < REGION_CONFIG_MAPS * CLUSTER_TYPES_PER_REGION:
        parser.error(
            f"--cluster-types must be at least {REGION_CONFIG_MAPS * CLUSTER_TYPES_PER_REGION}"
        )

    snapshots, load_time = timed(
        lambda: control_plane(arguments.workloads, arguments.cluster_types, "db"), 0
    )

    def full() -> dict[str, RenderResult]:
        return {
            name: render_environment(plan_environment(snapshot), {}, now=NOW)
            for name, snapshot in snapshots.items()
        }

    rendered, full_time = timed(full, arguments.profile)
    trees = {name: result.apply({}) for name, result in rendered.items()}
    assignments = sum(
        1
        for result in rendered.values()
        for record in result.state.records()
        if record.status == "rendered"
    )
    errors = sum(len(result.errors) for result in rendered.values())

    changed, reload_time = timed(
        lambda: control_plane(arguments.workloads, arguments.cluster_types, "db-new"), 0
    )

    def incremental() -> dict[str, RenderResult]:
        return {
            name: render_incremental(snapshot, trees[name], rendered[name].state, now=NOW)
            for name, snapshot in changed.items()
        }

    updated, incremental_time = timed(incremental, arguments.profile)
    touched = {path for result in updated.values() for path in (*result.write, *result.delete)}
    first = CHANGED_REGION * CLUSTER_TYPES_PER_REGION
    region_folders = {
        f"ct-{index:03d}/" for index in range(first, first + CLUSTER_TYPES_PER_REGION)
    }
    expected = {
        f"{folder}app-{index:04d}-dev/platform-config.yaml"
        for folder in region_folders
        for index in range(arguments.workloads)
    }
    if touched != expected:
        raise SystemExit(
            f"the change touched {len(touched)} files, not the {len(expected)} expected"
        )

    share = 100 * incremental_time / full_time
    print(
        f"control plane: {arguments.workloads} workloads x {len(ENVIRONMENTS)} targets, "
        f"{arguments.cluster_types} cluster types and 20 ConfigMaps per environment"
    )
    print(
        f"load                 {load_time:9.2f} s   (again after the change: {reload_time:.2f} s)"
    )
    print(
        f"full render          {full_time:9.2f} s   {assignments:,} assignments, "
        f"{assignments / full_time:,.0f} assignments/s, {errors} errors"
    )
    print(
        f"one-ConfigMap change {incremental_time:9.2f} s   {share:.2f} % of the full render "
        f"(target <= 2 %), {len(touched):,} files changed"
    )


if __name__ == "__main__":
    main()
