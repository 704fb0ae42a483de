"""Platform config per assignment: matching, YAML values, merging, precedence, schemas, hashes."""

import hashlib
import json
import random
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core.config import merge, parse_value
from scheduler_core.plan import EnvironmentPlan, PlannedAssignment, plan_environment
from tests.scheduler_core.scenario import (
    APP_GITOPS,
    APP_SRC_MAIN,
    DEV,
    HELLO_WORLD_WORKLOAD,
    MAIN,
    STAGE,
    UAT_TEST_POLICY,
    config_map,
    load,
    reference_fleet,
)

DRONE = ("drone", "hello-world-app-functional-test")
LARGE = ("large", "hello-world-app-performance-test")


def plan(
    environment: str = "dev",
    dev: Mapping[str, str] = DEV,
    stage: Mapping[str, str] = STAGE,
    app_src: Mapping[str, str] = APP_SRC_MAIN,
) -> EnvironmentPlan:
    result = load(reference_fleet(MAIN, dev, stage, app_src))
    assert result.errors == (), [str(error) for error in result.errors]
    return plan_environment(result.snapshots[environment])


def by_pair(environment_plan: EnvironmentPlan) -> dict[tuple[str, str], PlannedAssignment]:
    return {planned.assignment.key: planned for planned in environment_plan.assignments}


def dev_with(**files: str) -> dict[tuple[str, str], PlannedAssignment]:
    return by_pair(
        plan(dev={**DEV, **{f"configs/{name}.yaml": text for name, text in files.items()}})
    )


def config_schema(name: str, schema: str, labels: Mapping[str, str] | None = None) -> str:
    label_lines = "".join(f'    {key}: "{value}"\n' for key, value in (labels or {}).items())
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: ConfigSchema
metadata:
  name: {name}
  labels:
{label_lines}spec:
  schema: {schema}
