"""Kalypso's control-plane resources as frozen models, shaped as Kalypso's CRDs define them.

The loader validates every document against these. Where Kalypso's CRD versions differ, the
models take the union a user may have written: Template manifests as text or mappings (kept as
text: they are Go templates), ConfigSchema `schema` as text or a mapping.
"""

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import yaml
from jsonschema import Draft7Validator
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, field_validator

from scheduler_core.kube import (
    DnsLabel,
    KubeModel,
    Labels,
    LabelSelector,
    LabelValue,
    ObjectMeta,
    freeze,
    no_labels,
)
from scheduler_core.yamltext import load_yaml

__all__ = [
    "API_VERSION",
    "KINDS",
    "PLATFORM_CONFIG_LABEL",
    "BaseRepo",
    "ClusterType",
    "ConfigMap",
    "ConfigSchema",
    "Environment",
    "GitOpsRepo",
    "JsonSchema",
    "RepoSpec",
    "Resource",
    "SchedulingPolicy",
    "Template",
    "Workload",
    "WorkloadRegistration",
    "WorkloadTarget",
    "schema_validator",
]

API_VERSION = "scheduler.kalypso.io/v1alpha1"
PLATFORM_CONFIG_LABEL = "platform-config"

_URL_SCHEMES = ("https://", "http://", "ssh://", "git://", "file://")
_SCP_ADDRESS = re.compile(r"[\w.-]+@[\w.-]+:.")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+\Z")


def _repo_url(value: str) -> str:
    local_path = value.startswith(("/", "./", "../")) or value == "."
    if value.startswith(_URL_SCHEMES) or _SCP_ADDRESS.match(value) or local_path:
        return value
    raise ValueError(
        f"repository {value!r} is not an https, http, ssh, git or file URL, "
        "an scp-style address (git@host:path) or a local path"
    )


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


RepoUrl = Annotated[str, AfterValidator(_repo_url)]
NonEmpty = Annotated[str, AfterValidator(_non_empty)]


def schema_validator(schema: Mapping[str, Any]) -> Validator:
    """A validator for `schema` in the dialect its `$schema` names; draft-07 when it names none.

    Draft-07 is the default because Kalypso validates with Helm's schema library, which
    speaks draft-07 and earlier; a schema wanting 2020-12 says so with `$schema`.
    """
    validator_class = validator_for(schema, default=Draft7Validator)
    return validator_class(schema)


def _json_schema(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = load_yaml(value)
        except yaml.YAMLError as error:
            raise ValueError(f"schema text is not valid JSON or YAML: {error}") from None
    if not isinstance(value, dict):
        raise ValueError("a JSON Schema must be an object")
    try:
        validator_for(value, default=Draft7Validator).check_schema(value)
    except SchemaError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        raise ValueError(f"not a valid JSON Schema at {where}: {error.message}") from None
    return value


# A JSON Schema, checked against its dialect's meta-schema. Kept as plain JSON data (which the
# jsonschema library expects); nothing in the scheduler core changes it.
JsonSchema = Annotated[dict[str, Any], BeforeValidator(_json_schema)]


def _manifest_text(value: Any) -> Any:
    if isinstance(value, dict):
        return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=1_000_000)
    if not isinstance(value, str):
        raise ValueError("a manifest is YAML text or a mapping")
    return value


ManifestText = Annotated[str, BeforeValidator(_manifest_text)]


def _manifests(value: Mapping[str, str]) -> Mapping[str, str]:
    if missing := [key for key in ("repo", "branch", "path") if key not in value]:
        raise ValueError(f"missing {', '.join(missing)}")
    _repo_url(value["repo"])
    return freeze(value)


Manifests = Annotated[Mapping[str, str], AfterValidator(_manifests), PlainSerializer(dict)]


def _config_data(value: Mapping[str, str]) -> Mapping[str, str]:
    for key in value:
        if not _CONFIG_KEY.match(key):
            raise ValueError(f"key {key!r} may hold only letters, digits, '-', '_' and '.'")
    return freeze(value)


ConfigData = Annotated[Mapping[str, str], AfterValidator(_config_data), PlainSerializer(dict)]


