"""The reference fleet's Template resources, written as Kalypso has them, rendered for its
assignments; the output must be the manifests Kalypso would commit, parsed back as YAML."""

from collections.abc import Mapping

import pytest
import yaml

from scheduler_core.gotemplate import StringMap, Template

APP_GITOPS = "https://git.example.com/fleet/app-gitops"

ARC_FLUX = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Template
metadata:
  name: arc-flux
spec:
  type: reconciler
  manifests:
    - |
      apiVersion: source.toolkit.fluxcd.io/v1
      kind: GitRepository
      metadata:
        name: {{ .DeploymentTargetName }}
        namespace: flux-system
      spec:
        interval: 30s
        url: {{ .Manifests.repo }}
        ref:
          branch: {{ .Manifests.branch }}
        secretRef:
          name: repo-secret
    - |
      apiVersion: kustomize.toolkit.fluxcd.io/v1
      kind: Kustomization
      metadata:
        name: {{ .DeploymentTargetName }}
        namespace: flux-system
      spec:
        interval: 30s
        targetNamespace: {{ .Namespace }}
        sourceRef:
          kind: GitRepository
          name: {{ .DeploymentTargetName }}
        path: {{ .Manifests.path }}
        prune: true
"""

ARGOCD = """\
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
        name: "{{ .DeploymentTargetName}}"
        namespace: argocd
      spec:
          destination:
              server: https://kubernetes.default.svc
              namespace: "{{ .Namespace}}"
          project: default
          source:
              path: "{{ .Manifests.path}}"
              repoURL: "{{ .Manifests.repo}}"
              targetRevision: "{{ .Manifests.branch}}"
              directory:
                  recurse: true
                  include: '*.yaml'
                  exclude: 'kustomization.yaml'
          syncPolicy:
              automated:
                  prune: true
                  selfHeal: true
                  allowEmpty: false
              syncOptions:
              - CreateNamespace=true
"""

NAMESPACE = """\
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
        name: "{{ .Namespace}}"
        labels:
          environment: "{{ .Environment}}"
          workspace: "{{ .Workspace}}"
          workload: "{{ .Workload}}"
          deploymentTarget: "{{ .DeploymentTargetName}}"
"""

CONFIGMAP = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Template
metadata:
  name: configmap
spec:
  type: config
  manifests:
    - |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: platform-config
        namespace: {{ .Namespace}}
      data:
      {{ toYaml .ConfigData | indent 2}}
"""

# Kalypso's own control-plane repository names reconcilers after a label the target may lack.
USE_CASE_NAME = (
    '{{ .Environment}}.{{ .Workspace}}.{{ index .Labels "use-case"}}'
    ".{{ .DeploymentTargetName}}.{{ .ClusterType}}"
)
ARC_FLUX_BY_USE_CASE = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Template
metadata:
  name: arc-flux
spec:
  type: reconciler
  manifests:
    - |
      apiVersion: source.toolkit.fluxcd.io/v1beta2
      kind: GitRepository
      metadata:
        name: USE_CASE_NAME
        namespace: flux-system
      spec:
        interval: 30s
        url: {{ .Manifests.repo}}
        ref:
          branch: {{ .Manifests.branch}}
""".replace("USE_CASE_NAME", USE_CASE_NAME)

DEV_CONFIG = {"ENVIRONMENT": "Dev", "SOME_COMMON_ENVIRONMENT_VARIABLE": "false"}
DRONE_DEV_CONFIG = {
    **DEV_CONFIG,
    "CLUSTER_NAME": "Drone",
    "REGION": "East US",
    "DATABASE_URL": "mysql://restricted-host:3306/mysqlrty123",
}
LARGE_DEV_CONFIG = {
    **DEV_CONFIG,
    "REGION": "West US",
    "DATABASE_URL": "mysql://west-host:8806/mysql",
}


def context(
    environment: str,
    cluster_type: str,
    target: str,
    labels: Mapping[str, str],
    config: Mapping[str, str],
) -> dict[str, object]:
    """The data Kalypso's templater hands a template for one assignment."""
    name = f"hello-world-app-{target}"
    return {
        "DeploymentTargetName": name,
        "Namespace": f"{environment}-{cluster_type}-{name}",
        "Environment": environment,
        "Workspace": "kaizen-app-team",
        "Workload": "hello-world-app",
        "Labels": StringMap(
            {
                **labels,
                "type": "application",
                "family": "force",
                "workload": "hello-world-app",
                "workspace": "kaizen-app-team",
            }
        ),
        "Manifests": StringMap(repo=APP_GITOPS, branch=environment, path=f"./{target}"),
        "ClusterType": cluster_type,
        "ConfigData": dict(config),
    }


FUNCTIONAL_ON_DRONE = context(
    "dev",
    "drone",
    "functional-test",
    {"purpose": "functional-test", "edge": "true"},
    DRONE_DEV_CONFIG,
)
PERFORMANCE_ON_LARGE = context(
    "dev",
    "large",
    "performance-test",
    {"purpose": "performance-test", "edge": "false"},
    LARGE_DEV_CONFIG,
)
UAT_ON_SMALL = context(
    "stage",
    "small",
    "uat-test",
    {"purpose": "uat-test"},
    {"ENVIRONMENT": "Stage", "REGION": "West US"},
)


