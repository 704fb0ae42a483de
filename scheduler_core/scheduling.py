"""Scheduling: which deployment targets go to which cluster types in one environment.

Takes a `ControlPlaneSnapshot` (from `scheduler_core.loader`) and does what Kalypso's Workload
controller and scheduler do (docs/scheduling.md). Output is ordered by cluster type, then
target name; `scheduler_core.config` composes each assignment's platform config next.
"""

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler_core.kube import DNS1123_LABEL_MAX, dns1123_label_problem, freeze
from scheduler_core.resources import ClusterType, SchedulingPolicy
from scheduler_core.snapshot import ControlPlaneSnapshot, RegisteredWorkload

__all__ = [
    "WORKLOAD_LABEL",
    "WORKSPACE_LABEL",
    "Assignment",
    "DeclaredSchema",
    "DeploymentTarget",
    "Schedule",
    "SchedulingError",
    "deployment_targets",
    "namespace_problem",
    "schedule",
    "selected_by",
]

WORKLOAD_LABEL = "workload"
WORKSPACE_LABEL = "workspace"
_NAMESPACE_CHARACTERS = re.compile(r"[a-z0-9-]*\Z")


@dataclass(frozen=True)
class DeclaredSchema:
    """A JSON Schema a Workload declares for the platform config of its targets."""

    name: str
    schema: Mapping[str, Any]


@dataclass(frozen=True)
class DeploymentTarget:
    """A Workload's deployment target as scheduling sees it (Kalypso's DeploymentTarget)."""

    name: str
    target: str
    workload: str
    workload_registration: str
    workspace: str
    environment: str
    labels: Mapping[str, str]
    manifests: Mapping[str, str]
    # The Workload's schemas first, then the target's own.
    config_schemas: tuple[DeclaredSchema, ...]


@dataclass(frozen=True)
class Assignment:
    """A deployment target placed on a cluster type, and the policies that placed it there."""

    environment: str
    cluster_type: ClusterType
    deployment_target: DeploymentTarget
    namespace: str
    policies: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str]:
        """(cluster type, deployment target): unique within an environment."""
        return (self.cluster_type.name, self.deployment_target.name)

    @property
    def folder(self) -> str:
        """Its folder in the platform GitOps repository."""
        return f"{self.cluster_type.name}/{self.deployment_target.name}"


@dataclass(frozen=True)
class SchedulingError:
    """A deployment target or an assignment that could not be scheduled, and why."""

    environment: str
    message: str
    workload: str | None = None
    cluster_type: str | None = None
    deployment_target: str | None = None
    # For an assignment: the policies that selected it.
    policies: tuple[str, ...] = ()

    def __str__(self) -> str:
        subject = [self.environment]
        if self.cluster_type is not None:
            subject.append(f"cluster type {self.cluster_type}")
        if self.deployment_target is not None:
            subject.append(f"deployment target {self.deployment_target}")
        elif self.workload is not None:
            subject.append(f"workload {self.workload}")
        return f"{', '.join(subject)}: {self.message}"


@dataclass(frozen=True)
class Schedule:
    environment: str
    deployment_targets: tuple[DeploymentTarget, ...]
    assignments: tuple[Assignment, ...]
    errors: tuple[SchedulingError, ...]


def deployment_targets(
    snapshot: ControlPlaneSnapshot,
) -> tuple[tuple[DeploymentTarget, ...], tuple[SchedulingError, ...]]:
    """The deployment targets of `snapshot`'s environment, by name.

    Two workloads can spell the same target name (`a-b` + `c` and `a` + `b-c`); the first
    workload by name keeps it and the other's target is reported.
    """
    found: dict[str, DeploymentTarget] = {}
    errors: list[SchedulingError] = []
    for registered in snapshot.workloads.values():
        for target in _targets_of(registered):
            if target.environment != snapshot.name:
                continue
            if (first := found.get(target.name)) is not None:
                message = (
                    f"target {target.target!r} of workload {target.workload!r} is named "
                    f"{target.name!r}, as target {first.target!r} of workload "
                    f"{first.workload!r} already is"
                )
                errors.append(SchedulingError(snapshot.name, message, workload=target.workload))
                continue
            found[target.name] = target
    return tuple(found[name] for name in sorted(found)), tuple(errors)


