"""Loading a Kalypso control plane: the reference fleet, promotion pins, and bad documents."""

from collections.abc import Mapping

import pytest
from pydantic import ValidationError

from scheduler_core.loader import LoadError, LoadResult, parse_files
from scheduler_core.resources import ClusterType, ConfigMap, SchedulingPolicy, Template
from scheduler_core.snapshot import ControlPlaneSnapshot, RepoRef
from tests.scheduler_core.scenario import (
    APP_GITOPS,
    APP_SRC,
    APP_SRC_MAIN,
    CONTROL_PLANE,
    DEV,
    HELLO_WORLD_REGISTRATION,
    MAIN,
    PLATFORM_GITOPS,
    STAGE,
    cluster_type,
    config_map,
    load,
    reference_fleet,
)

DEV_BRANCH = RepoRef(repo=CONTROL_PLANE, branch="dev")


def loaded(
    main: Mapping[str, str | bytes] = MAIN,
    dev: Mapping[str, str | bytes] = DEV,
    stage: Mapping[str, str | bytes] = STAGE,
    app_src: Mapping[str, str | bytes] = APP_SRC_MAIN,
) -> LoadResult:
    return load(reference_fleet(main, dev, stage, app_src))


def dev_of(result: LoadResult) -> ControlPlaneSnapshot:
    return result.snapshots["dev"]


def only_error(result: LoadResult) -> LoadError:
    assert len(result.errors) == 1, [str(error) for error in result.errors]
    return result.errors[0]


def test_reference_fleet_loads_every_environment_without_errors() -> None:
    result = loaded()

    assert result.errors == ()
    assert list(result.snapshots) == ["dev", "stage"]
    dev, stage = result.snapshots["dev"], result.snapshots["stage"]
    assert list(dev.cluster_types) == ["command-center", "drone", "large", "small"]
    assert list(stage.cluster_types) == ["drone", "large"]
    assert dev.cluster_types["large"].spec.reconciler == "argocd"
    assert dev.cluster_types["drone"].labels == {
        "region": "east-us",
        "restricted": "true",
        "edge": "true",
    }
    assert dev.cluster_types["drone"].spec.namespace_service == "default"
    assert dev.cluster_types["drone"].spec.config_type == "configmap"
    assert list(dev.config_maps) == [
        "dev-config",
        "drone-config",
        "east-us-config",
        "restricted-config",
        "west-us-config",
    ]
    assert list(stage.config_maps) == ["stage-config", "west-us-config"]
    assert list(dev.scheduling_policies) == ["functional-test-policy", "performance-test-policy"]
    assert list(stage.scheduling_policies) == ["uat-test-policy"]
    assert list(dev.gitops_repos) == ["dev"]
    assert dev.gitops_repos["dev"].spec.repo == PLATFORM_GITOPS


def test_promoted_resources_come_from_main_into_every_environment() -> None:
    dev, stage = loaded().snapshots.values()

    for snapshot in (dev, stage):
        assert list(snapshot.templates) == ["arc-flux", "argocd", "configmap", "default"]
        assert snapshot.templates["default"].spec.type == "namespace"
        assert snapshot.templates["configmap"].spec.type == "config"
        assert list(snapshot.workload_registrations) == ["hello-world-app"]


def test_workload_is_read_from_the_repository_its_registration_names() -> None:
    repos = reference_fleet()
    dev = dev_of(load(repos))

    registered = dev.workloads["hello-world-app"]
    assert registered.workspace == "kaizen-app-team"
    assert registered.registration == "hello-world-app"
    targets = registered.workload.spec.deployment_targets
    assert [target.name for target in targets] == [
        "functional-test",
        "performance-test",
        "uat-test",
    ]
    assert targets[0].manifests == {
        "repo": APP_GITOPS,
        "branch": "dev",
        "path": "./functional-test",
    }
    assert RepoRef(repo=APP_SRC, branch="main", path="workload/") in repos.asked
    assert dev.workload_sources["hello-world-app"].commit == repos.heads[(APP_SRC, "main")]