def render_resource(resource: str, data: Mapping[str, object]) -> list[object]:
    """Renders every manifest of a Template resource, each a text of its own, as Kalypso does,
    and reads the results back as YAML documents."""
    manifests = yaml.safe_load(resource)["spec"]["manifests"]
    name = yaml.safe_load(resource)["metadata"]["name"]
    documents = []
    for index, text in enumerate(manifests):
        output = Template.parse(f"{name}-{index}", text).render(data)
        documents.append(yaml.safe_load(output))
    return documents


def test_arc_flux_reconciler_points_flux_at_the_targets_manifests() -> None:
    repository, kustomization = render_resource(ARC_FLUX, FUNCTIONAL_ON_DRONE)
    assert repository == {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": "hello-world-app-functional-test", "namespace": "flux-system"},
        "spec": {
            "interval": "30s",
            "url": APP_GITOPS,
            "ref": {"branch": "dev"},
            "secretRef": {"name": "repo-secret"},
        },
    }
    assert kustomization == {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "hello-world-app-functional-test", "namespace": "flux-system"},
        "spec": {
            "interval": "30s",
            "targetNamespace": "dev-drone-hello-world-app-functional-test",
            "sourceRef": {"kind": "GitRepository", "name": "hello-world-app-functional-test"},
            "path": "./functional-test",
            "prune": True,
        },
    }


def test_argocd_reconciler_is_an_application_for_the_target() -> None:
    [application] = render_resource(ARGOCD, PERFORMANCE_ON_LARGE)
    assert application == {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "hello-world-app-performance-test", "namespace": "argocd"},
        "spec": {
            "destination": {
                "server": "https://kubernetes.default.svc",
                "namespace": "dev-large-hello-world-app-performance-test",
            },
            "project": "default",
            "source": {
                "path": "./performance-test",
                "repoURL": APP_GITOPS,
                "targetRevision": "dev",
                "directory": {
                    "recurse": True,
                    "include": "*.yaml",
                    "exclude": "kustomization.yaml",
                },
            },
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True, "allowEmpty": False},
                "syncOptions": ["CreateNamespace=true"],
            },
        },
    }


@pytest.mark.parametrize("data", [FUNCTIONAL_ON_DRONE, PERFORMANCE_ON_LARGE, UAT_ON_SMALL])
def test_namespace_template_labels_the_namespace(data: dict[str, object]) -> None:
    [namespace] = render_resource(NAMESPACE, data)
    assert namespace == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": data["Namespace"],
            "labels": {
                "environment": data["Environment"],
                "workspace": "kaizen-app-team",
                "workload": "hello-world-app",
                "deploymentTarget": data["DeploymentTargetName"],
            },
        },
    }


@pytest.mark.parametrize(
    ("data", "config"),
    [
        (FUNCTIONAL_ON_DRONE, DRONE_DEV_CONFIG),
        (PERFORMANCE_ON_LARGE, LARGE_DEV_CONFIG),
        (UAT_ON_SMALL, {"ENVIRONMENT": "Stage", "REGION": "West US"}),
    ],
)
def test_configmap_template_carries_the_platform_config_as_strings(
    data: dict[str, object], config: dict[str, str]
) -> None:
    [config_map] = render_resource(CONFIGMAP, data)
    assert config_map == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "platform-config", "namespace": data["Namespace"]},
        "data": config,
    }


def test_configmap_output_is_byte_for_byte_what_kalypso_writes() -> None:
    text = yaml.safe_load(CONFIGMAP)["spec"]["manifests"][0]
    output = Template.parse("configmap", text).render(FUNCTIONAL_ON_DRONE)
    assert output == (
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        "  name: platform-config\n"
        "  namespace: dev-drone-hello-world-app-functional-test\n"
        "data:\n"
        "  CLUSTER_NAME: Drone\n"
        "  DATABASE_URL: mysql://restricted-host:3306/mysqlrty123\n"
        "  ENVIRONMENT: Dev\n"
        "  REGION: East US\n"
        '  SOME_COMMON_ENVIRONMENT_VARIABLE: "false"\n'
    )


def test_an_absent_label_indexed_from_labels_is_empty_as_in_go() -> None:
    [repository] = render_resource(ARC_FLUX_BY_USE_CASE, FUNCTIONAL_ON_DRONE)
    assert repository["metadata"]["name"] == (
        "dev.kaizen-app-team..hello-world-app-functional-test.drone"
    )
    with_use_case = {**FUNCTIONAL_ON_DRONE}
    with_use_case["Labels"] = StringMap({**FUNCTIONAL_ON_DRONE["Labels"], "use-case": "test"})  # type: ignore[dict-item]
    [repository] = render_resource(ARC_FLUX_BY_USE_CASE, with_use_case)
    assert repository["metadata"]["name"] == (
        "dev.kaizen-app-team.test.hello-world-app-functional-test.drone"
    )


def test_one_parsed_template_renders_every_assignment() -> None:
    text = yaml.safe_load(NAMESPACE)["spec"]["manifests"][0]
    template = Template.parse("default", text)
    names = [
        yaml.safe_load(template.render(data))["metadata"]["name"]
        for data in (FUNCTIONAL_ON_DRONE, PERFORMANCE_ON_LARGE, UAT_ON_SMALL)
    ]
    assert names == [
        "dev-drone-hello-world-app-functional-test",
        "dev-large-hello-world-app-performance-test",
        "stage-small-hello-world-app-uat-test",
    ]
