"""Incremental rendering: after a control-plane change, render only what depends on it.

From the previous `RenderState`, the tree it rendered and the new snapshot, gives the
`RenderResult` a full render (`output.render_environment`) would give, rendering the touched
pairs only; docs/contributing.md ("The scheduler core") says how and why that is equal.
"""

from collections.abc import Iterable, Mapping
from datetime import datetime

from scheduler_core.config import matching_targets
from scheduler_core.output import (
    README_FILE,
    RenderResult,
    arrange,
    errors_of,
    readme,
    record_of,
    rejected_records,
)
from scheduler_core.plan import plan_environment
from scheduler_core.render import AssignmentRenderer, TimeLimit
from scheduler_core.scheduling import (
    DeploymentTarget,
    deployment_targets,
    selected_by,
)
from scheduler_core.snapshot import ControlPlaneSnapshot
from scheduler_core.state import (
    CLUSTER_TYPES,
    CONFIG_MAPS,
    CONFIG_SCHEMAS,
    DEPLOYMENT_TARGETS,
    POLICIES,
    TEMPLATES,
    AssignmentRecord,
    Fingerprints,
    RenderState,
    fingerprints,
)

__all__ = ["changed_inputs", "render_incremental", "touched_pairs"]

Pair = tuple[str, str]


def changed_inputs(before: Fingerprints, after: Fingerprints) -> dict[str, set[str]]:
    """The names of the inputs added, removed or changed, by kind."""
    changed: dict[str, set[str]] = {}
    for kind in before.keys() | after.keys():
        old, new = before.get(kind, {}), after.get(kind, {})
        changed[kind] = {name for name in old.keys() | new.keys() if old.get(name) != new.get(name)}
    return changed


def touched_pairs(
    snapshot: ControlPlaneSnapshot,
    state: RenderState,
    targets: Iterable[DeploymentTarget],
    changed: Mapping[str, set[str]],
) -> set[Pair]:
    """The pairs whose assignment, output or errors the changed inputs can alter."""
    targets = list(targets)
    touched = _recorded_pairs(state, changed)
    cluster_types = snapshot.cluster_types
    for name in changed.get(CLUSTER_TYPES, set()) & cluster_types.keys():
        touched.update((name, target.name) for target in targets)
    for name in changed.get(DEPLOYMENT_TARGETS, set()) & {target.name for target in targets}:
        touched.update((cluster_type, name) for cluster_type in cluster_types)
    for name in changed.get(POLICIES, set()) & snapshot.scheduling_policies.keys():
        chosen_targets, chosen_cluster_types = selected_by(
            snapshot.scheduling_policies[name], targets, cluster_types.values()
        )
        touched.update(
            (cluster_type.name, target.name)
            for cluster_type in chosen_cluster_types
            for target in chosen_targets
        )
    # A ConfigMap or ConfigSchema changes no schedule: what it now matches is among the pairs
    # assigned before (those newly assigned are touched already, by the change that made them).
    by_name = {target.name: target for target in targets}
    for kind, resources in (
        (CONFIG_MAPS, snapshot.config_maps),
        (CONFIG_SCHEMAS, snapshot.config_schemas),
    ):
        for name in changed.get(kind, set()) & resources.keys():
            labels = resources[name].labels
            for cluster_type, records in state.assignments.items():
                if cluster_type not in cluster_types:
                    continue
                assigned = (by_name[target] for target in records if target in by_name)
                touched.update(
                    (cluster_type, target.name)
                    for target in matching_targets(labels, cluster_types[cluster_type], assigned)
                )
    return touched


def _recorded_pairs(state: RenderState, changed: Mapping[str, set[str]]) -> set[Pair]:
    """The pairs whose record names a changed input."""
    touched: set[Pair] = set()
    for kind, field in (
        (CLUSTER_TYPES, "cluster_type"),
        (DEPLOYMENT_TARGETS, "deployment_target"),
        (POLICIES, "policies"),
        (CONFIG_MAPS, "config_maps"),
        (CONFIG_SCHEMAS, "config_schemas"),
        (TEMPLATES, "templates"),
    ):
        names = changed.get(kind)
        if not names:
            continue
        if kind == CLUSTER_TYPES:
            for name in names & state.assignments.keys():
                touched.update((name, target) for target in state.assignments[name])
            continue
        for record in state.records():
            used = getattr(record.inputs, field)
            if used in names if isinstance(used, str) else not names.isdisjoint(used):
                touched.add(record.key)
    return touched


def render_incremental(
    snapshot: ControlPlaneSnapshot,
    previous: Mapping[str, bytes],
    state: RenderState,
    *,
    now: datetime,
    time_limit: TimeLimit | None = None,
) -> RenderResult:
    """What `output.render_environment` gives for `snapshot`, rendering only what changed.

    `previous` is the tree `state` was rendered into; `now` the time templates see;
    `time_limit` how long one assignment's render may take.
    """
    if state.environment != snapshot.name:
        raise ValueError(
            f"the render state is of environment {state.environment!r}, "
            f"the snapshot of {snapshot.name!r}"
        )
    targets, target_errors = deployment_targets(snapshot)
    after = fingerprints(snapshot, targets)
    changed = changed_inputs(state.fingerprints, after)
    touched = touched_pairs(snapshot, state, targets, changed)
    plan = plan_environment(snapshot, touched)
    renderer = AssignmentRenderer(snapshot, now, time_limit=time_limit)

    before: dict[Pair, AssignmentRecord] = {}
    kept = dict(state.assignments)
    for name in {cluster_type for cluster_type, _ in touched} & kept.keys():
        staying = {}
        for target, record in kept[name].items():
            if (name, target) in touched:
                before[(name, target)] = record
            else:
                staying[target] = record
        kept[name] = staying

    write: dict[str, bytes] = {}
    delete = {f"{record.folder}/{name}" for record in before.values() for name in record.files}
    records = []
    for planned in plan.assignments:
        old = before.get(planned.assignment.key)
        record, files = record_of(renderer, planned, {} if old is None else _held(previous, old))
        records.append(record)
        for name, content in files.items():
            path = f"{record.folder}/{name}"
            delete.discard(path)
            if previous.get(path) != content:
                write[path] = content
    records.extend(rejected_records(plan, targets))
    assignments = arrange(records, kept)

    for name in {cluster_type for cluster_type, _ in touched} | changed[CLUSTER_TYPES]:
        path = f"{name}/{README_FILE}"
        cluster_type = snapshot.cluster_types.get(name)
        if cluster_type is None:
            if path in previous:
                delete.add(path)
            continue
        content = readme(snapshot.name, cluster_type, assignments.get(name, {}).values())
        if previous.get(path) != content:
            write[path] = content

    new_state = RenderState(environment=snapshot.name, fingerprints=after, assignments=assignments)
    return RenderResult(
        environment=snapshot.name,
        write=dict(sorted(write.items())),
        delete=tuple(sorted(delete)),
        errors=errors_of(target_errors, new_state),
        state=new_state,
    )


def _held(previous: Mapping[str, bytes], record: AssignmentRecord) -> dict[str, bytes]:
    """What a pair's folder holds, as its record says (the tree is the one the state is of)."""
    held = {}
    for name in record.files:
        path = f"{record.folder}/{name}"
        if path not in previous:
            raise ValueError(
                f"the tree has no {path}, which the render state records: the state is not "
                "of this tree; render the environment in full"
            )
        held[name] = previous[path]
    return held
