"""The reference scenario's repositories as files: what the demo commits and the tests build on.

Kalypso's layout: `main` holds Environments, templates and the WorkloadRegistration; `dev` and
`stage` their cluster types, ConfigMaps, policies, BaseRepo and GitOpsRepo. The Workload is in
`app-src`, the manifests (a folder per target) in `app-gitops`.
"""

from collections.abc import Mapping
from dataclasses import dataclass

WORKLOAD = "hello-world-app"
WORKSPACE = "kaizen-app-team"
IMAGE = "ghcr.io/contoso/hello-world"


@dataclass(frozen=True, slots=True)
class Repositories:
    """Where the scenario's four repositories are, as their files name them."""

    control_plane: str
    app_src: str
    platform_gitops: str
    app_gitops: str


def environment(name: str, control_plane: str) -> str:
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Environment
metadata:
  name: {name}
spec:
  controlPlane:
    repo: {control_plane}
    branch: {name}
    path: .
"""


ARC_FLUX_TEMPLATE = """\
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
        interval: 1m0s
        url: {{ .Manifests.repo }}
        ref:
          branch: {{ .Manifests.branch }}
    - |
      apiVersion: kustomize.toolkit.fluxcd.io/v1
      kind: Kustomization
      metadata:
        name: {{ .DeploymentTargetName }}
        namespace: flux-system
      spec:
        interval: 1m0s
        targetNamespace: {{ .Namespace }}
        sourceRef:
          kind: GitRepository
          name: {{ .DeploymentTargetName }}
        path: {{ .Manifests.path }}
        prune: true
"""

ARGOCD_TEMPLATE = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Template
metadata:
  name: argocd
spec:
  type: reconciler
  manifests:
    - apiVersion: argoproj.io/v1alpha1
      kind: Application
      metadata:
        name: "{{ .DeploymentTargetName }}"
        namespace: argocd
      spec:
        project: default
        destination:
          server: https://kubernetes.default.svc
          namespace: "{{ .Namespace }}"
        source:
          repoURL: "{{ .Manifests.repo }}"
          targetRevision: "{{ .Manifests.branch }}"
          path: "{{ .Manifests.path }}"
        syncPolicy:
          automated:
            prune: true
            selfHeal: true
"""

NAMESPACE_TEMPLATE = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Template
metadata:
  name: default
spec:
  type: namespace
  manifests:
    - apiVersion: v1
      kind: Namespace
      metadata:
        name: "{{ .Namespace }}"
        labels:
          environment: "{{ .Environment }}"
          workspace: "{{ .Workspace }}"
          workload: "{{ .Workload }}"
          deploymentTarget: "{{ .DeploymentTargetName }}"
"""

CONFIGMAP_TEMPLATE = """\
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
        namespace: {{ .Namespace }}
      data:
      {{ toYaml .ConfigData | indent 2 }}
"""


def registration(app_src: str) -> str:
    """The WorkloadRegistration of hello-world-app, whose Workload is in `app_src`."""
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: WorkloadRegistration
metadata:
  name: hello-world-app
  labels:
    type: application
spec:
  workload:
    repo: {app_src}
    branch: main
    path: workload/
  workspace: kaizen-app-team
"""


def main_branch(repos: Repositories) -> dict[str, str]:
    """The control plane's `main`: Environments, Templates, the WorkloadRegistration."""
    return {
        ".environments/dev.yaml": environment("dev", repos.control_plane),
        ".environments/stage.yaml": environment("stage", repos.control_plane),
        "templates/arc-flux.yaml": ARC_FLUX_TEMPLATE,
        "templates/argocd.yaml": ARGOCD_TEMPLATE,
        "templates/namespace.yaml": NAMESPACE_TEMPLATE,
        "templates/configmap.yaml": CONFIGMAP_TEMPLATE,
        "workloads/hello-world-app.yaml": registration(repos.app_src),
        "README.md": "# Control plane\n",
        ".github/workflows/ci.yaml": "name: ci\non: [push]\njobs: {}\n",
    }