def test_base_repo_pins_main_to_the_promoted_commit() -> None:
    repos = reference_fleet()
    promoted = repos.heads[(CONTROL_PLANE, "main")]
    # main moves on after the promotion: a new template and a changed registration
    newer = {
        **MAIN,
        "templates/helm.yaml": MAIN["templates/argocd.yaml"].replace("name: argocd", "name: helm"),
    }
    repos.commit(CONTROL_PLANE, "main", newer)

    result = load(repos)

    assert result.errors == ()
    dev = dev_of(result)
    assert "helm" not in dev.templates
    assert dev.base.commit == promoted
    assert dev.base_repo is not None
    assert dev.base_repo.spec.commit == promoted
    assert RepoRef(repo=CONTROL_PLANE, branch="main", path=".", commit=promoted) in repos.asked


def test_without_a_base_repo_main_is_taken_as_read() -> None:
    repos = reference_fleet(pin_base=False)
    head = repos.heads[(CONTROL_PLANE, "main")]

    dev = dev_of(load(repos))

    assert dev.base_repo is None
    assert dev.base.commit == head
    assert list(dev.templates) == ["arc-flux", "argocd", "configmap", "default"]


def test_documents_are_found_by_kind_wherever_they_lie() -> None:
    # Everything of dev in one multi-document file, in a folder named for nothing in particular.
    everything = "---\n".join(DEV.values())
    result = loaded(dev={"misc/all-in-one.yml": everything})

    assert result.errors == ()
    flat = dev_of(result)
    nested = dev_of(loaded())
    assert flat.cluster_types == nested.cluster_types
    assert flat.config_maps == nested.config_maps
    assert flat.scheduling_policies == nested.scheduling_policies
    assert flat.location(flat.cluster_types["small"]).file == "misc/all-in-one.yml"
    assert flat.location(flat.cluster_types["small"]).document == 7


def test_other_kinds_and_other_config_maps_are_ignored() -> None:
    extra = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: not-platform
  labels:
    app: something
data:
  KEY: value
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: no-labels-at-all
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
---
apiVersion: cluster.kalypso.io/v1alpha1
kind: ClusterType
metadata:
  name: from-an-old-api-group
spec:
  reconciler: arc-flux
---
- a list
- not an object
"""
    result = loaded(dev={**DEV, "extra.yaml": extra, "notes.txt": "not: [yaml"})

    assert result.errors == ()
    dev = dev_of(result)
    assert "not-platform" not in dev.config_maps
    assert "no-labels-at-all" not in dev.config_maps
    assert "from-an-old-api-group" not in dev.cluster_types


def test_a_broken_document_costs_only_itself() -> None:
    broken = (
        cluster_type("first", "arc-flux", size="s")
        + "---\n"
        + "apiVersion: scheduler.kalypso.io/v1alpha1\nkind: ClusterType\nmetadata: {name: [\n"
        + "---\n"
        + cluster_type("third", "arc-flux", size="l")
    )
    result = loaded(dev={**DEV, "cluster-types/more.yaml": broken})

    error = only_error(result)
    assert error.file == "cluster-types/more.yaml"
    assert error.document == 2
    assert error.line == 15
    assert "not valid YAML" in error.message
    dev = dev_of(result)
    assert {"first", "third"} <= set(dev.cluster_types)


def policy(name: str, cluster_type_selector: str) -> str:
    return f"""\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: {name}
