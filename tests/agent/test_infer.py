"""Environment and cluster type inferred from the reconciler that tracks the platform repo."""

from pathlib import Path
from typing import Any

import pytest

from agent.report import ObjectRecord
from agent.runner import AgentRunner
from agent.settings import AgentSettings
from agent.sources import argocd, flux
from agent.watch import Placement, branch_of, cluster_type_of, infer_placement
from tests.agent import examples

FLUX_ROOT = ("Kustomization", "flux-system", "flux-system")
ARGO_ROOT = ("Application", "argocd", "root")


def flux_root(path: str = "./drone", ref: dict[str, str] | None = None) -> list[ObjectRecord]:
    """A Flux bootstrap: the flux-system GitRepository and the Kustomization that follows it."""
    repository = examples.git_repository(ref or {"branch": "dev"})
    repository["metadata"] = examples.metadata("flux-system")
    kustomization = examples.kustomization()
    kustomization["metadata"] = examples.metadata("flux-system")
    kustomization["spec"]["path"] = path
    kustomization["spec"]["sourceRef"] = {"kind": "GitRepository", "name": "flux-system"}
    return [
        flux.git_repository(repository, examples.NOW),
        flux.kustomization(kustomization, examples.NOW),
    ]


def argo_root(target_revision: str, path: str) -> ObjectRecord:
    app: dict[str, Any] = examples.application()
    app["metadata"] = examples.metadata("root", "argocd")
    app["spec"]["source"] = {
        "repoURL": examples.GIT_URL,
        "targetRevision": target_revision,
        "path": path,
    }
    return argocd.application(app, examples.NOW)


@pytest.mark.parametrize(
    ("ref", "branch"),
    [
        ("dev", "dev"),
        ("stage", "stage"),
        ("refs/heads/prod", "prod"),
        ("release/2026-11", "release/2026-11"),
        ("refs/tags/v1.2.3", None),
        ("refs/pull/12/head", None),
        ("semver:>=1.0.0", None),
        (examples.SHA_A, None),
        (f"sha256:{examples.DIGEST}", None),
        ("HEAD", None),
        ("6.5.*", None),
        (">=1.2 <2", None),
        ("", None),
        (None, None),
        ("x" * 64, None),
    ],
)
def test_branch_of(ref: str | None, branch: str | None) -> None:
    assert branch_of(ref) == branch


@pytest.mark.parametrize(
    ("path", "cluster_type"),
    [
        ("./drone", "drone"),
        ("drone", "drone"),
        ("/command-center/", "command-center"),
        ("./large/functional-test", "large"),
        ("././small", "small"),
        ("./", None),
        (".", None),
        ("", None),
        (None, None),
        ("../escape", None),
    ],
)
def test_cluster_type_of(path: str | None, cluster_type: str | None) -> None:
    assert cluster_type_of(path) == cluster_type


def test_flux_branch_is_the_environment_and_top_folder_the_cluster_type() -> None:
    assert infer_placement(flux_root(), FLUX_ROOT) == Placement("dev", "drone")


def test_flux_ref_given_by_name() -> None:
    records = flux_root("./stage-large/apps", {"name": "refs/heads/stage"})
    assert infer_placement(records, FLUX_ROOT) == Placement("stage", "stage-large")


def test_a_tag_or_commit_gives_no_environment() -> None:
    assert infer_placement(flux_root(ref={"tag": "v1.0.0"}), FLUX_ROOT) == Placement(None, "drone")
    assert infer_placement(flux_root(ref={"commit": examples.SHA_B}), FLUX_ROOT) == Placement(
        None, "drone"
    )


def test_a_root_at_the_top_of_the_repository_gives_no_cluster_type() -> None:
    assert infer_placement(flux_root("./"), FLUX_ROOT) == Placement("dev", None)


def test_without_the_followed_repository_only_the_cluster_type_is_known() -> None:
    _, kustomization = flux_root()
    assert infer_placement([kustomization], FLUX_ROOT) == Placement(None, "drone")


def test_without_the_root_nothing_is_inferred() -> None:
    assert infer_placement(flux_root(), ("Kustomization", "flux-system", "apps")) == Placement()
    assert infer_placement([], FLUX_ROOT) == Placement()


def test_argo_cd_root_application() -> None:
    assert infer_placement([argo_root("stage", "large")], ARGO_ROOT) == Placement("stage", "large")
    assert infer_placement([argo_root("HEAD", "./large")], ARGO_ROOT) == Placement(None, "large")


def test_the_root_kind_matches_whatever_its_case() -> None:
    root = ("kustomization", "flux-system", "flux-system")
    assert infer_placement(flux_root(), root) == Placement("dev", "drone")


def test_configured_placement_wins_over_the_inferred_one(tmp_path: Path) -> None:
    settings = AgentSettings(
        hub_url="http://hub.test",
        cluster_name="drone-dev-1",
        environment="prod",
        spool_dir=tmp_path,
    )
    runner = AgentRunner(settings)
    identity = runner.identity(Placement("dev", "drone"))
    assert (identity.environment, identity.cluster_type) == ("prod", "drone")


def test_an_unusable_inferred_name_is_left_out(tmp_path: Path) -> None:
    settings = AgentSettings(hub_url="http://hub.test", cluster_name="c", spool_dir=tmp_path)
    identity = AgentRunner(settings).identity(Placement("dev", "x\x00y"))
    assert (identity.environment, identity.cluster_type) == (None, None)
