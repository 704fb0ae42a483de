"""Incremental rendering: a change re-renders what depends on it, and ends where a full
render ends, after any sequence of control-plane edits."""

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core.incremental import render_incremental
from scheduler_core.output import RenderResult, render_environment
from scheduler_core.plan import PlannedAssignment, plan_environment
from scheduler_core.render import AssignmentRenderer, Rendered
from scheduler_core.snapshot import ControlPlaneSnapshot
from scheduler_core.state import RenderState, dump_state, load_state
from tests.scheduler_core.scenario import (
    APP_GITOPS,
    APP_SRC_MAIN,
    ARC_FLUX_TEMPLATE,
    DEV,
    HELLO_WORLD_WORKLOAD,
    MAIN,
    PERFORMANCE_TEST_POLICY,
    STAGE,
    UAT_TEST_POLICY,
    WEST_US,
    cluster_type,
    config_map,
    load,
    reference_fleet,
)
from tests.scheduler_core.test_config import config_schema
from tests.scheduler_core.test_render import NOW, PERFORMANCE, UAT

WORKLOAD_FILE = "workload/workload.yaml"
# A stage target whose namespace is too long on every cluster type.
LONG_TARGET = f"""\
    - name: canary-with-a-name-long-enough-to-overflow
      labels:
        purpose: uat-test
      environment: stage
      manifests:
        repo: {APP_GITOPS}
        branch: stage
        path: ./canary
"""
HELLO_WORKLOAD_WITH_LONG_TARGET = HELLO_WORLD_WORKLOAD + LONG_TARGET


@dataclass(frozen=True)
class Fleet:
    """The reference fleet's control plane as files: `main`, each environment, the workload."""

    main: Mapping[str, str] = field(default_factory=lambda: dict(MAIN))
    environments: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: {"dev": dict(DEV), "stage": dict(STAGE)}
    )
    app_src: Mapping[str, str] = field(default_factory=lambda: dict(APP_SRC_MAIN))

    def snapshots(self) -> Mapping[str, ControlPlaneSnapshot]:
        repos = reference_fleet(
            self.main, self.environments["dev"], self.environments["stage"], self.app_src
        )
        result = load(repos)
        assert result.errors == (), [str(error) for error in result.errors]
        return result.snapshots

    def edit(self, environment: str, change: Callable[[dict[str, str]], None]) -> "Fleet":
        files = dict(self.environments[environment])
        change(files)
        return replace(self, environments={**self.environments, environment: files})


def full(snapshot: ControlPlaneSnapshot, previous: Mapping[str, bytes]) -> RenderResult:
    return render_environment(plan_environment(snapshot), previous, now=NOW)


def first_render(fleet: Fleet) -> dict[str, RenderResult]:
    return {name: full(snapshot, {}) for name, snapshot in fleet.snapshots().items()}


def assert_same(incremental: RenderResult, expected: RenderResult) -> None:
    assert incremental.write == expected.write
    assert incremental.delete == expected.delete
    assert incremental.errors == expected.errors
    assert incremental.state == expected.state


