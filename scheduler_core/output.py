"""The platform GitOps tree of an environment: rendered assignments in, files to change out.

`render_environment` renders an `EnvironmentPlan` against the tree it replaces (path ->
content) in Kalypso's layout (docs/scheduling.md) and returns a `RenderResult`: files to write
and delete, the errors, and the next `RenderState`. Nothing here touches a file.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from scheduler_core.plan import AssignmentInputs, EnvironmentPlan, PlannedAssignment
from scheduler_core.render import AssignmentRenderer, RenderError, TimeLimit
from scheduler_core.resources import ClusterType
from scheduler_core.scheduling import DeploymentTarget, SchedulingError, deployment_targets
from scheduler_core.state import (
    AssignmentRecord,
    RenderState,
    content_hash,
    fingerprints,
)

__all__ = [
    "README_FILE",
    "RenderResult",
    "arrange",
    "errors_of",
    "owned",
    "readme",
    "record_of",
    "rejected_records",
    "render_environment",
]

README_FILE = "README.md"


@dataclass(frozen=True)
class RenderResult:
    """What a render changes in the environment's platform tree, and what it found wrong.

    `errors`: the deployment targets' conflicts first, then every assignment's problems by
    cluster type and deployment target; assignments that failed before and were not
    rendered again still report theirs.
    """

    environment: str
    write: Mapping[str, bytes]
    delete: tuple[str, ...]
    errors: tuple[RenderError, ...]
    state: RenderState

    def apply(self, tree: Mapping[str, bytes]) -> dict[str, bytes]:
        """`tree`, the files the render started from, with this result's changes made."""
        deleted = set(self.delete)
        changed = {path: content for path, content in tree.items() if path not in deleted}
        changed.update(self.write)
        return dict(sorted(changed.items()))


def owned(path: str) -> bool:
    """Whether the renderer manages `path`: a file inside a top folder not starting with '.'."""
    top, separator, _ = path.partition("/")
    return bool(separator) and not top.startswith(".")


def record_of(
    renderer: AssignmentRenderer, planned: PlannedAssignment, held: Mapping[str, bytes]
) -> tuple[AssignmentRecord, Mapping[str, bytes]]:
    """An assignment rendered, and the files its folder holds then: the new ones, or those it
    `held` before when the render failed."""
    rendered = renderer.render(planned)
    files = held if rendered.files is None else rendered.files
    record = AssignmentRecord(
        inputs=planned.inputs,
        status="failed" if rendered.files is None else "rendered",
        namespace=planned.assignment.namespace,
        files=tuple(sorted(files)),
        content_hash=content_hash(files) if files else None,
        config_hash=planned.config.config_hash,
        errors=rendered.errors,
    )
    return record, files


def rejected_records(
    plan: EnvironmentPlan, targets: Iterable[DeploymentTarget]
) -> list[AssignmentRecord]:
    """The records of the pairs of `plan` that policies select but scheduling refused."""
    by_name = {target.name: target for target in targets}
    records = []
    for error in plan.errors:
        if not isinstance(error, SchedulingError) or error.deployment_target is None:
            continue
        assert error.cluster_type is not None
        target = by_name[error.deployment_target]
        inputs = AssignmentInputs(
            cluster_type=error.cluster_type,
            deployment_target=target.name,
            workload=target.workload,
            workload_registration=target.workload_registration,
            policies=error.policies,
            config_maps=(),
            config_schemas=(),
            templates=(),
        )
        records.append(
            AssignmentRecord(
                inputs=inputs,
                status="rejected",
                namespace=f"{error.environment}-{error.cluster_type}-{target.name}",
                files=(),
                content_hash=None,
                config_hash=None,
                errors=(RenderError.of_scheduling(error),),
            )
        )
    return records


def arrange(
    records: Iterable[AssignmentRecord],
    base: Mapping[str, Mapping[str, AssignmentRecord]] | None = None,
) -> dict[str, Mapping[str, AssignmentRecord]]:
    """`base` with `records` put in (replacing those of the same pair), by cluster type and
    deployment target, both in name order; cluster types left without records are dropped.
    Only the cluster types that receive records are copied."""
    arranged: dict[str, Mapping[str, AssignmentRecord]] = dict(base or {})
    received: dict[str, dict[str, AssignmentRecord]] = {}
    for record in records:
        cluster_type = record.inputs.cluster_type
        if cluster_type not in received:
            received[cluster_type] = dict(arranged.get(cluster_type, {}))
        received[cluster_type][record.inputs.deployment_target] = record
    arranged.update((name, dict(sorted(found.items()))) for name, found in received.items())
    return {name: arranged[name] for name in sorted(arranged) if arranged[name]}


