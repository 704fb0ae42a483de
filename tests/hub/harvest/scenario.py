"""The reference scenario's GitOps repositories, written as the Kalypso scheduler and the
application team would write them: platform-gitops (dev, stage) and app-gitops."""

from collections.abc import Mapping

from hub.demo.scenario import (
    IMAGE,
    WORKLOAD,
    WORKSPACE,
    app_gitops,
    deployment,
    descriptor,
    target_name,
)
from tests.hub.harvest.gitrepo import WorkRepo

__all__ = ["IMAGE", "WORKLOAD", "app_gitops", "deployment", "descriptor"]

PROMOTED = {
    "dev": "5f1d2b8c0e4a7d9b3c6e1f2a4b8d0c7e9f1a3b5d",
    "stage": "8c7e9f1a3b5d5f1d2b8c0e4a7d9b3c6e1f2a4b8d",
}
# Composed platform config per (environment, cluster type), from the scenario's ConfigMaps.
CONFIG = {
    ("dev", "drone"): {
        "ENVIRONMENT": "Dev",
        "SOME_COMMON_ENVIRONMENT_VARIABLE": "false",
        "CLUSTER_NAME": "Drone",
        "REGION": "East US",
        "DATABASE_URL": "mysql://restricted-host:3306/mysqlrty123",
    },
    ("dev", "large"): {
        "ENVIRONMENT": "Dev",
        "SOME_COMMON_ENVIRONMENT_VARIABLE": "false",
        "REGION": "West US",
        "DATABASE_URL": "mysql://west-host:8806/mysql",
    },
    ("stage", "drone"): {"ENVIRONMENT": "Stage"},
    ("stage", "large"): {"ENVIRONMENT": "Stage", "REGION": "West US"},
}


def namespace_of(environment: str, cluster_type: str, target: str) -> str:
    return f"{environment}-{cluster_type}-{target_name(target)}"


def flux_reconciler(target: str, namespace: str, url: str, branch: str, path: str) -> str:
    name = target_name(target)
    return f"""\
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: {name}
  namespace: flux-system
spec:
  interval: 30s
  url: {url}
  ref:
    branch: {branch}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: {name}
  namespace: flux-system
spec:
  interval: 30s
  targetNamespace: {namespace}
  sourceRef:
    kind: GitRepository
    name: {name}
  path: {path}
  prune: true
"""


def argocd_reconciler(
    target: str, namespace: str, url: str, branch: str, path: str, *, helm_values: bool = False
) -> str:
    """An Argo CD Application; with `helm_values`, multi-source: a chart plus this repo."""
    source = f"""\
    repoURL: {url}
    targetRevision: {branch}
    path: {path}"""
    if helm_values:
        sources = f"""\
  sources:
  - repoURL: https://charts.contoso.example
    chart: hello-world
    targetRevision: 1.4.2
    helm:
      valueFiles: ["$values/{path}/values.yaml"]
  - ref: values
{source.replace("    repoURL", "  - repoURL", 1)}
"""
    else:
        sources = f"  source:\n{source}\n"
    return f"""\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: {target_name(target)}
  namespace: argocd
spec:
  project: default
{sources}  destination:
    server: https://kubernetes.default.svc
    namespace: {namespace}
  syncPolicy:
    automated: {{prune: true}}
"""


def namespace_yaml(environment: str, cluster_type: str, target: str) -> str:
    return f"""\
apiVersion: v1
kind: Namespace
metadata:
  name: {namespace_of(environment, cluster_type, target)}
  labels:
    environment: {environment}
    workspace: {WORKSPACE}
    workload: {WORKLOAD}
    deploymentTarget: {target_name(target)}
"""


def config_yaml(namespace: str, data: Mapping[str, str]) -> str:
    lines = "".join(f'  {key}: "{value}"\n' for key, value in data.items())
    return f"""\
apiVersion: v1
kind: ConfigMap
metadata:
  name: platform-config
  namespace: {namespace}
data:
{lines}"""


def assignment(
    environment: str,
    cluster_type: str,
    target: str,
    reconciler: str,
    config: Mapping[str, str] | None = None,
) -> dict[str, str]:
    folder = f"{cluster_type}/{target_name(target)}"
    namespace = namespace_of(environment, cluster_type, target)
    return {
        f"{folder}/namespace.yaml": namespace_yaml(environment, cluster_type, target),
        f"{folder}/platform-config.yaml": config_yaml(
            namespace, CONFIG[(environment, cluster_type)] if config is None else config
        ),
        f"{folder}/reconciler.yaml": reconciler,
    }


def platform_dev(app_url: str) -> dict[str, str]:
    """Story step 1: functional-test on drone (Flux), performance-test on large (Argo CD)."""
    return {
        **assignment(
            "dev",
            "drone",
            "functional-test",
            flux_reconciler(
                "functional-test",
                namespace_of("dev", "drone", "functional-test"),
                app_url,
                "dev",
                "./functional-test",
            ),
        ),
        **assignment(
            "dev",
            "large",
            "performance-test",
            argocd_reconciler(
                "performance-test",
                namespace_of("dev", "large", "performance-test"),
                app_url,
                "dev",
                "performance-test",
            ),
        ),
        ".github/tracking/Promoted_Commit_Id": PROMOTED["dev"] + "\n",
    }


def platform_stage(app_url: str) -> dict[str, str]:
    """Story step 2: uat-test on drone and large, both Flux."""
    files: dict[str, str] = {".github/tracking/Promoted_Commit_Id": PROMOTED["stage"] + "\n"}
    for cluster_type in ("drone", "large"):
        files |= assignment(
            "stage",
            cluster_type,
            "uat-test",
            flux_reconciler(
                "uat-test",
                namespace_of("stage", cluster_type, "uat-test"),
                app_url,
                "stage",
                "./uat-test",
            ),
        )
    return files


def build_platform(repo: WorkRepo, app_url: str) -> dict[str, str]:
    """dev and stage branch off one initial commit, one promotion each; returns the heads."""
    initial = repo.commit("Initial platform layout", {"README.md": "Platform GitOps repository.\n"})
    repo.commit("Promote dev: onboard hello-world-app", platform_dev(app_url))
    repo.checkout("stage", new=True, start=initial)
    repo.commit("Promote stage: uat-test", platform_stage(app_url))
    heads = {"dev": repo.head("dev"), "stage": repo.head("stage")}
    repo.checkout("dev")
    return heads


def build_app(repo: WorkRepo) -> dict[str, str]:
    repo.commit("hello-world 1.0.0 on dev", app_gitops("dev", "1.0.0"))
    repo.checkout("stage", new=True)
    repo.commit("hello-world 1.0.0 on stage", app_gitops("stage", "1.0.0"))
    heads = {"dev": repo.head("dev"), "stage": repo.head("stage")}
    repo.checkout("dev")
    return heads
