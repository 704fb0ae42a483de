"""Rendering the reference fleet into its platform GitOps tree: folders, files and documents,
the story's changes, and failures kept to the assignment they belong to."""

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from scheduler_core.gotemplate import Limits
from scheduler_core.output import RenderResult, render_environment
from scheduler_core.plan import plan_environment
from scheduler_core.render import MAX_ASSIGNMENT_OUTPUT, TimeLimit
from scheduler_core.snapshot import ControlPlaneSnapshot
from tests.scheduler_core.scenario import (
    APP_GITOPS,
    APP_SRC_MAIN,
    ARGOCD_TEMPLATE,
    CONFIGMAP_TEMPLATE,
    DEV,
    HELLO_WORLD_WORKLOAD,
    MAIN,
    STAGE,
    WEST_US,
    cluster_type,
    config_map,
    load,
    reference_fleet,
)
from tests.scheduler_core.test_config import config_schema

NOW = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
FUNCTIONAL = "hello-world-app-functional-test"
PERFORMANCE = "hello-world-app-performance-test"
UAT = "hello-world-app-uat-test"
FILES = ("namespace.yaml", "platform-config.yaml", "reconciler.yaml")


def snapshots(
    main: Mapping[str, str] = MAIN,
    dev: Mapping[str, str] = DEV,
    stage: Mapping[str, str] = STAGE,
    app_src: Mapping[str, str] = APP_SRC_MAIN,
) -> Mapping[str, ControlPlaneSnapshot]:
    result = load(reference_fleet(main, dev, stage, app_src))
    assert result.errors == (), [str(error) for error in result.errors]
    return result.snapshots


def render(
    snapshot: ControlPlaneSnapshot, previous: Mapping[str, bytes] | None = None
) -> RenderResult:
    return render_environment(plan_environment(snapshot), previous or {}, now=NOW)


def tree(environment: str = "dev", **changes: Mapping[str, str]) -> dict[str, bytes]:
    """The tree a first render of the reference fleet (with `changes`) writes."""
    return render(snapshots(**changes)[environment]).apply({})


def documents(content: bytes) -> list[Any]:
    return list(yaml.safe_load_all(content))


def folder(cluster_type: str, target: str) -> list[str]:
    return [f"{cluster_type}/{target}/{name}" for name in FILES]


def with_template(name: str, template: str) -> dict[str, str]:
    return {**MAIN, f"templates/{name}.yaml": template}


def test_dev_has_a_folder_per_cluster_type_and_one_per_assignment() -> None:
    result = render(snapshots()["dev"])

    assert result.errors == ()
    assert result.delete == ()
    assert list(result.write) == [
        "command-center/README.md",
        "drone/README.md",
        *folder("drone", FUNCTIONAL),
        "large/README.md",
        *folder("large", PERFORMANCE),
        "small/README.md",
    ]
    for empty in ("command-center", "small"):
        readme = result.write[f"{empty}/README.md"].decode()
        assert readme.startswith(f"# Cluster type {empty} in dev\n")
        assert "Nothing is assigned to this cluster type." in readme


def test_namespaces_are_environment_cluster_type_and_deployment_target() -> None:
    written = tree()

    (drone,) = documents(written[f"drone/{FUNCTIONAL}/namespace.yaml"])
    (large,) = documents(written[f"large/{PERFORMANCE}/namespace.yaml"])

    assert drone == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "dev-drone-hello-world-app-functional-test",
            "labels": {
                "environment": "dev",
                "workspace": "kaizen-app-team",
                "workload": "hello-world-app",
                "deploymentTarget": FUNCTIONAL,
            },
        },
    }
    assert large["metadata"]["name"] == "dev-large-hello-world-app-performance-test"


