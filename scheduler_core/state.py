"""What a render of one environment leaves for the next: a record per assignment, fingerprints.

`output` writes a `RenderState`; `incremental` compares its `fingerprints` (a content hash of
every input by kind and name) to find what changed. `dump_state`/`load_state` make it JSON for
the hub to keep beside its platform commit; a moved branch means a full render instead.
"""

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import TypeAdapter

from scheduler_core.plan import AssignmentInputs
from scheduler_core.render import RenderError
from scheduler_core.scheduling import DeploymentTarget
from scheduler_core.snapshot import ControlPlaneSnapshot

__all__ = [
    "CLUSTER_TYPES",
    "CONFIG_MAPS",
    "CONFIG_SCHEMAS",
    "DEPLOYMENT_TARGETS",
    "POLICIES",
    "TEMPLATES",
    "AssignmentRecord",
    "Fingerprints",
    "RenderState",
    "Status",
    "content_hash",
    "dump_state",
    "fingerprints",
    "load_state",
]

CLUSTER_TYPES = "ClusterType"
TEMPLATES = "Template"
POLICIES = "SchedulingPolicy"
CONFIG_MAPS = "ConfigMap"
CONFIG_SCHEMAS = "ConfigSchema"
DEPLOYMENT_TARGETS = "DeploymentTarget"

# Kind -> name -> sha256 of the input's content.
Fingerprints = Mapping[str, Mapping[str, str]]

# rendered: the folder holds what this render made; failed: the render failed and the folder
# keeps what it held before (if anything); rejected: scheduling refused the pair, no folder.
Status = Literal["rendered", "failed", "rejected"]


@dataclass(frozen=True, slots=True)
class AssignmentRecord:
    """One (cluster type, deployment target) pair after a render.

    `files` are the names in its folder `<clusterType>/<deploymentTargetName>/` and
    `content_hash` is `content_hash` of them (None when there are none); `config_hash` is its
    platform config's (`ComposedConfig.config_hash`), None when it was not composed.
    """

    inputs: AssignmentInputs
    status: Status
    namespace: str
    files: tuple[str, ...]
    content_hash: str | None
    config_hash: str | None
    errors: tuple[RenderError, ...]

    @property
    def key(self) -> tuple[str, str]:
        return (self.inputs.cluster_type, self.inputs.deployment_target)

    @property
    def folder(self) -> str:
        return f"{self.inputs.cluster_type}/{self.inputs.deployment_target}"


@dataclass(frozen=True, slots=True)
class RenderState:
    """An environment's render: fingerprints of its inputs and its records, by cluster type
    and deployment target (cluster types without any record are left out)."""

    environment: str
    fingerprints: Fingerprints
    assignments: Mapping[str, Mapping[str, AssignmentRecord]]

    def records(self) -> Iterable[AssignmentRecord]:
        for by_target in self.assignments.values():
            yield from by_target.values()


def content_hash(files: Mapping[str, bytes]) -> str:
    """sha256 over a folder's files: each name and content, length-prefixed, by name."""
    digest = hashlib.sha256()
    for name in sorted(files):
        content = files[name]
        digest.update(f"{len(name)}:{name}{len(content)}:".encode())
        digest.update(content)
    return digest.hexdigest()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _target_text(target: DeploymentTarget) -> str:
    return json.dumps(
        [
            target.name,
            target.target,
            target.workload,
            target.workload_registration,
            target.workspace,
            target.environment,
            dict(target.labels),
            dict(target.manifests),
            [[schema.name, schema.schema] for schema in target.config_schemas],
        ],
        sort_keys=True,
        separators=(",", ":"),
    )


def fingerprints(
    snapshot: ControlPlaneSnapshot, targets: Iterable[DeploymentTarget]
) -> Fingerprints:
    """Content hashes of everything an assignment of `snapshot` can be built from.

    Workloads and their registrations count through the deployment targets they give
    (`scheduling.deployment_targets`), which carry all that an assignment reads of them.
    """
    resources = {
        CLUSTER_TYPES: snapshot.cluster_types,
        POLICIES: snapshot.scheduling_policies,
        CONFIG_MAPS: snapshot.config_maps,
        CONFIG_SCHEMAS: snapshot.config_schemas,
    }
    found: dict[str, Mapping[str, str]] = {
        kind: {name: _digest(resource.model_dump_json()) for name, resource in named.items()}
        for kind, named in resources.items()
    }
    # Render errors name the file a Template is in: moving it changes what they say.
    found[TEMPLATES] = {
        name: _digest(f"{snapshot.location(template).file}\0{template.model_dump_json()}")
        for name, template in snapshot.templates.items()
    }
    found[DEPLOYMENT_TARGETS] = {target.name: _digest(_target_text(target)) for target in targets}
    return found


_STATE = TypeAdapter(RenderState)


def dump_state(state: RenderState) -> bytes:
    return _STATE.dump_json(state)


def load_state(data: bytes | str) -> RenderState:
    """A state from `dump_state`; pydantic's ValidationError names what does not fit."""
    return _STATE.validate_json(data)
