"""The reference fleet's repositories (hub/demo/scenario.py) at hosted URLs, as files, and an
in-memory Git to read them from.

Tests change a copy of these mappings and load the result through `Repos`, which answers the
loader's `Fetch` as the hub's Git reader will: by branch head, or by the commit a BaseRepo
pins.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from hub.demo import scenario
from hub.demo.scenario import (
    ARC_FLUX_TEMPLATE,
    ARGOCD_TEMPLATE,
    CONFIGMAP_TEMPLATE,
    NAMESPACE_TEMPLATE,
    PERFORMANCE_TEST_POLICY,
    UAT_TEST_POLICY,
    WEST_US,
    Repositories,
    app_src_main,
    cluster_type,
    config_map,
    dev_branch,
    main_branch,
    registration,
    stage_branch,
    workload,
)
from scheduler_core.loader import Fetched, FetchError, LoadResult, load_control_plane
from scheduler_core.snapshot import RepoRef

__all__ = [
    "ARC_FLUX_TEMPLATE",
    "ARGOCD_TEMPLATE",
    "CONFIGMAP_TEMPLATE",
    "NAMESPACE_TEMPLATE",
    "PERFORMANCE_TEST_POLICY",
    "UAT_TEST_POLICY",
    "WEST_US",
    "cluster_type",
    "config_map",
]

CONTROL_PLANE = "https://git.example.com/platform/control-plane.git"
PLATFORM_GITOPS = "https://git.example.com/platform/platform-gitops.git"
APP_SRC = "https://git.example.com/kaizen/app-src.git"
APP_GITOPS = "https://git.example.com/kaizen/app-gitops.git"


URLS = Repositories(
    control_plane=CONTROL_PLANE,
    app_src=APP_SRC,
    platform_gitops=PLATFORM_GITOPS,
    app_gitops=APP_GITOPS,
)
MAIN: Mapping[str, str] = main_branch(URLS)
DEV: Mapping[str, str] = dev_branch(URLS)
STAGE: Mapping[str, str] = stage_branch(URLS)
APP_SRC_MAIN: Mapping[str, str] = app_src_main(URLS)
HELLO_WORLD_REGISTRATION = registration(APP_SRC)
HELLO_WORLD_WORKLOAD = workload(APP_GITOPS)


def base_repo(commit: str) -> str:
    return scenario.base_repo(commit, CONTROL_PLANE)


@dataclass
class Repos:
    """Branches and commits held in memory; reads the way the loader's `Fetch` asks."""

    heads: dict[tuple[str, str], str] = field(default_factory=dict)
    trees: dict[tuple[str, str], dict[str, bytes]] = field(default_factory=dict)
    asked: list[RepoRef] = field(default_factory=list)

    def commit(self, repo: str, branch: str, files: Mapping[str, str | bytes]) -> str:
        tree = {
            path: content if isinstance(content, bytes) else content.encode()
            for path, content in files.items()
        }
        digest = hashlib.sha1(usedforsecurity=False)
        digest.update(f"{repo}\0{branch}\0{self.heads.get((repo, branch), '')}".encode())
        for path in sorted(tree):
            digest.update(path.encode() + b"\0" + tree[path])
        sha = digest.hexdigest()
        self.trees[(repo, sha)] = tree
        self.heads[(repo, branch)] = sha
        return sha

    def __call__(self, ref: RepoRef) -> Fetched:
        self.asked.append(ref)
        sha = ref.commit or self.heads.get((ref.repo, ref.branch))
        if sha is None:
            raise FetchError(f"no branch {ref.branch}")
        tree = self.trees.get((ref.repo, sha))
        if tree is None:
            raise FetchError(f"no commit {sha}")
        return Fetched(files=tree, commit=sha)


def reference_fleet(
    main: Mapping[str, str | bytes] = MAIN,
    dev: Mapping[str, str | bytes] = DEV,
    stage: Mapping[str, str | bytes] = STAGE,
    app_src: Mapping[str, str | bytes] = APP_SRC_MAIN,
    *,
    pin_base: bool = True,
) -> Repos:
    """The reference fleet's repositories; each environment pins `main` as first committed."""
    repos = Repos()
    main_commit = repos.commit(CONTROL_PLANE, "main", main)
    pinned = {"base-repo.yaml": base_repo(main_commit)} if pin_base else {}
    repos.commit(CONTROL_PLANE, "dev", {**dev, **pinned})
    repos.commit(CONTROL_PLANE, "stage", {**stage, **pinned})
    repos.commit(APP_SRC, "main", app_src)
    return repos


def load(repos: Repos) -> LoadResult:
    return load_control_plane(RepoRef(repo=CONTROL_PLANE, branch="main"), repos)