def test_platform_config_holds_each_assignments_composed_values() -> None:
    result = render(snapshots()["dev"])

    (drone,) = documents(result.write[f"drone/{FUNCTIONAL}/platform-config.yaml"])
    (large,) = documents(result.write[f"large/{PERFORMANCE}/platform-config.yaml"])

    assert drone["kind"] == "ConfigMap"
    assert drone["metadata"] == {
        "name": "platform-config",
        "namespace": "dev-drone-hello-world-app-functional-test",
    }
    assert drone["data"] == {
        "CLUSTER_NAME": "Drone",
        "DATABASE_URL": "mysql://restricted-host:3306/mysqlrty123",
        "ENVIRONMENT": "Dev",
        "REGION": "East US",
        "SOME_COMMON_ENVIRONMENT_VARIABLE": "false",
    }
    assert large["data"] == {
        "DATABASE_URL": "mysql://west-host:8806/mysql",
        "ENVIRONMENT": "Dev",
        "REGION": "West US",
        "SOME_COMMON_ENVIRONMENT_VARIABLE": "false",
    }
    planned = {
        planned.assignment.key: planned.config.config_hash
        for planned in plan_environment(snapshots()["dev"]).assignments
    }
    assert {record.key: record.config_hash for record in result.state.records()} == planned


def test_flux_cluster_types_get_a_git_repository_and_a_kustomization() -> None:
    (source, kustomization) = documents(tree()[f"drone/{FUNCTIONAL}/reconciler.yaml"])

    assert source == {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": FUNCTIONAL, "namespace": "flux-system"},
        "spec": {"interval": "1m0s", "url": APP_GITOPS, "ref": {"branch": "dev"}},
    }
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["metadata"] == {"name": FUNCTIONAL, "namespace": "flux-system"}
    assert kustomization["spec"] == {
        "interval": "1m0s",
        "targetNamespace": "dev-drone-hello-world-app-functional-test",
        "sourceRef": {"kind": "GitRepository", "name": FUNCTIONAL},
        "path": "./functional-test",
        "prune": True,
    }


def test_argo_cd_cluster_types_get_an_application() -> None:
    (application,) = documents(tree()[f"large/{PERFORMANCE}/reconciler.yaml"])

    assert application["apiVersion"] == "argoproj.io/v1alpha1"
    assert application["kind"] == "Application"
    assert application["metadata"] == {"name": PERFORMANCE, "namespace": "argocd"}
    assert application["spec"]["destination"] == {
        "server": "https://kubernetes.default.svc",
        "namespace": "dev-large-hello-world-app-performance-test",
    }
    assert application["spec"]["source"] == {
        "repoURL": APP_GITOPS,
        "targetRevision": "dev",
        "path": "./performance-test",
    }


def test_a_cluster_type_readme_says_what_is_assigned_there() -> None:
    readme = tree()["drone/README.md"].decode()

    assert "- labels: `edge=true`, `region=east-us`, `restricted=true`" in readme
    assert "- templates: reconciler `arc-flux`, namespace `default`, config `configmap`" in readme
    assert (
        f"| [{FUNCTIONAL}]({FUNCTIONAL}/) | hello-world-app "
        "| dev-drone-hello-world-app-functional-test | functional-test-policy | rendered |"
    ) in readme
    assert PERFORMANCE not in readme


def test_each_assignment_has_a_content_hash_of_its_files() -> None:
    first = render(snapshots()["stage"])
    again = render(snapshots()["stage"], first.apply({}))
    west_us = {"REGION": "West US", "DATABASE_URL": "mysql://west-host:8806/stage"}
    stage = {
        **STAGE,
        "cluster-types/west-us/west-us-config.yaml": config_map("west-us-config", WEST_US, west_us),
    }
    changed = render(snapshots(stage=stage)["stage"], first.apply({}))

    def hashes(result: RenderResult) -> dict[tuple[str, str], str | None]:
        return {record.key: record.content_hash for record in result.state.records()}

    assert hashes(again) == hashes(first)
    drone, large = hashes(first).values()
    assert drone != large
    assert hashes(changed)[("drone", UAT)] == drone
    assert hashes(changed)[("large", UAT)] not in (large, None)


def test_stage_assigns_uat_test_to_every_stage_cluster_type() -> None:
    written = tree("stage")

    assert sorted(written) == [
        "drone/README.md",
        *folder("drone", UAT),
        "large/README.md",
        *folder("large", UAT),
    ]
    for name in ("drone", "large"):
        (namespace,) = documents(written[f"{name}/{UAT}/namespace.yaml"])
        assert namespace["metadata"]["name"] == f"stage-{name}-hello-world-app-uat-test"
        source, _ = documents(written[f"{name}/{UAT}/reconciler.yaml"])
        assert source["spec"]["ref"] == {"branch": "stage"}