@pytest.fixture
def rendered_pairs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The pairs the renderer renders from now on."""
    pairs: list[tuple[str, str]] = []
    render = AssignmentRenderer.render

    def counting(self: AssignmentRenderer, planned: PlannedAssignment) -> Rendered:
        pairs.append(planned.assignment.key)
        return render(self, planned)

    monkeypatch.setattr(AssignmentRenderer, "render", counting)
    return pairs


def west_us_database(files: dict[str, str]) -> None:
    files["cluster-types/west-us/west-us-config.yaml"] = config_map(
        "west-us-config", WEST_US, {"REGION": "West US", "DATABASE_URL": "mysql://west:8806/db"}
    )


def small_cluster_type(files: dict[str, str]) -> None:
    files["cluster-types/west-us/small/small-cluster-type.yaml"] = cluster_type(
        "small", "arc-flux", region="west-us", size="small"
    )


def performance_test_on_small(files: dict[str, str]) -> None:
    files["scheduling/kaizen/performance-test-policy.yaml"] = PERFORMANCE_TEST_POLICY.replace(
        "size: large", "size: small"
    )


def drone_only_config(files: dict[str, str]) -> None:
    files["configs/drone-extra.yaml"] = config_map(
        "drone-extra", {"cluster-type": "drone"}, {"EXTRA": "enabled"}
    )


@pytest.mark.parametrize(
    ("environment", "change", "expected"),
    [
        ("stage", west_us_database, [("large", UAT)]),
        ("stage", small_cluster_type, [("small", UAT)]),
        ("dev", performance_test_on_small, [("small", PERFORMANCE)]),
        ("dev", drone_only_config, [("drone", "hello-world-app-functional-test")]),
    ],
    ids=["config-map", "cluster-type", "policy", "new-config-map"],
)
def test_a_change_renders_only_the_assignments_depending_on_it(
    environment: str,
    change: Callable[[dict[str, str]], None],
    expected: list[tuple[str, str]],
    rendered_pairs: list[tuple[str, str]],
) -> None:
    before = first_render(Fleet())[environment]
    snapshot = Fleet().edit(environment, change).snapshots()[environment]
    rendered_pairs.clear()

    result = render_incremental(snapshot, before.apply({}), before.state, now=NOW)

    assert rendered_pairs == expected
    assert_same(result, full(snapshot, before.apply({})))


def test_the_west_us_change_writes_only_the_west_us_config(
    rendered_pairs: list[tuple[str, str]],
) -> None:
    before = first_render(Fleet())["stage"]
    snapshot = Fleet().edit("stage", west_us_database).snapshots()["stage"]

    result = render_incremental(snapshot, before.apply({}), before.state, now=NOW)

    assert list(result.write) == [f"large/{UAT}/platform-config.yaml"]
    assert result.delete == ()


def test_a_template_change_renders_the_cluster_types_using_it(
    rendered_pairs: list[tuple[str, str]],
) -> None:
    before = first_render(Fleet())
    labelled = ARC_FLUX_TEMPLATE.replace(
        "        namespace: flux-system\n      spec:\n        interval: 1m0s\n        url:",
        "        namespace: flux-system\n        labels:\n          type: {{ .ClusterType }}\n"
        "      spec:\n        interval: 1m0s\n        url:",
    )
    snapshots = replace(Fleet(), main={**MAIN, "templates/arc-flux.yaml": labelled}).snapshots()
    rendered_pairs.clear()

    results = {
        name: render_incremental(snapshot, before[name].apply({}), before[name].state, now=NOW)
        for name, snapshot in snapshots.items()
    }

    # dev: drone is Flux, large Argo CD; stage: both Flux.
    assert rendered_pairs == [
        ("drone", "hello-world-app-functional-test"),
        ("drone", UAT),
        ("large", UAT),
    ]
    assert list(results["dev"].write) == ["drone/hello-world-app-functional-test/reconciler.yaml"]


def test_a_template_moved_to_another_file_is_named_there_in_errors() -> None:
    broken = MAIN["templates/argocd.yaml"].replace("{{ .Namespace }}", "{{ .Namespace ")
    main = {key: text for key, text in MAIN.items() if key != "templates/argocd.yaml"}
    before = first_render(replace(Fleet(), main={**main, "templates/argocd.yaml": broken}))
    fleet = replace(Fleet(), main={**main, "templates/reconcilers/argocd.yaml": broken})
    snapshot = fleet.snapshots()["dev"]

    result = render_incremental(snapshot, before["dev"].apply({}), before["dev"].state, now=NOW)

    assert "(templates/reconcilers/argocd.yaml)" in result.errors[0].message
    assert_same(result, full(snapshot, before["dev"].apply({})))


def test_nothing_changed_renders_nothing(rendered_pairs: list[tuple[str, str]]) -> None:
    before = first_render(Fleet())
    rendered_pairs.clear()

    for name, snapshot in Fleet().snapshots().items():
        result = render_incremental(snapshot, before[name].apply({}), before[name].state, now=NOW)
        assert (result.write, result.delete, result.errors) == ({}, (), ())
        assert result.state == before[name].state
    assert rendered_pairs == []


def test_a_refused_pair_a_policy_no_longer_selects_is_forgotten() -> None:
    fleet = replace(Fleet(), app_src={WORKLOAD_FILE: HELLO_WORKLOAD_WITH_LONG_TARGET})
    before = first_render(fleet)["stage"]
    assert [error.kind for error in before.errors] == ["scheduling", "scheduling"]
    narrower = UAT_TEST_POLICY.replace("purpose: uat-test", "purpose: nothing")
    snapshot = fleet.edit(
        "stage", lambda files: files.update({"scheduling/kaizen/uat-test-policy.yaml": narrower})
    ).snapshots()["stage"]

    result = render_incremental(snapshot, before.apply({}), before.state, now=NOW)

    assert result.errors == ()
    assert_same(result, full(snapshot, before.apply({})))


def test_the_state_goes_through_json_unchanged() -> None:
    state = first_render(Fleet())["dev"].state

    data = dump_state(state)

    assert load_state(data) == state
    assert json.loads(data)["assignments"]["large"][PERFORMANCE]["status"] == "rendered"


def test_a_state_of_another_environment_is_refused() -> None:
    before = first_render(Fleet())

    with pytest.raises(ValueError, match="render state is of environment 'dev'"):
        render_incremental(Fleet().snapshots()["stage"], {}, before["dev"].state, now=NOW)


def test_a_tree_the_state_does_not_describe_is_refused() -> None:
    before = first_render(Fleet())["stage"]
    tree = before.apply({})
    del tree[f"large/{UAT}/platform-config.yaml"]
    snapshot = Fleet().edit("stage", west_us_database).snapshots()["stage"]

    with pytest.raises(ValueError, match=f"the tree has no large/{UAT}/platform-config.yaml"):
        render_incremental(snapshot, tree, before.state, now=NOW)


# Random edits of the reference control plane, each a function of the fleet's files.
LABELS = st.sampled_from(
    [
        {},
        {"region": "east-us"},
        {"region": "west-us"},
        {"size": "large"},
        {"cluster-type": "drone"},
        {"cluster-type": "small"},
        {"restricted": "true"},
        {"workload": "hello-world-app"},
        {"deployment-target": UAT},
        {"purpose": "functional-test", "region": "east-us"},
        {"edge": "true"},
    ]
)
VALUES = st.dictionaries(
    st.sampled_from(["REGION", "DATABASE_URL", "REPLICAS", "FEATURES"]),
    st.sampled_from(["East", "mysql://db:3306/x", "3", "'3'", "[a, b]", "{k: v}"]),
    max_size=3,
)
ENVIRONMENT = st.sampled_from(["dev", "stage"])
SELECTORS = st.sampled_from(
    [
        "{}",
        "{matchLabels: {size: large}}",
        "{matchLabels: {region: west-us}}",
        "{matchExpressions: [{key: edge, operator: DoesNotExist}]}",
        "{matchLabels: {purpose: uat-test}}",
        "{matchExpressions: [{key: purpose, operator: In, values: [functional-test, uat-test]}]}",
    ]
)

Edit = Callable[[Fleet], Fleet]


def _files_of(files: Mapping[str, str], kind: str) -> list[str]:
    return sorted(path for path, text in files.items() if f"\nkind: {kind}\n" in f"\n{text}")


@st.composite
def set_config_map(draw: st.DrawFn) -> Edit:
    environment, slot = draw(ENVIRONMENT), draw(st.integers(0, 2))
    labels, values = draw(LABELS), draw(VALUES)
    text = config_map(
        f"extra-{slot}", labels, {key: json.dumps(value) for key, value in values.items()}
    )

    def edit(fleet: Fleet) -> Fleet:
        return fleet.edit(environment, lambda files: files.update({f"extra/{slot}.yaml": text}))

    return edit


@st.composite
def drop_resource(draw: st.DrawFn) -> Edit:
    environment = draw(ENVIRONMENT)
    kind = draw(st.sampled_from(["ConfigMap", "ClusterType", "ConfigSchema"]))
    index = draw(st.integers(0, 10))

    def drop(files: dict[str, str]) -> None:
        if found := _files_of(files, kind):
            del files[found[index % len(found)]]

    return lambda fleet: fleet.edit(environment, drop)


@st.composite
def set_policy(draw: st.DrawFn) -> Edit:
    environment, index = draw(ENVIRONMENT), draw(st.integers(0, 3))
    targets, cluster_types = draw(SELECTORS), draw(SELECTORS)

    def change(files: dict[str, str]) -> None:
        found = _files_of(files, "SchedulingPolicy")
        name = f"policy-{index}" if index >= len(found) else None
        path = found[index] if name is None else f"scheduling/{name}.yaml"
        if name is None:
            name = files[path].split("  name: ", 1)[1].split("\n", 1)[0]
        files[path] = (
            "apiVersion: scheduler.kalypso.io/v1alpha1\nkind: SchedulingPolicy\n"
            f"metadata:\n  name: {name}\nspec:\n  deploymentTargetSelector:\n"
            f"    workspace: kaizen-app-team\n    labelSelector: {targets}\n"
            f"  clusterTypeSelector:\n    labelSelector: {cluster_types}\n"
        )

    return lambda fleet: fleet.edit(environment, change)


@st.composite
def set_cluster_type(draw: st.DrawFn) -> Edit:
    environment = draw(ENVIRONMENT)
    name = draw(st.sampled_from(["drone", "large", "small", "edge-box"]))
    labels = draw(LABELS)
    reconciler = draw(st.sampled_from(["arc-flux", "argocd"]))
    labels = {key: value for key, value in labels.items() if key != "cluster-type"}

    def change(files: dict[str, str]) -> None:
        for path in _files_of(files, "ClusterType"):
            if f"  name: {name}\n" in files[path]:
                del files[path]
        files[f"cluster-types/{name}.yaml"] = cluster_type(name, reconciler, **labels)

    return lambda fleet: fleet.edit(environment, change)


# Edits of the reference templates: the template, then (text in it, what replaces it)...
_FLUX_SOURCE = "    - |\n      apiVersion: source.toolkit.fluxcd.io/v1\n"
_FLUX_BRANCH = "          branch: {{ .Manifests.branch }}\n"
_FLUX_NAMESPACE = "        namespace: flux-system\n"
TEMPLATE_EDITS: Mapping[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "flux-labelled": (
        "arc-flux",
        ((_FLUX_NAMESPACE, _FLUX_NAMESPACE + "        labels: {a: b}\n"),),
    ),
    "flux-invalid-yaml": ("arc-flux", ((_FLUX_NAMESPACE, _FLUX_NAMESPACE + "       bad: [\n"),)),
    "flux-no-source-on-large": (
        "arc-flux",
        (
            (_FLUX_SOURCE, "    - |\n      {{- if ne .ClusterType `large` }}\n" + _FLUX_SOURCE[8:]),
            (_FLUX_BRANCH, _FLUX_BRANCH + "      {{- end }}\n"),
        ),
    ),
    "argocd-per-cluster-type": (
        "argocd",
        (('name: "{{ .DeploymentTargetName }}"', 'name: "{{ .ClusterType }}-app"'),),
    ),
    "namespace-unparsable": ("namespace", (("{{ .Namespace }}", "{{ .Namespace "),)),
    "configmap-misindented": ("configmap", (("      {{ toYaml", "        {{ toYaml"),)),
    "configmap-per-environment": (
        "configmap",
        (("name: platform-config", "name: platform-config-{{ .Environment }}"),),
    ),
}


def test_every_template_edit_changes_its_template() -> None:
    for name, replacements in TEMPLATE_EDITS.values():
        for old, _ in replacements:
            assert old in MAIN[f"templates/{name}.yaml"], (name, old)


@st.composite
def set_template(draw: st.DrawFn) -> Edit:
    name, replacements = TEMPLATE_EDITS[draw(st.sampled_from(sorted(TEMPLATE_EDITS)))]
    path = f"templates/{name}.yaml"
    text = MAIN[path]
    for old, new in replacements:
        text = text.replace(old, new)
    return lambda fleet: replace(fleet, main={**fleet.main, path: text})


@st.composite
def set_schema(draw: st.DrawFn) -> Edit:
    environment, labels = draw(ENVIRONMENT), draw(LABELS)
    schema = draw(
        st.sampled_from(
            [
                '{"required": ["REGION"]}',
                '{"required": ["CLUSTER_NAME"]}',
                '{"properties": {"ENVIRONMENT": {"enum": ["Dev"]}}}',
                '{"properties": {"DATABASE_URL": {"type": "string", "pattern": "^mysql"}}}',
                '{"properties": {"REPLICAS": {"type": "integer"}}}',
            ]
        )
    )
    text = config_schema("probe", schema, labels)
    return lambda fleet: fleet.edit(environment, lambda files: files.update({"probe.yaml": text}))


WORKLOADS = {
    "original": HELLO_WORLD_WORKLOAD,
    "uat-relabelled": HELLO_WORLD_WORKLOAD.replace("purpose: uat-test", "purpose: functional-test"),
    "performance-on-edge": HELLO_WORLD_WORKLOAD.replace('edge: "false"', 'edge: "true"'),
    "long-target": HELLO_WORKLOAD_WITH_LONG_TARGET,
    "new-path": HELLO_WORLD_WORKLOAD.replace("./uat-test", "./uat"),
}


@st.composite
def set_workload(draw: st.DrawFn) -> Edit:
    text = WORKLOADS[draw(st.sampled_from(sorted(WORKLOADS)))]
    return lambda fleet: replace(fleet, app_src={**fleet.app_src, WORKLOAD_FILE: text})


EDITS = st.one_of(
    set_config_map(),
    drop_resource(),
    set_policy(),
    set_cluster_type(),
    set_template(),
    set_schema(),
    set_workload(),
)


@settings(max_examples=60, deadline=None)
@given(edits=st.lists(EDITS, min_size=1, max_size=6))
def test_incremental_renders_end_where_full_renders_end(edits: list[Edit]) -> None:
    fleet = Fleet()
    trees: dict[str, Mapping[str, bytes]] = {}
    states: dict[str, RenderState] = {}
    for name, result in first_render(fleet).items():
        trees[name], states[name] = result.apply({}), result.state

    for edit in edits:
        fleet = edit(fleet)
        for name, snapshot in fleet.snapshots().items():
            expected = full(snapshot, trees[name])
            assert_same(render_incremental(snapshot, trees[name], states[name], now=NOW), expected)
            trees[name] = expected.apply(trees[name])
            # Through JSON, as the hub keeps it between renders.
            states[name] = load_state(dump_state(expected.state))
