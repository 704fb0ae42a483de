"""Scheduling deployment targets onto cluster types: the reference fleet, policies, selectors."""

import random
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_core.kube import LabelSelector
from scheduler_core.scheduling import Schedule, namespace_problem, schedule
from scheduler_core.snapshot import ControlPlaneSnapshot
from tests.scheduler_core.scenario import (
    APP_GITOPS,
    APP_SRC_MAIN,
    DEV,
    HELLO_WORLD_WORKLOAD,
    MAIN,
    STAGE,
    cluster_type,
    load,
    reference_fleet,
)


def snapshots(
    dev: Mapping[str, str] = DEV,
    stage: Mapping[str, str] = STAGE,
    app_src: Mapping[str, str] = APP_SRC_MAIN,
    main: Mapping[str, str] = MAIN,
) -> Mapping[str, ControlPlaneSnapshot]:
    result = load(reference_fleet(main, dev, stage, app_src))
    assert result.errors == (), [str(error) for error in result.errors]
    return result.snapshots


def pairs(scheduled: Schedule) -> list[tuple[str, str]]:
    return [assignment.key for assignment in scheduled.assignments]


def policy(name: str, targets: str, cluster_types: str, workspace: str = "") -> str:
    workspace_line = f"    workspace: {workspace}\n" if workspace else ""
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: {name}
spec:
  deploymentTargetSelector:
{workspace_line}    labelSelector: {targets}
  clusterTypeSelector:
    labelSelector: {cluster_types}