def test_west_us_config_change_on_stage_changes_only_west_us_assignments() -> None:
    previous = tree("stage")
    west_us = {"REGION": "West US", "DATABASE_URL": "mysql://west-host:8806/stage"}
    stage = {
        **STAGE,
        "cluster-types/west-us/west-us-config.yaml": config_map("west-us-config", WEST_US, west_us),
    }

    result = render(snapshots(stage=stage)["stage"], previous)

    assert result.errors == ()
    assert result.delete == ()
    assert list(result.write) == [f"large/{UAT}/platform-config.yaml"]
    (config,) = documents(result.write[f"large/{UAT}/platform-config.yaml"])
    assert config["data"] == {
        "DATABASE_URL": "mysql://west-host:8806/stage",
        "ENVIRONMENT": "Stage",
        "REGION": "West US",
    }


def test_cluster_type_small_added_to_stage_gets_uat_test() -> None:
    previous = tree("stage")
    small = cluster_type("small", "arc-flux", region="west-us", size="small")
    stage = {**STAGE, "cluster-types/west-us/small/small-cluster-type.yaml": small}

    result = render(snapshots(stage=stage)["stage"], previous)

    assert result.delete == ()
    assert list(result.write) == ["small/README.md", *folder("small", UAT)]
    (config,) = documents(result.write[f"small/{UAT}/platform-config.yaml"])
    assert config["metadata"]["namespace"] == "stage-small-hello-world-app-uat-test"
    assert config["data"] == {"ENVIRONMENT": "Stage", "REGION": "West US"}


def test_a_broken_template_keeps_its_assignments_previous_output_and_others_are_written() -> None:
    previous = tree()
    broken = ARGOCD_TEMPLATE.replace('namespace: "{{ .Namespace }}"', 'namespace: "{{ .Namespace "')
    dev = {**DEV, "configs/dev-config.yaml": config_map("dev-config", {}, {"ENVIRONMENT": "Dev2"})}

    result = render(snapshots(main=with_template("argocd", broken), dev=dev)["dev"], previous)

    (error,) = result.errors
    assert (error.kind, error.cluster_type, error.deployment_target) == (
        "template",
        "large",
        PERFORMANCE,
    )
    assert (error.template, error.file) == ("argocd", "reconciler.yaml")
    assert error.message.startswith(
        f"dev, cluster type large, deployment target {PERFORMANCE}: reconciler.yaml: "
        "Template argocd (templates/argocd.yaml) manifests[0] does not parse: "
        "template: argocd/manifests[0]:"
    )
    assert result.delete == ()
    assert set(result.write) == {f"drone/{FUNCTIONAL}/platform-config.yaml", "large/README.md"}
    (config,) = documents(result.write[f"drone/{FUNCTIONAL}/platform-config.yaml"])
    assert config["data"]["ENVIRONMENT"] == "Dev2"
    kept = result.apply(previous)
    assert [kept[path] for path in folder("large", PERFORMANCE)] == [
        previous[path] for path in folder("large", PERFORMANCE)
    ]
    assert "| render failed; previous output kept |" in result.write["large/README.md"].decode()
    record = result.state.assignments["large"][PERFORMANCE]
    assert (record.status, record.files) == ("failed", FILES)


# The sort loop the issue found running for over a minute, in the argocd Template's name:
# argocd is large's reconciler, so it fails the one assignment on large.
SORT_LOOP = "{{$l := until 100000}}{{range until 2000}}{{$_ := sortAlpha $l}}{{end}}"
SPENDTHRIFT_ARGOCD = ARGOCD_TEMPLATE.replace(
    'name: "{{ .DeploymentTargetName }}"', f'name: "{{{{ .DeploymentTargetName }}}}{SORT_LOOP}"'
)
# Within its budget, but fifty thousand steps: long enough to read the clock.
SLOW_ARGOCD = ARGOCD_TEMPLATE.replace(
    'name: "{{ .DeploymentTargetName }}"',
    'name: "{{ .DeploymentTargetName }}{{ range 50000 }}{{ end }}"',
)