def _targets_of(registered: RegisteredWorkload) -> list[DeploymentTarget]:
    workload = registered.workload
    declared = [
        DeclaredSchema(f"Workload {workload.name} configSchemas[{index}]", schema)
        for index, schema in enumerate(workload.spec.config_schemas)
    ]
    targets = []
    for spec in workload.spec.deployment_targets:
        labels = {
            **spec.labels,
            **workload.labels,
            WORKLOAD_LABEL: workload.name,
            WORKSPACE_LABEL: registered.workspace,
        }
        own = [
            DeclaredSchema(
                f"Workload {workload.name} deploymentTargets[{spec.name}].configSchemas[{index}]",
                schema,
            )
            for index, schema in enumerate(spec.config_schemas)
        ]
        targets.append(
            DeploymentTarget(
                name=f"{workload.name}-{spec.name}",
                target=spec.name,
                workload=workload.name,
                workload_registration=registered.registration,
                workspace=registered.workspace,
                environment=spec.environment,
                labels=freeze(labels),
                manifests=spec.manifests,
                config_schemas=(*declared, *own),
            )
        )
    return targets


def namespace_problem(environment: str, cluster_type: str, deployment_target: str) -> str | None:
    """Why `<environment>-<cluster_type>-<deployment_target>` cannot name a namespace, or None."""
    namespace = f"{environment}-{cluster_type}-{deployment_target}"
    problem = dns1123_label_problem(namespace)
    if problem is None:
        return None
    parts = {
        "environment": environment,
        "cluster type": cluster_type,
        "deployment target": deployment_target,
    }
    if len(namespace) > DNS1123_LABEL_MAX:
        sizes = " + ".join(f"{what} {name!r} ({len(name)})" for what, name in parts.items())
        return f"namespace {namespace!r} {problem}: {sizes} + 2 dashes; shorten one of them"
    offending = [
        f"{what} {name!r}"
        for what, name in parts.items()
        if not _NAMESPACE_CHARACTERS.match(name) or not name
    ]
    culprits = f" ({', '.join(offending)})" if offending else ""
    return f"namespace {namespace!r} {problem}{culprits}"


def selected_by(
    policy: SchedulingPolicy,
    targets: Iterable[DeploymentTarget],
    cluster_types: Iterable[ClusterType],
) -> tuple[list[DeploymentTarget], list[ClusterType]]:
    """The targets and the cluster types `policy` selects; it assigns their cross product."""
    target_selector = policy.spec.deployment_target_selector
    chosen_targets = [
        target
        for target in targets
        if target_selector.workspace in ("", target.workspace)
        and target_selector.label_selector.matches(target.labels)
    ]
    cluster_type_selector = policy.spec.cluster_type_selector.label_selector
    chosen_cluster_types = [
        cluster_type
        for cluster_type in cluster_types
        if cluster_type_selector.matches(cluster_type.labels)
    ]
    return chosen_targets, chosen_cluster_types


def schedule(
    snapshot: ControlPlaneSnapshot, pairs: Collection[tuple[str, str]] | None = None
) -> Schedule:
    """The assignments of `snapshot`'s environment, by cluster type and deployment target.

    With `pairs`, only those (cluster type, deployment target) pairs are considered: the part
    of an environment a control-plane change can touch (see `scheduler_core.incremental`).
    """
    targets, errors = deployment_targets(snapshot)
    selected: dict[tuple[str, str], list[str]] = {}
    for policy in snapshot.scheduling_policies.values():
        chosen_targets, chosen_cluster_types = selected_by(
            policy, targets, snapshot.cluster_types.values()
        )
        if pairs is None:
            chosen: Iterable[tuple[str, str]] = (
                (cluster_type.name, target.name)
                for cluster_type in chosen_cluster_types
                for target in chosen_targets
            )
        else:
            cluster_type_names = {cluster_type.name for cluster_type in chosen_cluster_types}
            target_names = {target.name for target in chosen_targets}
            chosen = (
                pair for pair in pairs if pair[0] in cluster_type_names and pair[1] in target_names
            )
        for pair in chosen:
            selected.setdefault(pair, []).append(policy.name)

    by_name = {target.name: target for target in targets}
    assignments = []
    scheduling_errors = list(errors)
    for cluster_type_name, target_name in sorted(selected):
        problem = namespace_problem(snapshot.name, cluster_type_name, target_name)
        if problem is not None:
            scheduling_errors.append(
                SchedulingError(
                    snapshot.name,
                    problem,
                    workload=by_name[target_name].workload,
                    cluster_type=cluster_type_name,
                    deployment_target=target_name,
                    policies=tuple(sorted(selected[(cluster_type_name, target_name)])),
                )
            )
            continue
        assignments.append(
            Assignment(
                environment=snapshot.name,
                cluster_type=snapshot.cluster_types[cluster_type_name],
                deployment_target=by_name[target_name],
                namespace=f"{snapshot.name}-{cluster_type_name}-{target_name}",
                policies=tuple(sorted(selected[(cluster_type_name, target_name)])),
            )
        )
    return Schedule(
        environment=snapshot.name,
        deployment_targets=targets,
        assignments=tuple(assignments),
        errors=tuple(scheduling_errors),
    )