spec:
  deploymentTargetSelector:
    labelSelector: {{}}
  clusterTypeSelector:
{cluster_type_selector}"""


@pytest.mark.parametrize(
    ("document", "field", "message"),
    [
        (
            cluster_type("drone2", "arc-flux").replace("  namespaceService: default\n", ""),
            "spec.namespaceService",
            "Field required",
        ),
        (
            cluster_type("drone2", "arc-flux").replace(
                "  labels:\n", "  labels:\n    restricted: true\n"
            ),
            "metadata.labels.restricted",
            "Input should be a valid string",
        ),
        (
            cluster_type("Drone_2", "arc-flux"),
            "metadata.name",
            "name 'Drone_2' must consist of lower-case letters",
        ),
        (
            cluster_type("drone2", "arc-flux", region="East US"),
            "metadata.labels",
            "value 'East US' of label 'region'",
        ),
        (
            policy(
                "bigger",
                "    labelSelector:\n      matchExpressions:\n"
                "        - {key: size, operator: Bigger, values: [large]}\n",
            ),
            "spec.clusterTypeSelector.labelSelector.matchExpressions[0].operator",
            "Input should be 'In', 'NotIn', 'Exists' or 'DoesNotExist'",
        ),
        (
            policy("null-selector", "    labelSelector:\n"),
            "spec.clusterTypeSelector.labelSelector",
            "Field required",
        ),
        (
            policy("no-selector", "    {}\n"),
            "spec.clusterTypeSelector.labelSelector",
            "Field required",
        ),
        (
            policy(
                "in-without-values",
                "    labelSelector:\n      matchExpressions:\n"
                "        - {key: size, operator: In}\n",
            ),
            "spec.clusterTypeSelector.labelSelector.matchExpressions[0]",
            "operator In needs at least one value",
        ),
        (
            policy(
                "exists-with-values",
                "    labelSelector:\n      matchExpressions:\n"
                "        - {key: size, operator: Exists, values: [large]}\n",
            ),
            "spec.clusterTypeSelector.labelSelector.matchExpressions[0]",
            "operator Exists takes no values",
        ),
        (
            config_map("numbers", {}, {"PORT": "8080"}),
            "data.PORT",
            "Input should be a valid string",
        ),
        (
            "apiVersion: scheduler.kalypso.io/v1alpha1\nkind: ConfigSchema\nmetadata:\n"
            '  name: broken-schema\nspec:\n  schema: \'{"type": "objekt"}\'\n',
            "spec.schema",
            "not a valid JSON Schema at type",
        ),
        (
            "apiVersion: scheduler.kalypso.io/v1alpha1\nkind: Template\nmetadata:\n"
            "  name: helm\nspec:\n  type: renderer\n  manifests: []\n",
            "spec.type",
            "Input should be 'reconciler', 'namespace' or 'config'",
        ),
        (
            "apiVersion: scheduler.kalypso.io/v1alpha1\nkind: GitOpsRepo\nmetadata:\n"
            "  name: elsewhere\nspec:\n  repo: ftp://example.com/repo\n  branch: dev\n",
            "spec.repo",
            "repository 'ftp://example.com/repo' is not an https",
        ),
        (
            cluster_type("drone2", "arc-flux") + "  reconciler: argocd\n",
            None,
            "found duplicate key 'reconciler'",
        ),
    ],
    ids=[
        "missing-field",
        "label-not-a-string",
        "bad-name",
        "bad-label-value",
        "invalid-operator",
        "null-selector",
        "missing-selector",
        "in-without-values",
        "exists-with-values",
        "config-value-not-a-string",
        "invalid-json-schema",
        "unknown-template-type",
        "unsupported-repository-url",
        "duplicate-key",
    ],
)
def test_bad_document_is_reported_with_file_document_and_field(
    document: str, field: str | None, message: str
) -> None:
    result = loaded(
        dev={**DEV, "bad/thing.yaml": cluster_type("fine", "arc-flux") + "---\n" + document}
    )

    error = only_error(result)
    assert error.file == "bad/thing.yaml"
    assert error.document == 2
    assert error.field == field
    assert message in error.message
    assert str(error).startswith(f"{CONTROL_PLANE}#dev@")
    assert "bad/thing.yaml, document 2, line " in str(error)
    # The rest of the file and of the branch still loads.
    dev = dev_of(result)
    assert "fine" in dev.cluster_types
    assert "drone" in dev.cluster_types


def test_error_line_points_at_the_offending_field() -> None:
    document = cluster_type("drone2", "arc-flux", region="east-us").replace(
        '    region: "east-us"\n', "    region: true\n"
    )
    result = loaded(dev={**DEV, "ct.yaml": "# leading comment\n" + document})

    error = only_error(result)
    assert error.document == 1
    assert error.field == "metadata.labels.region"
    lines = ("# leading comment\n" + document).splitlines()
    assert error.line is not None
    assert lines[error.line - 1] == "    region: true"


def test_a_name_defined_twice_is_reported_at_the_second_and_the_first_kept() -> None:
    again = config_map("west-us-config", {"region": "west-us"}, {"REGION": "Far West"})
    result = loaded(dev={**DEV, "zz/west-again.yaml": again})

    error = only_error(result)
    assert error.file == "zz/west-again.yaml"
    assert error.field == "metadata.name"
    assert "ConfigMap 'west-us-config' is defined twice" in error.message
    assert "cluster-types/west-us/west-us-config.yaml, document 1" in error.message
    assert dev_of(result).config_maps["west-us-config"].data["REGION"] == "West US"


def test_an_environment_branch_cannot_redefine_a_promoted_template() -> None:
    result = loaded(dev={**DEV, "templates/argocd.yaml": MAIN["templates/argocd.yaml"]})

    error = only_error(result)
    assert error.source.startswith(f"{CONTROL_PLANE}#dev@")
    assert "Template 'argocd' is defined twice" in error.message
    assert "stage" in result.snapshots


def test_a_workload_repository_that_cannot_be_read_is_reported_at_its_registration() -> None:
    repos = reference_fleet()
    del repos.heads[(APP_SRC, "main")]

    result = load(repos)

    errors = {str(error) for error in result.errors}
    assert len(errors) == 1
    error = result.errors[0]
    assert error.file == "workloads/hello-world-app.yaml"
    assert error.field == "spec.workload"
    assert error.message.startswith(f"could not read {APP_SRC}#main (workload): no branch main")
    assert dev_of(result).workloads == {}
    assert list(dev_of(result).cluster_types) == ["command-center", "drone", "large", "small"]


def test_an_environment_whose_branch_is_missing_is_skipped_and_reported() -> None:
    repos = reference_fleet()
    del repos.heads[(CONTROL_PLANE, "stage")]

    result = load(repos)

    error = only_error(result)
    assert error.file == ".environments/stage.yaml"
    assert error.field == "spec.controlPlane"
    assert list(result.snapshots) == ["dev"]


def test_a_registration_path_without_a_workload_is_reported() -> None:
    result = loaded(app_src={"workload/README.md": "nothing here"})

    error = only_error(result)
    assert error.file == "workloads/hello-world-app.yaml"
    assert error.message == f"no Workload document found in {APP_SRC}#main (workload)"


def test_a_workload_repository_is_read_for_workloads_only() -> None:
    intruder = cluster_type("sneaky", "arc-flux", size="xl")
    result = loaded(app_src={**APP_SRC_MAIN, "workload/cluster-type.yaml": intruder})

    error = only_error(result)
    assert error.source.startswith(f"{APP_SRC}#main@")
    assert error.file == "workload/cluster-type.yaml"
    assert "read for Workload documents only" in error.message
    assert "sneaky" not in dev_of(result).cluster_types
    assert "hello-world-app" in dev_of(result).workloads


def test_a_workload_in_the_control_plane_is_reported() -> None:
    workload = APP_SRC_MAIN["workload/workload.yaml"]
    assert isinstance(workload, str)
    result = loaded(dev={**DEV, "workload.yaml": workload.replace("hello-world-app", "stray")})

    error = only_error(result)
    assert error.file == "workload.yaml"
    assert "workloads are read from the repository a WorkloadRegistration names" in error.message


def test_only_the_registered_path_of_a_workload_repository_is_read() -> None:
    other = APP_SRC_MAIN["workload/workload.yaml"]
    assert isinstance(other, str)
    app_src = {**APP_SRC_MAIN, "elsewhere/workload.yaml": other.replace("hello-world-app", "other")}

    dev = dev_of(loaded(app_src=app_src))

    assert list(dev.workloads) == ["hello-world-app"]


def test_a_registration_may_name_a_single_file() -> None:
    registration = HELLO_WORLD_REGISTRATION.replace(
        "path: workload/", "path: ./workload/workload.yaml"
    )
    dev = dev_of(loaded(main={**MAIN, "workloads/hello-world-app.yaml": registration}))

    assert list(dev.workloads) == ["hello-world-app"]


def test_registrations_reach_repositories_by_ssh_file_url_or_local_path() -> None:
    for repo in (
        "git@git.example.com:kaizen/app-src.git",
        "file:///srv/git/app-src",
        "/srv/git/app",
    ):
        registration = HELLO_WORLD_REGISTRATION.replace(APP_SRC, repo)
        repos = reference_fleet(main={**MAIN, "workloads/hello-world-app.yaml": registration})
        repos.commit(repo, "main", APP_SRC_MAIN)

        result = load(repos)

        assert result.errors == ()
        assert RepoRef(repo=repo, branch="main", path="workload/") in repos.asked


def test_parse_files_reads_yaml_under_the_path_in_path_order() -> None:
    files = {
        "b/two.yaml": cluster_type("two", "arc-flux").encode(),
        "a/one.yml": cluster_type("one", "arc-flux").encode(),
        "c/three.yaml": cluster_type("three", "arc-flux").encode(),
        "a/readme.md": b"# not yaml",
    }

    everything = parse_files(files, DEV_BRANCH, commit="abc")
    only_a = parse_files(files, RepoRef(repo=CONTROL_PLANE, branch="dev", path="./a/"))

    assert [resource.name for resource, _ in everything.of_kind(ClusterType)] == [
        "one",
        "two",
        "three",
    ]
    assert [resource.name for resource, _ in only_a.of_kind(ClusterType)] == ["one"]
    assert everything.revision.commit == "abc"


def test_undecodable_file_is_an_error() -> None:
    parsed = parse_files({"ct.yaml": b"\xff\xfe\x00garbage"}, DEV_BRANCH)

    assert parsed.resources == ()
    assert parsed.errors[0].file == "ct.yaml"
    assert "not UTF-8" in parsed.errors[0].message


def test_null_collections_count_as_empty() -> None:
    document = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: ClusterType
metadata:
  name: bare
  labels:
spec:
  reconciler: arc-flux
  namespaceService: default
  configType:
"""
    parsed = parse_files({"ct.yaml": document.encode()}, DEV_BRANCH)

    ((bare, _),) = parsed.of_kind(ClusterType)
    assert bare.labels == {}
    assert bare.spec.config_type is None