"""


def test_dev_drone_functional_test_config() -> None:
    drone = by_pair(plan())[DRONE]

    assert drone.config.data == {
        "CLUSTER_NAME": "Drone",
        "DATABASE_URL": "mysql://restricted-host:3306/mysqlrty123",
        "ENVIRONMENT": "Dev",
        "REGION": "East US",
        "SOME_COMMON_ENVIRONMENT_VARIABLE": "false",
    }
    assert drone.config.config_maps == (
        "dev-config",
        "drone-config",
        "east-us-config",
        "restricted-config",
    )
    assert drone.config.key_sources["DATABASE_URL"] == ("restricted-config",)
    assert drone.config.valid


def test_dev_large_performance_test_config() -> None:
    large = by_pair(plan())[LARGE]

    assert large.config.data == {
        "DATABASE_URL": "mysql://west-host:8806/mysql",
        "ENVIRONMENT": "Dev",
        "REGION": "West US",
        "SOME_COMMON_ENVIRONMENT_VARIABLE": "false",
    }
    assert large.config.config_maps == ("dev-config", "west-us-config")


def test_stage_configs() -> None:
    stage = by_pair(plan("stage"))

    assert stage[("drone", "hello-world-app-uat-test")].config.data == {"ENVIRONMENT": "Stage"}
    assert stage[("large", "hello-world-app-uat-test")].config.data == {
        "ENVIRONMENT": "Stage",
        "REGION": "West US",
    }


def test_config_map_changed_on_stage_changes_only_the_west_us_assignments() -> None:
    before = by_pair(plan("stage"))
    west = config_map(
        "west-us-config", {"region": "west-us"}, {"REGION": "West US", "DATABASE_URL": "pg://new"}
    )
    after = by_pair(
        plan("stage", stage={**STAGE, "cluster-types/west-us/west-us-config.yaml": west})
    )

    changed = {
        key for key in before if before[key].config.config_hash != after[key].config.config_hash
    }
    assert changed == {("large", "hello-world-app-uat-test")}
    assert after[("large", "hello-world-app-uat-test")].inputs.config_maps == (
        "stage-config",
        "west-us-config",
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("123", "123"),
        ("'123'", "123"),
        ('"123"', '"123"'),
        ("1.5", "1.5"),
        ("true", "true"),
        ("'false'", "false"),
        (" 'it''s' ", "it's"),
        ("null", "null"),
        ("East US", "East US"),
        ("mysql://west-host:8806/mysql", "mysql://west-host:8806/mysql"),
        ("2024-05-01", "2024-05-01"),
        ("{replicas: 2, zones: [a, b]}", {"replicas": 2, "zones": ["a", "b"]}),
        ("- a\n- b\n", ["a", "b"]),
        ("key: [unclosed", "key: [unclosed"),
        ("a: 1\na: 2\n", "a: 1\na: 2\n"),
        (".nan", ".nan"),
        ("{1: one}", "{1: one}"),
        ("", ""),
        ("  ", "  "),
    ],
    ids=[
        "int",
        "single-quoted-int",
        "double-quoted-int",
        "float",
        "bool",
        "single-quoted-bool",
        "single-quoted-text",
        "null",
        "text",
        "url",
        "date-stays-text",
        "map",
        "list",
        "invalid-yaml-stays-raw",
        "duplicate-key-stays-raw",
        "not-json-stays-raw",
        "non-string-key-stays-raw",
        "empty",
        "blank",
    ],
)
def test_scalars_keep_their_text_and_maps_and_lists_are_read_as_yaml(text: str, value: Any) -> None:
    assert parse_value(text) == value
    assert type(parse_value(text)) is type(value)


def test_values_in_a_config_map_keep_their_text() -> None:
    # Two layers of YAML: the ConfigMap's (whose data values are strings) and the value's own.
    typed = config_map(
        "typed",
        {},
        {
            "REPLICAS": "\"'3'\"",
            "PORT": '"8080"',
            "DEBUG": "\"'true'\"",
            "RATIO": '"0.5"',
            "NAME": "app",
        },
    )
    config = dev_with(typed=typed)[DRONE].config

    assert config.data["REPLICAS"] == "3"
    assert config.data["PORT"] == "8080"
    assert config.data["DEBUG"] == "true"
    assert config.data["RATIO"] == "0.5"
    assert config.data["NAME"] == "app"


def test_schemas_may_check_text_as_the_number_or_boolean_it_spells() -> None:
    values = config_map(
        "values",
        {},
        {"REPLICAS": '"11"', "DEBUG": '"false"', "VERSION": '"1.10"', "WORKERS": '"0"'},
    )
    schema = config_schema(
        "typed",
        """|
    {"type": "object",
     "properties": {"REPLICAS": {"type": "integer", "maximum": 20},
                    "DEBUG": {"type": "boolean"},
                    "VERSION": {"type": "string", "pattern": "^1[.]10$"},
                    "WORKERS": {"type": "integer", "minimum": 1}}}""",
    )
    drone = dev_with(values=values, typed=schema)[DRONE]

    assert drone.config.data["REPLICAS"] == "11"
    [error] = drone.errors
    assert (error.key, error.message) == ("WORKERS", "0 is less than the minimum of 1")


NESTED_GENERAL = """|
    logging:
      level: info
      sinks: [stdout]
    sidecars:
      - name: envoy
        image: envoy:1.28
        resources: {cpu: 100m}
      - name: fluentbit
        image: fluent-bit:2.2
    zones: [a, b, c]"""

NESTED_EAST = """|
    logging:
      level: debug
      sinks: [stdout, file]
    sidecars:
      - name: envoy
        resources: {memory: 64Mi}
      - name: otel
        image: otel:0.9
    zones: [east-1]"""


def test_structured_values_merge_maps_and_named_lists_and_replace_other_lists() -> None:
    configs = dev_with(
        a_general=config_map("general", {}, {"PLATFORM": NESTED_GENERAL}),
        b_east=config_map("east", {"region": "east-us"}, {"PLATFORM": NESTED_EAST}),
    )

    assert configs[DRONE].config.data["PLATFORM"] == {
        "logging": {"level": "debug", "sinks": ["stdout", "file"]},
        "sidecars": [
            {
                "name": "envoy",
                "image": "envoy:1.28",
                "resources": {"cpu": "100m", "memory": "64Mi"},
            },
            {"name": "fluentbit", "image": "fluent-bit:2.2"},
            {"name": "otel", "image": "otel:0.9"},
        ],
        "zones": ["east-1"],
    }
    assert configs[DRONE].config.key_sources["PLATFORM"] == ("general", "east")
    # The west-us cluster type only gets the general values.
    assert configs[LARGE].config.data["PLATFORM"]["zones"] == ["a", "b", "c"]


def test_an_empty_list_clears_and_a_scalar_replaces_a_map() -> None:
    configs = dev_with(
        general=config_map(
            "general", {}, {"SIDECARS": '"[{name: envoy}]"', "LIMITS": '"{cpu: 1}"'}
        ),
        drone_only=config_map(
            "drone-only", {"cluster-type": "drone"}, {"SIDECARS": '"[]"', "LIMITS": "none"}
        ),
    )

    assert configs[DRONE].config.data["SIDECARS"] == []
    assert configs[DRONE].config.data["LIMITS"] == "none"
    assert configs[LARGE].config.data["SIDECARS"] == [{"name": "envoy"}]


def test_precedence_is_fewer_labels_first_then_name() -> None:
    configs = dev_with(
        # More labels beat fewer, whatever the names; equal label counts go by name.
        aa=config_map("aa-two-labels", {"region": "east-us", "edge": "true"}, {"LEVEL": "two"}),
        zz=config_map("zz-no-labels", {}, {"LEVEL": "none"}),
        alpha=config_map("alpha", {"region": "east-us"}, {"TIE": "alpha"}),
        beta=config_map("beta", {"restricted": "true"}, {"TIE": "beta"}),
    )

    drone = configs[DRONE].config
    assert drone.data["LEVEL"] == "two"
    assert drone.data["TIE"] == "beta"
    assert drone.config_maps.index("zz-no-labels") < drone.config_maps.index("alpha")
    assert drone.config_maps.index("beta") < drone.config_maps.index("aa-two-labels")
    assert drone.key_sources["LEVEL"] == ("zz-no-labels", "aa-two-labels")


@pytest.mark.parametrize(
    ("labels", "applies_to"),
    [
        ({"cluster-type": "large"}, {LARGE}),
        ({"deployment-target": "hello-world-app-functional-test"}, {DRONE}),
        ({"workload": "hello-world-app"}, {DRONE, LARGE}),
        ({"workload": "another-app"}, set()),
        ({"purpose": "performance-test"}, {LARGE}),
        ({"size": "large", "purpose": "performance-test"}, {LARGE}),
        ({"size": "large", "purpose": "functional-test"}, set()),
        ({"workspace": "kaizen-app-team", "edge": "true"}, {DRONE}),
        ({}, {DRONE, LARGE}),
    ],
    ids=[
        "cluster-type",
        "deployment-target",
        "workload",
        "other-workload",
        "target-label",
        "cluster-type-and-target-label",
        "one-label-misses",
        "workspace-and-edge",
        "no-labels",
    ],
)
def test_config_maps_apply_when_every_label_matches(
    labels: dict[str, str], applies_to: set[tuple[str, str]]
) -> None:
    configs = dev_with(probe=config_map("probe", labels, {"PROBE": "hit"}))

    assert {key for key, planned in configs.items() if "PROBE" in planned.config.data} == applies_to


def test_schema_violation_names_key_schema_and_config_maps() -> None:
    schema = config_schema(
        "database-url",
        """|
    {"type": "object",
     "properties": {"DATABASE_URL": {"type": "string", "pattern": "^postgres://"}},
     "required": ["DATABASE_URL", "FEATURE_FLAGS"]}""",
        labels={"region": "west-us"},
    )
    plan_ = plan(dev={**DEV, "schemas/database-url.yaml": schema})
    configs = by_pair(plan_)

    assert configs[DRONE].config.valid
    large = configs[LARGE]
    assert not large.config.valid
    assert large.inputs.config_schemas == ("database-url",)
    wrong, missing = large.errors
    assert (wrong.key, wrong.schema, wrong.config_maps) == (
        "DATABASE_URL",
        "ConfigSchema database-url",
        ("west-us-config",),
    )
    assert "does not match '^postgres://'" in wrong.message
    assert (missing.key, missing.config_maps) == ("FEATURE_FLAGS", ("dev-config", "west-us-config"))
    assert missing.message == "'FEATURE_FLAGS' is a required property"
    assert str(wrong) == (
        "dev, cluster type large, deployment target hello-world-app-performance-test: "
        "config DATABASE_URL breaks schema ConfigSchema database-url: "
        "'mysql://west-host:8806/mysql' does not match '^postgres://' "
        "(ConfigMaps: west-us-config)"
    )
    assert plan_.errors == (wrong, missing)


def test_nested_violation_names_the_named_list_item_and_who_set_it() -> None:
    schema = config_schema(
        "sidecars",
        """|
    {"properties": {"PLATFORM": {"properties": {"sidecars": {"items": {
      "required": ["image"],
      "properties": {"resources": {"properties": {"memory": {"pattern": "Gi$"}}}}}}}}}}""",
    )
    configs = dev_with(
        a_general=config_map("general", {}, {"PLATFORM": NESTED_GENERAL}),
        b_east=config_map("east", {"region": "east-us"}, {"PLATFORM": NESTED_EAST}),
        c_extra=config_map(
            "no-image", {"cluster-type": "drone"}, {"PLATFORM": '"{sidecars: [{name: bare}]}"'}
        ),
        schema=schema,
    )

    errors = {(error.key, error.config_maps) for error in configs[DRONE].errors}
    assert errors == {
        ("PLATFORM.sidecars[envoy].resources.memory", ("east",)),
        ("PLATFORM.sidecars[bare].image", ("no-image",)),
    }
    assert configs[LARGE].config.valid


def test_schemas_a_workload_declares_apply_to_its_targets_in_their_dialect() -> None:
    # dependentRequired is a 2019-09 keyword: draft-07 (the default) does not know it.
    schema = '{"dependentRequired": {"REGION": ["ZONE"]}}'
    modern = (
        '{"$schema": "https://json-schema.org/draft/2020-12/schema", '
        '"dependentRequired": {"REGION": ["ZONE"]}}'
    )
    workload = HELLO_WORLD_WORKLOAD.replace(
        "spec:\n  deploymentTargets:\n",
        f"spec:\n  configSchemas:\n    - '{schema}'\n  deploymentTargets:\n",
    ).replace(
        "      environment: dev\n      manifests:\n        repo: "
        f"{APP_GITOPS}\n        branch: dev\n        path: ./performance-test\n",
        "      environment: dev\n      manifests:\n        repo: "
        f"{APP_GITOPS}\n        branch: dev\n        path: ./performance-test\n"
        f"      configSchemas:\n        - '{modern}'\n",
    )
    configs = by_pair(plan(app_src={"workload/workload.yaml": workload}))

    assert configs[DRONE].config.valid
    assert configs[DRONE].config.declared_schemas == ("Workload hello-world-app configSchemas[0]",)
    (error,) = configs[LARGE].errors
    assert error.schema == (
        "Workload hello-world-app deploymentTargets[performance-test].configSchemas[0]"
    )
    assert error.message == "'ZONE' is a dependency of 'REGION'"


def test_a_schema_referring_to_what_cannot_be_resolved_is_reported() -> None:
    schema = config_schema("remote", '{"$ref": "https://schemas.example.com/platform.json"}')
    configs = dev_with(schema=schema)

    (error, *_) = configs[DRONE].errors
    assert error.schema == "ConfigSchema remote"
    assert error.message.startswith("the schema refers to what cannot be resolved")


def test_config_hash_is_sha256_of_canonical_json_and_shared_by_equal_configs() -> None:
    everywhere = UAT_TEST_POLICY.replace("name: uat-test-policy", "name: everywhere").replace(
        "      matchLabels:\n        purpose: uat-test\n", "      matchLabels: {}\n"
    )
    configs = by_pair(plan(dev={**DEV, "scheduling/everywhere.yaml": everywhere}))

    drone = configs[DRONE].config
    canonical = json.dumps(drone.data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert drone.config_hash == hashlib.sha256(canonical.encode()).hexdigest()
    west = {
        key: planned.config.config_hash
        for key, planned in configs.items()
        if key[0] in ("large", "small")
    }
    assert len(west) == 4
    assert len(set(west.values())) == 1
    assert drone.config_hash not in west.values()


def test_plan_gives_each_assignment_its_template_context_and_inputs() -> None:
    drone = by_pair(plan())[DRONE]

    context = drone.template_context()
    assert context == {
        "DeploymentTargetName": "hello-world-app-functional-test",
        "Namespace": "dev-drone-hello-world-app-functional-test",
        "Environment": "dev",
        "Workspace": "kaizen-app-team",
        "Workload": "hello-world-app",
        "Labels": {
            "purpose": "functional-test",
            "edge": "true",
            "type": "application",
            "family": "force",
            "workload": "hello-world-app",
            "workspace": "kaizen-app-team",
        },
        "Manifests": {"repo": APP_GITOPS, "branch": "dev", "path": "./functional-test"},
        "ClusterType": "drone",
        "ConfigData": drone.config.data,
        "Repo": APP_GITOPS,
        "Branch": "dev",
        "Path": "./functional-test",
    }
    assert drone.inputs.cluster_type == "drone"
    assert drone.inputs.workload == "hello-world-app"
    assert drone.inputs.workload_registration == "hello-world-app"
    assert drone.inputs.policies == ("functional-test-policy",)
    assert drone.inputs.templates == ("arc-flux", "configmap", "default")
    assert by_pair(plan())[LARGE].inputs.templates == ("argocd", "configmap", "default")


@settings(max_examples=15, deadline=None)
@given(st.randoms(use_true_random=False))
def test_composition_does_not_depend_on_file_order(shuffler: random.Random) -> None:
    reference = {key: planned.config for key, planned in by_pair(plan()).items()}
    items = list(DEV.items())
    shuffler.shuffle(items)
    renamed = {f"{index:02d}.yaml": text for index, (_, text) in enumerate(items)}

    shuffled = {key: planned.config for key, planned in by_pair(plan(dev=renamed)).items()}

    assert shuffled == reference


# Merging, as properties. Keys fix the kind of what they hold (m: map, l: named list, u: other
# list, s: scalar), as a config schema would; merging is associative for such values.

SCALARS = st.one_of(st.integers(-3, 3), st.sampled_from(["x", "y", ""]), st.booleans(), st.none())


def maps(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    children: dict[str, st.SearchStrategy[Any]] = {
        "s0": SCALARS,
        "s1": SCALARS,
        "u0": st.lists(SCALARS, max_size=3),
    }
    if depth > 0:
        children["m0"] = maps(depth - 1)
        children["l0"] = named_lists(depth - 1)
    return st.fixed_dictionaries({}, optional=children)


def named_lists(depth: int) -> st.SearchStrategy[list[dict[str, Any]]]:
    items = st.lists(
        st.tuples(st.sampled_from(["n0", "n1", "n2"]), maps(depth)),
        min_size=1,
        max_size=3,
        unique_by=lambda item: item[0],
    )
    return items.map(lambda pairs: [{"name": name, **rest} for name, rest in pairs])


CONFIGS = maps(2)


@given(CONFIGS, CONFIGS, CONFIGS)
def test_merge_is_associative(a: dict[str, Any], b: dict[str, Any], c: dict[str, Any]) -> None:
    assert merge(merge(a, b), c) == merge(a, merge(b, c))


@given(CONFIGS, CONFIGS)
def test_merge_changes_neither_input_and_empty_is_neutral(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    before = json.dumps([a, b], sort_keys=True)

    merged = merge(a, b)

    assert json.dumps([a, b], sort_keys=True) == before
    assert merge({}, a) == a
    assert merge(a, {}) == a
    assert merge(a, a) == a
    assert set(merged) == set(a) | set(b)
    for key in ("s0", "s1", "u0"):
        if key in b:
            assert merged[key] == b[key]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(
                st.sampled_from(["region", "restricted", "edge", "cluster-type"]),
                st.just("unused"),
                max_size=3,
            ),
            st.dictionaries(st.sampled_from(["K1", "K2", "K3"]), st.integers(0, 9), min_size=1),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_the_most_specific_matching_config_map_wins(
    config_maps: list[tuple[dict[str, str], dict[str, int]]],
) -> None:
    drone_labels = {
        "region": "east-us",
        "restricted": "true",
        "edge": "true",
        "cluster-type": "drone",
    }
    files = {}
    layers = []
    for index, (label_keys, data) in enumerate(config_maps):
        labels = {key: drone_labels[key] for key in label_keys}
        name = f"cm-{index}"
        files[name] = config_map(name, labels, {key: f'"{value}"' for key, value in data.items()})
        layers.append((len(labels), name, data))

    drone = dev_with(**files)[DRONE].config

    for key in ("K1", "K2", "K3"):
        setters = [data[key] for _, _, data in sorted(layers) if key in data]
        if setters:
            assert drone.data[key] == str(setters[-1])
        else:
            assert key not in drone.data