class Timer:
    """A monotonic clock moving on by `tick` seconds at every reading."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_a_template_over_its_budget_fails_its_assignment_only() -> None:
    previous = tree()
    dev = {**DEV, "configs/dev-config.yaml": config_map("dev-config", {}, {"ENVIRONMENT": "Dev2"})}

    result = render(
        snapshots(main=with_template("argocd", SPENDTHRIFT_ARGOCD), dev=dev)["dev"], previous
    )

    (error,) = result.errors
    assert (error.kind, error.template, error.file) == ("template", "argocd", "reconciler.yaml")
    assert (error.cluster_type, error.deployment_target) == ("large", PERFORMANCE)
    assert error.message.startswith(
        f"dev, cluster type large, deployment target {PERFORMANCE}: reconciler.yaml: "
        "Template argocd (templates/argocd.yaml) manifests[0] fails: "
        "template: argocd/manifests[0]:4:"
    )
    assert error.message.endswith(
        "error calling sortAlpha: exceeded the budget of "
        f"{Limits().max_cost} cost units (evaluation steps, elements touched, characters read "
        "or written)"
    )
    assert error.line == 4
    # The other assignment is written; this one keeps what it had.
    assert set(result.write) == {f"drone/{FUNCTIONAL}/platform-config.yaml", "large/README.md"}
    assert result.state.assignments["large"][PERFORMANCE].status == "failed"
    kept = result.apply(previous)
    assert [kept[path] for path in folder("large", PERFORMANCE)] == [
        previous[path] for path in folder("large", PERFORMANCE)
    ]


def test_an_assignment_rendering_past_its_time_limit_fails_and_the_others_render() -> None:
    timer = Timer(tick=0.5)
    snapshot = snapshots(main=with_template("argocd", SLOW_ARGOCD))["dev"]

    result = render_environment(
        plan_environment(snapshot), {}, now=NOW, time_limit=TimeLimit(2.0, timer)
    )

    (error,) = result.errors
    assert (error.kind, error.template) == ("template", "argocd")
    assert (error.cluster_type, error.deployment_target) == ("large", PERFORMANCE)
    assert error.message.startswith(
        f"dev, cluster type large, deployment target {PERFORMANCE}: reconciler.yaml: "
        "Template argocd (templates/argocd.yaml) manifests[0] fails: "
    )
    assert error.message.endswith("exceeded the time limit of 2 seconds")
    assert set(folder("drone", FUNCTIONAL)) <= set(result.write)
    assert not any(path.startswith(f"large/{PERFORMANCE}/") for path in result.write)
    # Without the time limit, the same templates render: it was the clock that stopped them.
    assert render(snapshot).errors == ()


def test_an_assignment_rendering_more_than_its_output_limit_fails() -> None:
    half = "#" * (MAX_ASSIGNMENT_OUTPUT // 2 + 1)  # comments: YAML documents of nothing
    template = (
        "apiVersion: scheduler.kalypso.io/v1alpha1\nkind: Template\nmetadata:\n  name: argocd\n"
        f"spec:\n  type: reconciler\n  manifests:\n    - '{half}'\n    - '{half}'\n"
    )

    result = render(snapshots(main=with_template("argocd", template))["dev"])

    (error,) = result.errors
    assert (error.cluster_type, error.deployment_target) == ("large", PERFORMANCE)
    assert error.message.endswith(
        f"manifests[1] fails: the assignment's files would hold more than "
        f"{MAX_ASSIGNMENT_OUTPUT} characters, the limit of one assignment"
    )
    assert set(folder("drone", FUNCTIONAL)) <= set(result.write)


def test_a_schema_violation_keeps_its_assignments_previous_output() -> None:
    previous = tree()
    schema = config_schema(
        "database-url",
        '{"properties": {"DATABASE_URL": {"type": "string", "pattern": "^postgres://"}}}',
        labels={"region": "west-us"},
    )
    dev = {
        **DEV,
        "schemas/database-url.yaml": schema,
        "configs/dev-config.yaml": config_map("dev-config", {}, {"ENVIRONMENT": "Dev2"}),
    }

    result = render(snapshots(dev=dev)["dev"], previous)

    (error,) = result.errors
    assert (error.kind, error.cluster_type, error.deployment_target) == (
        "config",
        "large",
        PERFORMANCE,
    )
    assert "config DATABASE_URL breaks schema ConfigSchema database-url" in error.message
    assert "(ConfigMaps: west-us-config)" in error.message
    assert set(result.write) == {f"drone/{FUNCTIONAL}/platform-config.yaml", "large/README.md"}
    assert result.delete == ()


def test_a_template_emitting_invalid_yaml_names_template_file_line_and_problem() -> None:
    # The data indented deeper than its first line: every assignment's config is broken.
    misindented = CONFIGMAP_TEMPLATE.replace(
        "      {{ toYaml .ConfigData | indent 2 }}", "        {{ toYaml .ConfigData | indent 2 }}"
    )

    result = render(snapshots(main=with_template("configmap", misindented))["dev"])

    assert [(error.kind, error.cluster_type, error.file) for error in result.errors] == [
        ("manifest", "drone", "platform-config.yaml"),
        ("manifest", "large", "platform-config.yaml"),
    ]
    drone = result.errors[0]
    assert (drone.template, drone.line) == ("configmap", 8)
    assert drone.message == (
        f"dev, cluster type drone, deployment target {FUNCTIONAL}: platform-config.yaml: "
        "Template configmap (templates/configmap.yaml) manifests[0] renders a document that is "
        "not a Kubernetes object in valid YAML, at line 8 of its output: "
        "'DATABASE_URL: mysql://restricted-host:3306/mysqlrty123': "
        "while parsing a block mapping did not find expected key"
    )
    assert not any(path.startswith(("drone/hello", "large/hello")) for path in result.write)
    assert "| render failed; no output yet |" in result.write["drone/README.md"].decode()
    assert result.state.assignments["drone"][FUNCTIONAL].files == ()


def test_a_cluster_type_naming_a_template_nobody_defined_is_reported() -> None:
    drone = cluster_type("drone", "flux-v3", region="east-us", restricted="true", edge="true")
    dev = {**DEV, "cluster-types/east-us/restricted/drones/drone-cluster-type.yaml": drone}

    result = render(snapshots(dev=dev)["dev"])

    (error,) = result.errors
    assert error.message == (
        f"dev, cluster type drone, deployment target {FUNCTIONAL}: reconciler.yaml: "
        "ClusterType drone spec.reconciler names Template 'flux-v3', which the control plane "
        "does not define"
    )
    assert f"large/{PERFORMANCE}/reconciler.yaml" in result.write


def test_a_template_failing_while_rendering_names_its_line_and_column() -> None:
    demanding = MAIN["templates/namespace.yaml"].replace(
        'workload: "{{ .Workload }}"',
        """workload: '{{ required "every target needs a team label" .Labels.team }}'""",
    )

    result = render(snapshots(main=with_template("namespace", demanding))["dev"])

    assert {error.deployment_target for error in result.errors} == {FUNCTIONAL, PERFORMANCE}
    error = result.errors[0]
    assert (error.kind, error.template, error.file) == ("template", "default", "namespace.yaml")
    assert error.message.endswith("error calling required: every target needs a team label")
    assert "Template default (templates/namespace.yaml) manifests[0] fails: template: " in (
        error.message
    )
    assert error.line is not None


RECONCILER_DOCUMENTS = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: Template
metadata:
  name: arc-flux
spec:
  type: reconciler
  manifests:
    - |
      {{- if eq .ClusterType "large" }}
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: only-on-large
      {{- end }}
    - |
      # the source
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: first
      ---
      # nothing here
      ---
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: second
        annotations:
          rendered: "{{ now | date "2006-01-02" }}"
          team: "{{ index .Labels "team" }}"
"""


