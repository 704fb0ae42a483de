"""Platform config: the key/values each assignment gets, composed from label-matched ConfigMaps.

Follows `scheduler_core.scheduling`: for an `Assignment`, `ConfigComposer.compose` merges the
matching ConfigMaps, validates the result and records what it used, by the rules of
docs/scheduling.md. `config_hash` is the sha256 of the config as canonical JSON.
"""

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import yaml
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from scheduler_core.resources import PLATFORM_CONFIG_LABEL, ClusterType, schema_validator
from scheduler_core.scheduling import WORKLOAD_LABEL, Assignment, DeploymentTarget
from scheduler_core.snapshot import ControlPlaneSnapshot
from scheduler_core.yamltext import load_yaml

__all__ = [
    "CLUSTER_TYPE_LABEL",
    "DEPLOYMENT_TARGET_LABEL",
    "ComposedConfig",
    "ConfigComposer",
    "ConfigError",
    "canonical_hash",
    "labels_match",
    "matching_targets",
    "merge",
    "parse_value",
    "specificity",
]

CLUSTER_TYPE_LABEL = "cluster-type"
DEPLOYMENT_TARGET_LABEL = "deployment-target"

Json = Any
Path = tuple[str | int, ...]


def parse_value(text: str) -> Json:
    """A ConfigMap value as config data: a map or a list when its YAML is one, the text in
    single quotes without them, otherwise the text as it is."""
    parsed = _yaml(text)
    if isinstance(parsed, dict | list) and _is_json(parsed):
        return parsed
    quoted = text.strip()
    if isinstance(parsed, str) and len(quoted) >= 2 and quoted[0] == quoted[-1] == "'":
        return parsed
    return text


def _yaml(text: str) -> Json:
    """What YAML makes of a value (None for empty or invalid YAML)."""
    if not text.strip():
        return None
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return None


def _typed(data: Mapping[str, Json]) -> dict[str, Json]:
    """The config with each top-level text read as the YAML scalar it spells, where it spells
    a number or a boolean: the reading schemas may also check."""
    typed = {}
    for key, value in data.items():
        scalar = _yaml(value) if isinstance(value, str) else None
        readable = isinstance(scalar, bool | int) or (
            isinstance(scalar, float) and math.isfinite(scalar)
        )
        typed[key] = scalar if readable else value
    return typed


def _is_json(value: Json) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_is_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _is_json(item) for key, item in value.items())
    return False


def _named_items(value: Json) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, dict) and isinstance(item.get("name"), str) for item in value)
    )


def merge(base: Json, overlay: Json) -> Json:
    """`overlay` applied on `base`; neither is changed, the result may share parts of both."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            merged[key] = merge(merged[key], value) if key in merged else value
        return merged
    if _named_items(base) and _named_items(overlay):
        items = list(base)
        position: dict[str, int] = {}
        for index, item in enumerate(items):
            position.setdefault(item["name"], index)
        for item in overlay:
            if (found := position.get(item["name"])) is not None:
                items[found] = merge(items[found], item)
            else:
                position[item["name"]] = len(items)
                items.append(item)
        return items
    return overlay


def labels_match(
    labels: Mapping[str, str], cluster_type: ClusterType, target: DeploymentTarget
) -> bool:
    """Whether a ConfigMap or ConfigSchema with `labels` applies to this pair."""
    left = _left_for_target(labels, cluster_type)
    return left is not None and _target_matches(left, target)


def matching_targets(
    labels: Mapping[str, str], cluster_type: ClusterType, targets: Iterable[DeploymentTarget]
) -> list[DeploymentTarget]:
    """The targets among `targets` that a ConfigMap or ConfigSchema with `labels` applies to
    on `cluster_type`: `labels_match` for many targets, settling the cluster type's half once."""
    left = _left_for_target(labels, cluster_type)
    if left is None:
        return []
    return [target for target in targets if _target_matches(left, target)]


# Matching is split in two halves, cluster type then target, since a cluster type carries
# many targets: what the cluster type settles is settled once for all of them.
Requirements = tuple[tuple[str, str], ...]
_TARGET_KEYS = (DEPLOYMENT_TARGET_LABEL, WORKLOAD_LABEL)


def _left_for_target(labels: Mapping[str, str], cluster_type: ClusterType) -> Requirements | None:
    """The labels the target must still match, or None when the cluster type rules them out."""
    left = []
    for key, value in labels.items():
        if key == PLATFORM_CONFIG_LABEL:
            continue
        if key == CLUSTER_TYPE_LABEL:
            if value != cluster_type.name:
                return None
        elif key in _TARGET_KEYS or cluster_type.labels.get(key) != value:
            left.append((key, value))
    return tuple(left)