"""


def test_dev_gets_functional_test_on_drone_and_performance_test_on_large_only() -> None:
    scheduled = schedule(snapshots()["dev"])

    assert scheduled.errors == ()
    assert pairs(scheduled) == [
        ("drone", "hello-world-app-functional-test"),
        ("large", "hello-world-app-performance-test"),
    ]
    drone, large = scheduled.assignments
    assert drone.policies == ("functional-test-policy",)
    assert large.policies == ("performance-test-policy",)
    assert {assignment.cluster_type.name for assignment in scheduled.assignments}.isdisjoint(
        {"command-center", "small"}
    )


def test_stage_gets_uat_test_on_every_cluster_type() -> None:
    scheduled = schedule(snapshots()["stage"])

    assert scheduled.errors == ()
    assert pairs(scheduled) == [
        ("drone", "hello-world-app-uat-test"),
        ("large", "hello-world-app-uat-test"),
    ]


def test_namespaces_and_folders_follow_environment_cluster_type_and_target() -> None:
    dev, stage = snapshots().values()

    namespaces = [
        (assignment.namespace, assignment.folder)
        for environment in (dev, stage)
        for assignment in schedule(environment).assignments
    ]

    assert namespaces == [
        ("dev-drone-hello-world-app-functional-test", "drone/hello-world-app-functional-test"),
        ("dev-large-hello-world-app-performance-test", "large/hello-world-app-performance-test"),
        ("stage-drone-hello-world-app-uat-test", "drone/hello-world-app-uat-test"),
        ("stage-large-hello-world-app-uat-test", "large/hello-world-app-uat-test"),
    ]


def test_a_target_belongs_to_the_environment_it_names() -> None:
    dev, stage = snapshots().values()

    assert [target.name for target in schedule(dev).deployment_targets] == [
        "hello-world-app-functional-test",
        "hello-world-app-performance-test",
    ]
    assert [target.name for target in schedule(stage).deployment_targets] == [
        "hello-world-app-uat-test"
    ]


def test_target_labels_are_its_own_then_the_workloads_then_workload_and_workspace() -> None:
    workload = HELLO_WORLD_WORKLOAD.replace(
        "    family: force\n", "    family: force\n    purpose: overruled-by-workload\n"
    ).replace(
        "      labels:\n        purpose: functional-test\n",
        "      labels:\n        purpose: functional-test\n        workspace: mine\n"
        "        own: kept\n",
    )

    (functional, performance) = schedule(
        snapshots(app_src={"workload/workload.yaml": workload})["dev"]
    ).deployment_targets

    assert functional.labels == {
        "purpose": "overruled-by-workload",
        "edge": "true",
        "own": "kept",
        "type": "application",
        "family": "force",
        "workload": "hello-world-app",
        "workspace": "kaizen-app-team",
    }
    assert functional.target == "functional-test"
    assert functional.workload == "hello-world-app"
    assert functional.workspace == "kaizen-app-team"
    assert functional.manifests["repo"] == APP_GITOPS
    assert performance.labels["purpose"] == "overruled-by-workload"


def test_overlapping_policies_give_one_assignment_recording_both() -> None:
    overlapping = policy(
        "edge-everything",
        "{matchLabels: {edge: 'true'}}",
        "{matchExpressions: [{key: region, operator: In, values: [east-us]}]}",
    )
    scheduled = schedule(snapshots(dev={**DEV, "scheduling/overlap.yaml": overlapping})["dev"])

    assert pairs(scheduled) == [
        ("command-center", "hello-world-app-functional-test"),
        ("drone", "hello-world-app-functional-test"),
        ("large", "hello-world-app-performance-test"),
    ]
    by_pair = {assignment.key: assignment for assignment in scheduled.assignments}
    assert by_pair[("drone", "hello-world-app-functional-test")].policies == (
        "edge-everything",
        "functional-test-policy",
    )
    assert by_pair[("command-center", "hello-world-app-functional-test")].policies == (
        "edge-everything",
    )


@pytest.mark.parametrize(
    ("cluster_types", "expected"),
    [
        (
            "{matchExpressions: [{key: size, operator: In, values: [large, small]}]}",
            ["large", "small"],
        ),
        (
            "{matchExpressions: [{key: size, operator: NotIn, values: [large]}]}",
            ["command-center", "drone", "small"],
        ),
        ("{matchExpressions: [{key: edge, operator: Exists}]}", ["drone"]),
        (
            "{matchExpressions: [{key: edge, operator: DoesNotExist}]}",
            ["command-center", "large", "small"],
        ),
        (
            "{matchLabels: {region: east-us}, "
            "matchExpressions: [{key: edge, operator: DoesNotExist}]}",
            ["command-center"],
        ),
        ("{}", ["command-center", "drone", "large", "small"]),
    ],
    ids=["In", "NotIn", "Exists", "DoesNotExist", "labels-and-expressions", "empty-matches-all"],
)
def test_cluster_type_selector_operators(cluster_types: str, expected: list[str]) -> None:
    probe = policy("probe", "{matchLabels: {purpose: uat-test}}", cluster_types)
    workload = HELLO_WORLD_WORKLOAD.replace("environment: stage", "environment: dev")
    dev = snapshots(
        dev={**DEV, "scheduling/probe.yaml": probe}, app_src={"workload/workload.yaml": workload}
    )["dev"]

    scheduled = schedule(dev)

    assert [
        assignment.cluster_type.name
        for assignment in scheduled.assignments
        if assignment.policies == ("probe",)
    ] == expected


def test_workspace_of_a_policy_filters_targets() -> None:
    elsewhere = policy("elsewhere", "{}", "{}", workspace="another-team")
    anywhere = policy("anywhere", "{matchLabels: {purpose: performance-test}}", "{}")
    scheduled = schedule(
        snapshots(
            dev={
                **DEV,
                "scheduling/elsewhere.yaml": elsewhere,
                "scheduling/anywhere.yaml": anywhere,
            }
        )["dev"]
    )

    assert all("elsewhere" not in assignment.policies for assignment in scheduled.assignments)
    assert [
        assignment.cluster_type.name
        for assignment in scheduled.assignments
        if "anywhere" in assignment.policies
    ] == ["command-center", "drone", "large", "small"]


def test_too_long_namespace_is_rejected_naming_its_parts() -> None:
    long_name = "a-cluster-type-with-a-really-quite-long-name"
    dev = {**DEV, "cluster-types/long.yaml": cluster_type(long_name, "arc-flux", edge="true")}
    scheduled = schedule(
        snapshots(
            dev={
                **dev,
                "scheduling/edge.yaml": policy(
                    "edge", "{matchLabels: {purpose: functional-test}}", "{}"
                ),
            }
        )["dev"]
    )

    (error,) = scheduled.errors
    assert error.cluster_type == long_name
    assert error.deployment_target == "hello-world-app-functional-test"
    assert error.message == (
        f"namespace 'dev-{long_name}-hello-world-app-functional-test' is 80 characters long, "
        "more than 63: environment 'dev' (3) + cluster type "
        f"'{long_name}' (44) + deployment target 'hello-world-app-functional-test' (31) "
        "+ 2 dashes; shorten one of them"
    )
    assert str(error).startswith(f"dev, cluster type {long_name}, deployment target ")
    # The other assignments of the same target still stand.
    assert ("drone", "hello-world-app-functional-test") in pairs(scheduled)
    assert long_name not in {assignment.cluster_type.name for assignment in scheduled.assignments}


def test_namespace_with_characters_a_namespace_cannot_have_names_the_part() -> None:
    problem = namespace_problem("dev", "edge.v2", "hello-world-app-functional-test")

    assert problem is not None
    assert problem.startswith("namespace 'dev-edge.v2-hello-world-app-functional-test' must ")
    assert problem.endswith("(cluster type 'edge.v2')")
    assert namespace_problem("dev", "drone", "hello-world-app-functional-test") is None


def test_targets_spelling_the_same_name_are_reported_and_the_first_kept() -> None:
    registration = MAIN["workloads/hello-world-app.yaml"]
    clash = HELLO_WORLD_WORKLOAD.replace("name: hello-world-app\n", "name: hello-world\n").replace(
        "- name: functional-test", "- name: app-functional-test"
    )
    main = {
        **MAIN,
        "workloads/clash.yaml": registration.replace(
            "name: hello-world-app", "name: clash"
        ).replace("path: workload/", "path: clash/"),
    }
    dev = snapshots(main=main, app_src={**APP_SRC_MAIN, "clash/workload.yaml": clash})["dev"]

    scheduled = schedule(dev)

    (error,) = scheduled.errors
    assert error.workload == "hello-world-app"
    assert "is named 'hello-world-app-functional-test', as target 'app-functional-test' " in (
        error.message
    )
    assert [target.workload for target in scheduled.deployment_targets].count("hello-world") == 2


def test_output_does_not_depend_on_file_order() -> None:
    reference = schedule(snapshots()["dev"])
    overlap = policy("all", "{}", "{}")
    items = [*DEV.items(), ("scheduling/all.yaml", overlap)]
    for seed in range(3):
        random.Random(seed).shuffle(items)
        renamed = {
            f"{index:02d}-{path.replace('/', '-')}": text
            for index, (path, text) in enumerate(items)
        }

        scheduled = schedule(snapshots(dev=renamed)["dev"])

        assert [assignment.key for assignment in scheduled.assignments] == sorted(
            assignment.key for assignment in scheduled.assignments
        )
        assert set(pairs(reference)) <= set(pairs(scheduled))
        assert len(pairs(scheduled)) == len(set(pairs(scheduled))) == 4 * 2


# Selector semantics, checked against the definitions in Kubernetes' API reference.

KEYS = st.sampled_from(["region", "size", "edge", "tier"])
VALUES = st.sampled_from(["a", "b", "c"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=4)


@st.composite
def requirements(draw: st.DrawFn) -> dict[str, object]:
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
    requirement: dict[str, object] = {"key": draw(KEYS), "operator": operator}
    if operator in ("In", "NotIn"):
        requirement["values"] = draw(st.lists(VALUES, min_size=1, max_size=3))
    return requirement


SELECTORS = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(KEYS, VALUES, max_size=2),
        "matchExpressions": st.lists(requirements(), max_size=3),
    },
)


def selector(data: Mapping[str, object]) -> LabelSelector:
    return LabelSelector.model_validate(data)


@given(LABELS)
def test_empty_selector_matches_everything(labels: dict[str, str]) -> None:
    assert selector({}).matches(labels)


@given(st.dictionaries(KEYS, VALUES, max_size=3), LABELS)
def test_match_labels_is_in_with_one_value(
    match_labels: dict[str, str], labels: dict[str, str]
) -> None:
    as_expressions = [
        {"key": key, "operator": "In", "values": [value]} for key, value in match_labels.items()
    ]
    assert selector({"matchLabels": match_labels}).matches(labels) == selector(
        {"matchExpressions": as_expressions}
    ).matches(labels)


@given(KEYS, st.lists(VALUES, min_size=1, max_size=3), LABELS)
def test_not_in_is_the_negation_of_in(key: str, values: list[str], labels: dict[str, str]) -> None:
    def one(operator: str) -> bool:
        expression = {"key": key, "operator": operator, "values": values}
        return selector({"matchExpressions": [expression]}).matches(labels)

    assert one("NotIn") is not one("In")
    assert one("In") == (labels.get(key) in values)


@given(KEYS, LABELS)
def test_does_not_exist_is_the_negation_of_exists(key: str, labels: dict[str, str]) -> None:
    def one(operator: str) -> bool:
        return selector({"matchExpressions": [{"key": key, "operator": operator}]}).matches(labels)

    assert one("DoesNotExist") is not one("Exists")
    assert one("Exists") == (key in labels)


@given(SELECTORS, requirements(), LABELS)
def test_another_requirement_never_widens_a_selection(
    base: dict[str, object], extra: dict[str, object], labels: dict[str, str]
) -> None:
    expressions = [*base.get("matchExpressions", []), extra]  # type: ignore[misc]
    narrower = selector({**base, "matchExpressions": expressions})

    if narrower.matches(labels):
        assert selector(base).matches(labels)