def test_empty_documents_are_dropped_and_the_others_kept_in_order() -> None:
    result = render(snapshots(main=with_template("arc-flux", RECONCILER_DOCUMENTS))["dev"])

    content = result.write[f"drone/{FUNCTIONAL}/reconciler.yaml"]
    assert [document["metadata"]["name"] for document in documents(content)] == [
        "first",
        "second",
    ]
    assert content.decode().startswith("# the source\napiVersion: v1\n")
    assert content.count(b"---") == 1


def test_templates_read_the_injected_clock_and_kalypsos_string_maps() -> None:
    result = render(snapshots(main=with_template("arc-flux", RECONCILER_DOCUMENTS))["dev"])

    _, second = documents(result.write[f"drone/{FUNCTIONAL}/reconciler.yaml"])
    # `index` of a label the target lacks gives "", as on Go's map[string]string.
    assert second["metadata"]["annotations"] == {"rendered": "2026-03-01", "team": ""}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("- apiVersion: v1\n  kind: ConfigMap", "a Kubernetes object is a mapping, not a list"),
        ("just text", "a Kubernetes object is a mapping, not a scalar"),
        ("apiVersion: v1\nmetadata: {name: x}", "kind must be a string"),
        ("apiVersion: v1\nkind: 3", "kind must be a string"),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b",
            "key 'name' appears twice",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\ndata: !vault secret",
            "tag '!vault' is not a standard YAML tag",
        ),
        ("apiVersion: v1\nkind: ConfigMap\ndata: {a: [1, 2}", "while parsing a flow sequence"),
    ],
    ids=[
        "list",
        "scalar",
        "no-kind",
        "kind-not-a-string",
        "duplicate-key",
        "unknown-tag",
        "syntax",
    ],
)
def test_documents_that_are_not_kubernetes_objects_are_refused(body: str, problem: str) -> None:
    manifest = "".join(f"      {line}\n" for line in body.splitlines())
    template = (
        "apiVersion: scheduler.kalypso.io/v1alpha1\nkind: Template\nmetadata:\n  name: default\n"
        f"spec:\n  type: namespace\n  manifests:\n    - |\n{manifest}"
    )

    result = render(snapshots(main=with_template("namespace", template))["dev"])

    assert [error.kind for error in result.errors] == ["manifest", "manifest"]
    assert problem in result.errors[0].message
    assert not any(path.endswith("namespace.yaml") for path in result.write)