class Resource(KubeModel):
    """A control-plane document: its kind is the class, its identity the name."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str]

    metadata: ObjectMeta

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.labels


class RepoSpec(KubeModel):
    """A place in a Git repository (Kalypso's ManifestsSpec)."""

    repo: RepoUrl
    branch: NonEmpty
    path: str = "."


class EnvironmentSpec(KubeModel):
    control_plane: RepoSpec


class Environment(Resource):
    KIND = "Environment"
    spec: EnvironmentSpec


class ClusterTypeSpec(KubeModel):
    reconciler: NonEmpty
    namespace_service: NonEmpty
    # The name of the config Template; Kalypso's earliest CRD had the values configMap/envFile.
    config_type: str | None = None


class ClusterType(Resource):
    KIND = "ClusterType"
    spec: ClusterTypeSpec


class TemplateSpec(KubeModel):
    type: Literal["reconciler", "namespace", "config"]
    manifests: tuple[ManifestText, ...]
    content_type: str | None = None


class Template(Resource):
    KIND = "Template"
    spec: TemplateSpec


class WorkloadRegistrationSpec(KubeModel):
    workload: RepoSpec
    # Becomes the `workspace` label of every deployment target of the workload.
    workspace: LabelValue = ""


class WorkloadRegistration(Resource):
    KIND = "WorkloadRegistration"
    spec: WorkloadRegistrationSpec


class WorkloadTarget(KubeModel):
    """A deployment target as the Workload declares it (Kalypso's DeploymentTargetDetail)."""

    name: DnsLabel
    labels: Labels = Field(default_factory=no_labels)
    environment: NonEmpty
    manifests: Manifests
    config_schemas: tuple[JsonSchema, ...] = ()


class WorkloadSpec(KubeModel):
    deployment_targets: tuple[WorkloadTarget, ...] = ()
    config_schemas: tuple[JsonSchema, ...] = ()

    @field_validator("deployment_targets")
    @classmethod
    def _unique_target_names(
        cls, targets: tuple[WorkloadTarget, ...]
    ) -> tuple[WorkloadTarget, ...]:
        first: dict[str, int] = {}
        for index, target in enumerate(targets):
            if target.name in first:
                raise ValueError(
                    f"deploymentTargets[{index}] is named {target.name!r} "
                    f"like deploymentTargets[{first[target.name]}]"
                )
            first[target.name] = index
        return targets


class Workload(Resource):
    KIND = "Workload"
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)


class DeploymentTargetSelector(KubeModel):
    # Empty or absent: targets of every workspace.
    workspace: str = ""
    label_selector: LabelSelector


class ClusterTypeSelector(KubeModel):
    label_selector: LabelSelector


class SchedulingPolicySpec(KubeModel):
    deployment_target_selector: DeploymentTargetSelector
    cluster_type_selector: ClusterTypeSelector


class SchedulingPolicy(Resource):
    KIND = "SchedulingPolicy"
    spec: SchedulingPolicySpec


class ConfigSchemaSpec(KubeModel):
    json_schema: JsonSchema = Field(alias="schema")


class ConfigSchema(Resource):
    KIND = "ConfigSchema"
    spec: ConfigSchemaSpec


class BaseRepoSpec(RepoSpec):
    # The commit of the base (`main`) that this environment is promoted to; absent: its head.
    commit: str | None = None


class BaseRepo(Resource):
    KIND = "BaseRepo"
    spec: BaseRepoSpec


class GitOpsRepo(Resource):
    KIND = "GitOpsRepo"
    spec: RepoSpec


class ConfigMap(Resource):
    """A platform-config ConfigMap; its values are YAML text (see `scheduler_core.config`)."""

    API_VERSION = "v1"
    KIND = "ConfigMap"
    data: ConfigData = Field(default_factory=lambda: freeze({}))


KINDS: Mapping[tuple[str, str], type[Resource]] = {
    (kind.API_VERSION, kind.KIND): kind
    for kind in (
        Environment,
        ClusterType,
        Template,
        WorkloadRegistration,
        Workload,
        SchedulingPolicy,
        ConfigSchema,
        BaseRepo,
        GitOpsRepo,
        ConfigMap,
    )
}
