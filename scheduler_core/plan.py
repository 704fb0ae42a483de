"""One environment's plan: its assignments, each with its platform config and its inputs.

The hand-off from scheduling and config composition to rendering: a `PlannedAssignment` gives
the template context and `AssignmentInputs`, the resources it was built from, to trace a change
to the assignments it touches. A config that breaks a schema is planned with its errors.
"""

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from scheduler_core.config import ComposedConfig, ConfigComposer, ConfigError
from scheduler_core.gotemplate import StringMap
from scheduler_core.scheduling import Assignment, SchedulingError, schedule
from scheduler_core.snapshot import ControlPlaneSnapshot

__all__ = ["AssignmentInputs", "EnvironmentPlan", "PlannedAssignment", "plan_environment"]


@dataclass(frozen=True)
class AssignmentInputs:
    """The names of everything an assignment depends on, each kind in its own field.

    `config_maps` and `config_schemas` are those that matched; a new or relabelled ConfigMap
    or ConfigSchema has to be matched against the assignments again to find the ones it
    feeds. Schemas a Workload declares come with `workload`.
    """

    cluster_type: str
    deployment_target: str
    workload: str
    workload_registration: str
    policies: tuple[str, ...]
    config_maps: tuple[str, ...]
    config_schemas: tuple[str, ...]
    templates: tuple[str, ...]


@dataclass(frozen=True)
class PlannedAssignment:
    assignment: Assignment
    config: ComposedConfig
    inputs: AssignmentInputs

    @property
    def errors(self) -> tuple[ConfigError, ...]:
        return self.config.errors

    def template_context(self) -> dict[str, Any]:
        """The data a Kalypso template renders with, by the names Kalypso gives it.

        `.Repo`, `.Branch` and `.Path` are there too: Kalypso's early templates, still in its
        sample control plane, read the manifests' place from them. `.Labels` and `.Manifests`
        are Go's `map[string]string` there, so `index .Labels "absent"` gives "".
        """
        assignment = self.assignment
        target = assignment.deployment_target
        manifests = StringMap(target.manifests)
        return {
            "DeploymentTargetName": target.name,
            "Namespace": assignment.namespace,
            "Environment": assignment.environment,
            "Workspace": target.workspace,
            "Workload": target.workload,
            "Labels": StringMap(target.labels),
            "Manifests": manifests,
            "ClusterType": assignment.cluster_type.name,
            "ConfigData": self.config.data,
            "Repo": manifests["repo"],
            "Branch": manifests["branch"],
            "Path": manifests["path"],
        }


@dataclass(frozen=True)
class EnvironmentPlan:
    snapshot: ControlPlaneSnapshot
    assignments: tuple[PlannedAssignment, ...]
    # Scheduling errors, then the config errors of every assignment.
    errors: tuple[SchedulingError | ConfigError, ...]


def plan_environment(
    snapshot: ControlPlaneSnapshot, pairs: Collection[tuple[str, str]] | None = None
) -> EnvironmentPlan:
    """The plan of `snapshot`'s environment; with `pairs`, of those pairs only (see `schedule`)."""
    scheduled = schedule(snapshot, pairs)
    composer = ConfigComposer(snapshot)
    planned = []
    errors: list[SchedulingError | ConfigError] = list(scheduled.errors)
    for assignment in scheduled.assignments:
        config = composer.compose(assignment)
        errors.extend(config.errors)
        cluster_type = assignment.cluster_type.spec
        templates = {cluster_type.reconciler, cluster_type.namespace_service}
        if cluster_type.config_type:
            templates.add(cluster_type.config_type)
        target = assignment.deployment_target
        inputs = AssignmentInputs(
            cluster_type=assignment.cluster_type.name,
            deployment_target=target.name,
            workload=target.workload,
            workload_registration=target.workload_registration,
            policies=assignment.policies,
            config_maps=config.config_maps,
            config_schemas=config.config_schemas,
            templates=tuple(sorted(templates)),
        )
        planned.append(PlannedAssignment(assignment=assignment, config=config, inputs=inputs))
    return EnvironmentPlan(snapshot=snapshot, assignments=tuple(planned), errors=tuple(errors))