def test_a_namespace_too_long_for_kubernetes_is_refused_clearly() -> None:
    long_target = "performance-test-with-a-name-far-too-long"
    workload = HELLO_WORLD_WORKLOAD.replace(
        "    - name: uat-test\n",
        f"""\
    - name: {long_target}
      labels:
        purpose: performance-test
        edge: "false"
      environment: dev
      manifests:
        repo: {APP_GITOPS}
        branch: dev
        path: ./{long_target}
    - name: uat-test
""",
    )

    result = render(snapshots(app_src={"workload/workload.yaml": workload})["dev"])

    (error,) = result.errors
    name = f"hello-world-app-{long_target}"
    namespace = f"dev-large-{name}"
    assert error.kind == "scheduling"
    assert error.message == (
        f"dev, cluster type large, deployment target {name}: namespace {namespace!r} is "
        f"{len(namespace)} characters long, more than 63: environment 'dev' (3) + cluster type "
        f"'large' (5) + deployment target {name!r} ({len(name)}) + 2 dashes; shorten one of them"
    )
    assert not any(name in path for path in result.write)
    assert name not in result.write["large/README.md"].decode()
    assert f"large/{PERFORMANCE}/reconciler.yaml" in result.write
    assert result.state.assignments["large"][name].status == "rejected"


def test_files_no_longer_produced_are_removed_and_others_left_alone() -> None:
    previous = {
        **tree(),
        f"drone/{FUNCTIONAL}/extra.yaml": b"kind: Leftover\n",
        "drone/hello-world-app-retired/reconciler.yaml": b"kind: Kustomization\n",
        "drone/notes.txt": b"hand-written\n",
        "retired-type/README.md": b"# retired\n",
        "retired-type/hello-world-app-retired/namespace.yaml": b"kind: Namespace\n",
        ".github/tracking/Promoted_Commit_Id": b"0123abc\n",
        "README.md": b"# Platform GitOps\n",
    }

    result = render(snapshots()["dev"], previous)

    assert result.write == {}
    assert result.delete == (
        f"drone/{FUNCTIONAL}/extra.yaml",
        "drone/hello-world-app-retired/reconciler.yaml",
        "drone/notes.txt",
        "retired-type/README.md",
        "retired-type/hello-world-app-retired/namespace.yaml",
    )
    after = result.apply(previous)
    assert after[".github/tracking/Promoted_Commit_Id"] == b"0123abc\n"
    assert after["README.md"] == b"# Platform GitOps\n"
    assert after == tree() | {
        ".github/tracking/Promoted_Commit_Id": b"0123abc\n",
        "README.md": b"# Platform GitOps\n",
    }


def test_removed_assignments_lose_their_folder() -> None:
    previous = tree()
    dev = {key: text for key, text in DEV.items() if "performance-test-policy" not in key}

    result = render(snapshots(dev=dev)["dev"], previous)

    assert result.delete == tuple(folder("large", PERFORMANCE))
    assert list(result.write) == ["large/README.md"]
    assert "Nothing is assigned" in result.write["large/README.md"].decode()