def cluster_type(name: str, reconciler: str, **labels: str) -> str:
    label_lines = "".join(f'    {key}: "{value}"\n' for key, value in labels.items())
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: ClusterType
metadata:
  name: {name}
  labels:
{label_lines}spec:
  reconciler: {reconciler}
  namespaceService: default
  configType: configmap
"""


def config_map(name: str, labels: Mapping[str, str], data: Mapping[str, str]) -> str:
    """A platform-config ConfigMap; each data value is written as the YAML text it is."""
    label_lines = "".join(f'    {key}: "{value}"\n' for key, value in labels.items())
    data_lines = "".join(f"  {key}: {value}\n" for key, value in data.items())
    return f"""\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  labels:
    platform-config: "true"
{label_lines}data:
{data_lines}"""


def gitops_repo(env: str, platform_gitops: str) -> str:
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: GitOpsRepo
metadata:
  name: {env}
spec:
  repo: {platform_gitops}
  branch: {env}
  path: .
"""


def base_repo(commit: str, control_plane: str) -> str:
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: BaseRepo
metadata:
  name: main
spec:
  repo: {control_plane}
  branch: main
  path: .
  commit: {commit}
"""


FUNCTIONAL_TEST_POLICY = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: functional-test-policy
spec:
  deploymentTargetSelector:
    workspace: kaizen-app-team
    labelSelector:
      matchLabels:
        purpose: functional-test
        edge: "true"
  clusterTypeSelector:
    labelSelector:
      matchLabels:
        restricted: "true"
        edge: "true"
"""

PERFORMANCE_TEST_POLICY = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: performance-test-policy
spec:
  deploymentTargetSelector:
    workspace: kaizen-app-team
    labelSelector:
      matchLabels:
        purpose: performance-test
        edge: "false"
  clusterTypeSelector:
    labelSelector:
      matchLabels:
        size: large
"""

UAT_TEST_POLICY = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: uat-test-policy
spec:
  deploymentTargetSelector:
    workspace: kaizen-app-team
    labelSelector:
      matchLabels:
        purpose: uat-test
  clusterTypeSelector:
    labelSelector: {}
"""

EAST_US = {"region": "east-us"}
WEST_US = {"region": "west-us"}
RESTRICTED = {"restricted": "true"}


def dev_branch(repos: Repositories) -> dict[str, str]:
    """The control plane's `dev`: four cluster types, their config, two policies."""
    return {
        "cluster-types/east-us/restricted/drones/drone-cluster-type.yaml": cluster_type(
            "drone", "arc-flux", region="east-us", restricted="true", edge="true"
        ),
        "cluster-types/east-us/restricted/drones/drone-config.yaml": config_map(
            "drone-config", {"cluster-type": "drone"}, {"CLUSTER_NAME": "Drone"}
        ),
        "cluster-types/east-us/restricted/centers/center-cluster-type.yaml": cluster_type(
            "command-center", "arc-flux", region="east-us", restricted="true"
        ),
        "cluster-types/east-us/restricted/restricted-config.yaml": config_map(
            "restricted-config",
            RESTRICTED,
            {"DATABASE_URL": "mysql://restricted-host:3306/mysqlrty123"},
        ),
        "cluster-types/east-us/east-us-config.yaml": config_map(
            "east-us-config", EAST_US, {"REGION": "East US"}
        ),
        "cluster-types/west-us/large/large-cluster-type.yaml": cluster_type(
            "large", "argocd", region="west-us", size="large"
        ),
        "cluster-types/west-us/small/small-cluster-type.yaml": cluster_type(
            "small", "arc-flux", region="west-us", size="small"
        ),
        "cluster-types/west-us/west-us-config.yaml": config_map(
            "west-us-config",
            WEST_US,
            {"REGION": "West US", "DATABASE_URL": "mysql://west-host:8806/mysql"},
        ),
        # As the tutorial writes it: the value is the text `false`, and stays that string.
        "configs/dev-config.yaml": config_map(
            "dev-config", {}, {"ENVIRONMENT": "Dev", "SOME_COMMON_ENVIRONMENT_VARIABLE": '"false"'}
        ),
        "scheduling/kaizen/functional-test-policy.yaml": FUNCTIONAL_TEST_POLICY,
        "scheduling/kaizen/performance-test-policy.yaml": PERFORMANCE_TEST_POLICY,
        "gitops-repo.yaml": gitops_repo("dev", repos.platform_gitops),
    }