def test_template_manifests_written_as_mappings_are_kept_as_template_text() -> None:
    dev = dev_of(loaded())

    (text,) = dev.templates["default"].spec.manifests
    assert "name: '{{ .Namespace }}'" in text
    assert "deploymentTarget: '{{ .DeploymentTargetName }}'" in text
    (reconciler, kustomization) = dev.templates["arc-flux"].spec.manifests
    assert reconciler.startswith("apiVersion: source.toolkit.fluxcd.io/v1\n")
    assert "path: {{ .Manifests.path }}" in kustomization


def test_config_schema_accepts_schema_text_or_mapping() -> None:
    documents = """\
apiVersion: scheduler.kalypso.io/v1alpha1
kind: ConfigSchema
metadata:
  name: as-text
spec:
  schema: |
    {"type": "object", "required": ["REGION"]}
---
apiVersion: scheduler.kalypso.io/v1alpha1
kind: ConfigSchema
metadata:
  name: as-mapping
spec:
  schema:
    $schema: https://json-schema.org/draft/2020-12/schema
    type: object
    required: [REGION]
"""
    result = loaded(dev={**DEV, "schemas.yaml": documents})

    assert result.errors == ()
    schemas = dev_of(result).config_schemas
    assert schemas["as-text"].spec.json_schema == {"type": "object", "required": ["REGION"]}
    assert schemas["as-mapping"].spec.json_schema["required"] == ["REGION"]


