"""The reference fleet's repositories, as files, and an in-memory Git to read them from.

The control plane follows Kalypso's layout: `main` holds the Environments, the templates and
the WorkloadRegistration; `dev` and `stage` hold their cluster types, platform-config
ConfigMaps, scheduling policies, a BaseRepo pinning `main` and a GitOpsRepo. The Workload
lives in the application's source repository. Tests change a copy of these mappings and
load the result through `Repos`, which answers the loader's `Fetch` as the hub's Git reader
will: by branch head, or by the commit a BaseRepo pins.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler_core.loader import Fetched, FetchError, LoadResult, load_control_plane
from scheduler_core.snapshot import RepoRef

CONTROL_PLANE = "https://git.example.com/platform/control-plane.git"
PLATFORM_GITOPS = "https://git.example.com/platform/platform-gitops.git"
APP_SRC = "https://git.example.com/kaizen/app-src.git"
APP_GITOPS = "https://git.example.com/kaizen/app-gitops.git"


def environment(name: str) -> str:
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Environment
metadata:
  name: {name}
spec:
  controlPlane:
    repo: {CONTROL_PLANE}
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

HELLO_WORLD_REGISTRATION = f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: WorkloadRegistration
metadata:
  name: hello-world-app
  labels:
    type: application
spec:
  workload:
    repo: {APP_SRC}
    branch: main
    path: workload/
  workspace: kaizen-app-team
"""

MAIN: Mapping[str, str] = {
    ".environments/dev.yaml": environment("dev"),
    ".environments/stage.yaml": environment("stage"),
    "templates/arc-flux.yaml": ARC_FLUX_TEMPLATE,
    "templates/argocd.yaml": ARGOCD_TEMPLATE,
    "templates/namespace.yaml": NAMESPACE_TEMPLATE,
    "templates/configmap.yaml": CONFIGMAP_TEMPLATE,
    "workloads/hello-world-app.yaml": HELLO_WORLD_REGISTRATION,
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


def gitops_repo(env: str) -> str:
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: GitOpsRepo
metadata:
  name: {env}
spec:
  repo: {PLATFORM_GITOPS}
  branch: {env}
  path: .
"""


def base_repo(commit: str) -> str:
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: BaseRepo
metadata:
  name: main
spec:
  repo: {CONTROL_PLANE}
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

DEV: Mapping[str, str] = {
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
    "gitops-repo.yaml": gitops_repo("dev"),
}

STAGE: Mapping[str, str] = {
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
    "gitops-repo.yaml": gitops_repo("stage"),
}

HELLO_WORLD_WORKLOAD = f"""\
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
        repo: {APP_GITOPS}
        branch: dev
        path: ./functional-test
    - name: performance-test
      labels:
        purpose: performance-test
        edge: "false"
      environment: dev
      manifests:
        repo: {APP_GITOPS}
        branch: dev
        path: ./performance-test
    - name: uat-test
      labels:
        purpose: uat-test
      environment: stage
      manifests:
        repo: {APP_GITOPS}
        branch: stage
        path: ./uat-test
"""

APP_SRC_MAIN: Mapping[str, str] = {
    "workload/workload.yaml": HELLO_WORLD_WORKLOAD,
    "src/app.py": "print('hello')\n",
}


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