def stage_branch(repos: Repositories) -> dict[str, str]:
    """The control plane's `stage`: drone and large, their config, one policy."""
    return {
        "cluster-types/east-us/restricted/drones/drone-cluster-type.yaml": cluster_type(
            "drone", "arc-flux", region="east-us", restricted="true", edge="true"
        ),
        "cluster-types/west-us/large/large-cluster-type.yaml": cluster_type(
            "large", "arc-flux", region="west-us", size="large"
        ),
        "cluster-types/west-us/west-us-config.yaml": config_map(
            "west-us-config", WEST_US, {"REGION": "West US"}
        ),
        "configs/stage-config.yaml": config_map("stage-config", {}, {"ENVIRONMENT": "Stage"}),
        "scheduling/kaizen/uat-test-policy.yaml": UAT_TEST_POLICY,
        "gitops-repo.yaml": gitops_repo("stage", repos.platform_gitops),
    }


def workload(app_gitops: str) -> str:
    """The Workload hello-world-app, with its manifests in `app_gitops`."""
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Workload
metadata:
  name: hello-world-app
  labels:
    type: application
    family: force
spec:
  deploymentTargets:
    - name: functional-test
      labels:
        purpose: functional-test
        edge: "true"
      environment: dev
      manifests:
        repo: {app_gitops}
        branch: dev
        path: ./functional-test
    - name: performance-test
      labels:
        purpose: performance-test
        edge: "false"
      environment: dev
      manifests:
        repo: {app_gitops}
        branch: dev
        path: ./performance-test
    - name: uat-test
      labels:
        purpose: uat-test
      environment: stage
      manifests:
        repo: {app_gitops}
        branch: stage
        path: ./uat-test
"""


def app_src_main(repos: Repositories) -> dict[str, str]:
    return {
        "workload/workload.yaml": workload(repos.app_gitops),
        "src/app.py": "print('hello')\n",
    }


def target_name(target: str) -> str:
    return f"{WORKLOAD}-{target}"


def deployment(version: str, *, label: bool = False, image: str = IMAGE) -> str:
    labels = f'\n    app.kubernetes.io/version: "{version}"' if label else ""
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello-world
  labels:
    app: hello-world{labels}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: hello-world}}
  template:
    metadata:
      labels: {{app: hello-world}}
    spec:
      initContainers:
      - name: migrate
        image: ghcr.io/contoso/migrations:7
      containers:
      - name: hello-world
        image: {image}:{version}
      - name: proxy
        image: docker.io/envoyproxy/envoy:v1.31.0
---
apiVersion: v1
kind: Service
metadata:
  name: hello-world
spec:
  selector: {{app: hello-world}}
  ports:
  - port: 80
"""


def descriptor(target: str, environment: str, version: str) -> str:
    return f"""\
apiVersion: hub.kalypso.io/v1alpha1
kind: DeploymentDescriptor
metadata:
  name: {target_name(target)}
spec:
  workload:
    name: {WORKLOAD}
  deploymentTarget:
    name: {target}
    environment: {environment}
  workloadVersion:
    version: {version}
    build: build-17
"""


def app_gitops(environment: str, version: str) -> dict[str, str]:
    """The app-gitops folders of a branch: the version comes from the descriptor
    (functional-test), the label (performance-test) and the image tag (uat-test)."""
    return {
        "functional-test/deployment.yaml": deployment(version),
        "functional-test/descriptor.yaml": descriptor("functional-test", environment, version),
        "performance-test/deployment.yaml": deployment(version, label=True),
        "uat-test/deployment.yaml": deployment(version),
        "README.md": "Manifests of hello-world-app, one folder per deployment target.\n",
    }