def _target_matches(left: Requirements, target: DeploymentTarget) -> bool:
    for key, value in left:
        if key == DEPLOYMENT_TARGET_LABEL:
            actual: str | None = target.name
        elif key == WORKLOAD_LABEL:
            actual = target.workload
        else:
            actual = target.labels.get(key)
        if actual != value:
            return False
    return True


def specificity(labels: Mapping[str, str]) -> int:
    return sum(1 for key in labels if key != PLATFORM_CONFIG_LABEL)


def canonical_hash(data: Mapping[str, Json]) -> str:
    """sha256 of `data` as canonical JSON: sorted keys, no spaces, UTF-8."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class ConfigError:
    """A composed config that breaks a schema: where, which schema, and whose values."""

    environment: str
    cluster_type: str
    deployment_target: str
    key: str
    schema: str
    config_maps: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        sources = ", ".join(self.config_maps) or "none"
        return (
            f"{self.environment}, cluster type {self.cluster_type}, deployment target "
            f"{self.deployment_target}: config {self.key or '(root)'} breaks schema "
            f"{self.schema}: {self.message} (ConfigMaps: {sources})"
        )


@dataclass(frozen=True)
class ComposedConfig:
    """The platform config of one assignment and what it was made of.

    `data` is plain JSON data and shared by every assignment built from the same ConfigMaps:
    read it, never change it.
    """

    data: Mapping[str, Json]
    config_maps: tuple[str, ...]
    key_sources: Mapping[str, tuple[str, ...]]
    # The ConfigSchema resources that matched, by name, and the schemas the Workload declares.
    config_schemas: tuple[str, ...]
    declared_schemas: tuple[str, ...]
    config_hash: str
    errors: tuple[ConfigError, ...]

    @property
    def valid(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class _Layer:
    name: str
    labels: Mapping[str, str]
    values: Mapping[str, Json]


@dataclass(frozen=True)
class _Merged:
    data: dict[str, Json]
    key_sources: Mapping[str, tuple[str, ...]]
    config_hash: str


@dataclass(frozen=True)
class _Candidates:
    """The ConfigMaps and ConfigSchemas a cluster type leaves, with what targets must match."""

    layers: tuple[tuple[_Layer, Requirements], ...]
    schemas: tuple[tuple[str, Validator, Requirements], ...]


@dataclass(frozen=True)
class _Violation:
    key: str
    config_maps: tuple[str, ...]
    message: str


class ConfigComposer:
    """Composes the platform config of the assignments of one snapshot.

    ConfigMap values are parsed and schemas compiled once; a merge is made once for each set
    of ConfigMaps and a validation once for each set of ConfigMaps and schema, since many
    assignments share them.
    """

    def __init__(self, snapshot: ControlPlaneSnapshot) -> None:
        self.environment = snapshot.name
        self._layers = tuple(
            sorted(
                (
                    _Layer(
                        name=config_map.name,
                        labels=config_map.labels,
                        values=MappingProxyType(
                            {key: parse_value(text) for key, text in config_map.data.items()}
                        ),
                    )
                    for config_map in snapshot.config_maps.values()
                ),
                key=lambda layer: (specificity(layer.labels), layer.name),
            )
        )
        self._config_schemas = tuple(
            (name, config_schema.labels, schema_validator(config_schema.spec.json_schema))
            for name, config_schema in snapshot.config_schemas.items()
        )
        self._by_cluster_type: dict[str, _Candidates] = {}
        self._declared: dict[str, Validator] = {}
        self._merged: dict[tuple[str, ...], _Merged] = {}
        self._violations: dict[tuple[tuple[str, ...], str], tuple[_Violation, ...]] = {}

    def _candidates(self, cluster_type: ClusterType) -> _Candidates:
        candidates = self._by_cluster_type.get(cluster_type.name)
        if candidates is None:
            layers = []
            for layer in self._layers:
                if (left := _left_for_target(layer.labels, cluster_type)) is not None:
                    layers.append((layer, left))
            schemas = []
            for name, labels, validator in self._config_schemas:
                if (left := _left_for_target(labels, cluster_type)) is not None:
                    schemas.append((name, validator, left))
            candidates = self._by_cluster_type[cluster_type.name] = _Candidates(
                tuple(layers), tuple(schemas)
            )
        return candidates

    def compose(self, assignment: Assignment) -> ComposedConfig:
        cluster_type, target = assignment.cluster_type, assignment.deployment_target
        candidates = self._candidates(cluster_type)
        layers = [
            layer for layer, left in candidates.layers if not left or _target_matches(left, target)
        ]
        names = tuple(layer.name for layer in layers)
        merged = self._merged.get(names)
        if merged is None:
            merged = self._merged[names] = _merge_layers(layers)
        config_schemas = [
            (name, validator)
            for name, validator, left in candidates.schemas
            if _target_matches(left, target)
        ]
        schemas = [(f"ConfigSchema {name}", validator) for name, validator in config_schemas]
        for declared in target.config_schemas:
            if declared.name not in self._declared:
                self._declared[declared.name] = schema_validator(declared.schema)
            schemas.append((declared.name, self._declared[declared.name]))
        errors: list[ConfigError] = []
        for schema_name, validator in schemas:
            violations = self._violations.get((names, schema_name))
            if violations is None:
                violations = tuple(_validate(merged.data, validator, layers))
                self._violations[(names, schema_name)] = violations
            errors.extend(
                ConfigError(
                    environment=self.environment,
                    cluster_type=cluster_type.name,
                    deployment_target=target.name,
                    key=violation.key,
                    schema=schema_name,
                    config_maps=violation.config_maps,
                    message=violation.message,
                )
                for violation in violations
            )
        return ComposedConfig(
            data=merged.data,
            config_maps=names,
            key_sources=merged.key_sources,
            config_schemas=tuple(name for name, _ in config_schemas),
            declared_schemas=tuple(declared.name for declared in target.config_schemas),
            config_hash=merged.config_hash,
            errors=tuple(errors),
        )


def _merge_layers(layers: Sequence[_Layer]) -> _Merged:
    data: dict[str, Json] = {}
    sources: dict[str, list[str]] = {}
    for layer in layers:
        for key, value in layer.values.items():
            data[key] = merge(data[key], value) if key in data else value
            sources.setdefault(key, []).append(layer.name)
    ordered = dict(sorted(data.items()))
    return _Merged(
        data=ordered,
        key_sources=MappingProxyType({key: tuple(sources[key]) for key in ordered}),
        config_hash=canonical_hash(ordered),
    )


def _validate(
    data: Mapping[str, Json], validator: Validator, layers: Sequence[_Layer]
) -> Iterable[_Violation]:
    try:
        as_text = {tuple(error.absolute_path) for error in validator.iter_errors(data)}
        errors = [
            error
            for error in validator.iter_errors(_typed(data))
            if tuple(error.absolute_path) in as_text
        ]
    except Unresolvable as unresolvable:
        yield _Violation("", (), f"the schema refers to what cannot be resolved: {unresolvable}")
        return
    missing_seen: dict[tuple[Path, Path], int] = {}
    violations = []
    for error in errors:
        path: Path = tuple(error.absolute_path)
        where = path
        required, instance = error.validator_value, error.instance
        if error.validator == "required" and isinstance(required, list):
            # jsonschema reports each missing property as its own error, in `required` order,
            # with the name only in its message: pair them up to name the key.
            missing = [name for name in required if not _has(instance, name)]
            at = (path, tuple(error.absolute_schema_path))
            seen = missing_seen[at] = missing_seen.get(at, 0) + 1
            if seen <= len(missing):
                where = (*path, missing[seen - 1])
        violations.append(
            _Violation(
                key=_key_text(where, data),
                config_maps=_contributors(path, data, layers),
                message=error.message,
            )
        )
    yield from sorted(violations, key=lambda violation: (violation.key, violation.message))


def _has(instance: object, name: object) -> bool:
    return isinstance(instance, dict) and name in instance


def _key_text(path: Path, data: Json) -> str:
    """`path` as a reader writes it: `a.b[0]`, or `a.b[envoy]` for a named list item."""
    text = ""
    node = data
    for part in path:
        if isinstance(part, int):
            item = node[part] if isinstance(node, list) and part < len(node) else None
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                text += f"[{item['name']}]"
            else:
                text += f"[{part}]"
            node = item
        else:
            text += f".{part}" if text else part
            node = node.get(part) if isinstance(node, dict) else None
    return text


def _contributors(path: Path, data: Json, layers: Sequence[_Layer]) -> tuple[str, ...]:
    """The ConfigMaps whose values reach `path` of the composed `data`."""
    return tuple(layer.name for layer in layers if _reaches(layer.values, data, path))


def _reaches(layer: Json, merged: Json, path: Path) -> bool:
    for part in path:
        if isinstance(part, str):
            if not isinstance(layer, Mapping) or part not in layer:
                return False
            layer = layer[part]
            merged = merged.get(part) if isinstance(merged, dict) else None
            continue
        if not isinstance(layer, list):
            return False
        item = merged[part] if isinstance(merged, list) and part < len(merged) else None
        if not (_named_items(layer) and isinstance(item, dict)):
            # A list that is not merged by name is the last setter's alone.
            return True
        layer = next((own for own in layer if own["name"] == item.get("name")), None)
        if layer is None:
            return False
        merged = item
    return True