def readme(
    environment: str, cluster_type: ClusterType, records: Iterable[AssignmentRecord]
) -> bytes:
    """The README of a cluster type folder: the cluster type, then what is assigned there."""
    spec = cluster_type.spec
    labels = ", ".join(f"`{key}={value}`" for key, value in sorted(cluster_type.labels.items()))
    templates = f"reconciler `{spec.reconciler}`, namespace `{spec.namespace_service}`"
    if spec.config_type:
        templates += f", config `{spec.config_type}`"
    lines = [
        f"# Cluster type {cluster_type.name} in {environment}",
        "",
        "Generated by the fleetmark scheduler from the control plane; changes made here are "
        "overwritten.",
        "",
        f"- labels: {labels or 'none'}",
        f"- templates: {templates}",
        "",
    ]
    assigned = [record for record in records if record.status != "rejected"]
    if not assigned:
        lines.append("Nothing is assigned to this cluster type.")
    else:
        lines += [
            "| deployment target | workload | namespace | scheduled by | output |",
            "|---|---|---|---|---|",
        ]
        for record in sorted(assigned, key=lambda record: record.inputs.deployment_target):
            inputs = record.inputs
            if record.status == "rendered":
                output = "rendered"
            elif record.files:
                output = "render failed; previous output kept"
            else:
                output = "render failed; no output yet"
            lines.append(
                f"| [{inputs.deployment_target}]({inputs.deployment_target}/) "
                f"| {inputs.workload} | {record.namespace} | {', '.join(inputs.policies)} "
                f"| {output} |"
            )
    return ("\n".join(lines) + "\n").encode()


def render_environment(
    plan: EnvironmentPlan,
    previous: Mapping[str, bytes],
    *,
    now: datetime,
    time_limit: TimeLimit | None = None,
) -> RenderResult:
    """Every assignment of `plan` rendered against `previous`, the environment's tree.

    `now` is the time templates see through `now` and `date`; `time_limit` how long one
    assignment's render may take (`render.TimeLimit`), without which only its cost is bounded.
    """
    snapshot = plan.snapshot
    held = _folders(previous)
    renderer = AssignmentRenderer(snapshot, now, time_limit=time_limit)
    records = []
    tree: dict[str, bytes] = {}
    for planned in plan.assignments:
        record, files = record_of(renderer, planned, held.get(planned.assignment.key, {}))
        records.append(record)
        tree.update((f"{record.folder}/{name}", content) for name, content in files.items())
    targets, target_errors = deployment_targets(snapshot)
    records.extend(rejected_records(plan, targets))
    assignments = arrange(records)
    for name, cluster_type in snapshot.cluster_types.items():
        tree[f"{name}/{README_FILE}"] = readme(
            snapshot.name, cluster_type, assignments.get(name, {}).values()
        )

    state = RenderState(
        environment=snapshot.name,
        fingerprints=fingerprints(snapshot, targets),
        assignments=assignments,
    )
    return RenderResult(
        environment=snapshot.name,
        write={path: tree[path] for path in sorted(tree) if previous.get(path) != tree[path]},
        delete=tuple(sorted(path for path in previous if owned(path) and path not in tree)),
        errors=errors_of(target_errors, state),
        state=state,
    )


def errors_of(
    target_errors: Iterable[SchedulingError], state: RenderState
) -> tuple[RenderError, ...]:
    """The errors a render reports: the targets', then each record's in order."""
    errors = [RenderError.of_scheduling(error) for error in target_errors]
    for record in state.records():
        errors.extend(record.errors)
    return tuple(errors)


def _folders(tree: Mapping[str, bytes]) -> dict[tuple[str, str], dict[str, bytes]]:
    """The files of `tree` by assignment folder (cluster type, deployment target)."""
    folders: dict[tuple[str, str], dict[str, bytes]] = {}
    for path, content in tree.items():
        parts = path.split("/", 2)
        if len(parts) == 3 and owned(path):
            folders.setdefault((parts[0], parts[1]), {})[parts[2]] = content
    return folders