def test_snapshot_cannot_be_changed() -> None:
    dev = dev_of(loaded())

    with pytest.raises(TypeError):
        dev.cluster_types["tiny"] = dev.cluster_types["small"]  # type: ignore[index]
    with pytest.raises(TypeError):
        dev.cluster_types["small"].labels["size"] = "huge"  # type: ignore[index]
    with pytest.raises(ValidationError):
        dev.cluster_types["small"].spec.reconciler = "argocd"  # type: ignore[misc]
    assert isinstance(dev.config_maps["dev-config"], ConfigMap)
    assert isinstance(dev.templates["argocd"], Template)
    assert isinstance(dev.scheduling_policies["functional-test-policy"], SchedulingPolicy)


def test_documents_are_numbered_as_a_reader_counts_them() -> None:
    text = (
        "# cluster types of the west\n---\n"
        + cluster_type("one", "arc-flux")
        + "---\n---\n"
        + cluster_type("three", "arc-flux")
    )

    parsed = parse_files({"west.yaml": text.encode()}, DEV_BRANCH)

    assert parsed.errors == ()
    located = {resource.name: location for resource, location in parsed.of_kind(ClusterType)}
    assert (located["one"].document, located["one"].line) == (1, 2)
    assert (located["three"].document, located["three"].line) == (3, 13)
