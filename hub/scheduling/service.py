"""Scheduling: the control plane in, one commit per environment to the platform GitOps repository
out, and the assignments and errors in the store (docs/scheduling.md).

Git work runs in a worker thread (GitPython is synchronous); the store is written from the
event loop. One replica schedules at a time (a PostgreSQL advisory lock).
"""

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from hub.errors import InvalidInput
from hub.events.service import (
    Event,
    Held,
    event_source,
    held,
    hold,
    page_url,
    publish,
    release,
)
from hub.git.local import GitFailure, LocalRepository, Signature
from hub.git.urls import (
    LOCAL_REFUSED,
    InvalidRepositoryUrl,
    is_local_url,
    normalise_repository_url,
    redact_url,
)
from hub.placement.repository import ensure_environment
from hub.scheduling import repository
from hub.scheduling.clones import (
    PROMOTED_COMMIT_FILE,
    Clones,
    ControlPlaneFetch,
    PlatformBranch,
    read_branch,
)
from hub.scheduling.repository import AssignmentFilter, ErrorFilter, StoredTarget
from hub.scheduling.schemas import (
    AssignmentChange,
    AssignmentPage,
    Change,
    EnvironmentOutcome,
    Problem,
    ScheduledAssignmentOut,
    ScheduleEventData,
    ScheduleRequest,
    ScheduleRun,
    SchedulingErrorOut,
    SchedulingErrorPage,
)
from hub.settings import HubSettings
from hub.text import short_sha
from hub.types import Clock, Units
from scheduler_core.incremental import render_incremental
from scheduler_core.loader import LoadError, LoadResult, load_control_plane
from scheduler_core.output import RenderResult, owned, render_environment
from scheduler_core.plan import plan_environment
from scheduler_core.render import RenderError, TimeLimit
from scheduler_core.snapshot import ControlPlaneSnapshot, RepoRef
from scheduler_core.state import AssignmentRecord, RenderState, dump_state, load_state

log = structlog.get_logger("fleetmark.scheduling")

# A monotonic clock in seconds, for time limits.
Timer = Callable[[], float]
Pair = tuple[str, str]
# The control plane's branch holding what is promoted, as in Kalypso.
MAIN_BRANCH = "main"
DEPLOYMENT_BRANCH_PREFIX = "deployment/"


# --- running ----------------------------------------------------------------------------------


def check_locations(request: ScheduleRequest, *, allow_local: bool) -> None:
    """Through the API, the repositories on the hub's own file system only where local
    repositories are allowed (as for the harvest's)."""
    for name, location in (("control_plane", request.control_plane), ("gitops", request.gitops)):
        if not allow_local and is_local_url(location):
            raise InvalidInput(f"{name}: {LOCAL_REFUSED.format(url=location)}")


@dataclass(frozen=True, slots=True)
class _Job:
    """What every environment of one run shares."""

    request: ScheduleRequest
    clones: Clones
    loaded: LoadResult
    platform: LocalRepository | None
    # Why the platform repository cannot be used, when it cannot.
    platform_failure: str | None
    author: Signature
    # How long one assignment's render may take.
    time_limit: TimeLimit
    # The hub's URL, the source of the events an environment failing or recovering sends.
    source: str

    @property
    def gitops_url(self) -> str:
        return normalise_repository_url(self.request.gitops)

    @property
    def now(self) -> datetime:
        return self.author.when


async def schedule_environments(
    units: Units,
    settings: HubSettings,
    request: ScheduleRequest,
    *,
    clock: Clock,
    timer: Timer = time.monotonic,
) -> ScheduleRun:
    """Schedule the environments `request` names (all those declared when it names none), each
    recorded in units of work of its own; the caller holds the scheduling lock. A control plane
    that cannot be read declares none: then the environments scheduled before fail. `timer` is
    the clock the time limit of an assignment's render (`settings.template_render_timeout`) is
    kept by."""
    started = time.perf_counter()
    author = Signature(settings.schedule_author_name, settings.schedule_author_email, clock())
    clones = Clones(
        settings.effective_git_cache_dir / "scheduler",
        timeout=settings.git_timeout,
        max_file_bytes=settings.harvest_max_file_bytes,
    )
    try:
        loaded = await asyncio.to_thread(
            _load, clones, request.control_plane, settings.discovery_allowed_urls
        )
        platform, platform_failure = await asyncio.to_thread(_platform, clones, request.gitops)
        time_limit = TimeLimit(settings.template_render_timeout, timer)
        job = _Job(
            request,
            clones,
            loaded,
            platform,
            platform_failure,
            author,
            time_limit,
            event_source(settings),
        )
        names = request.environments
        if names is None:
            names = sorted(loaded.snapshots)
            if _unread(loaded):
                async with units() as session:
                    names = await _known_environments(session, job)
        outcomes = [await _schedule_environment(units, job, name) for name in names]
        async with units() as session:
            await _announce_control_plane(session, job, names)
    finally:
        await asyncio.to_thread(clones.close)
    return ScheduleRun(
        control_plane=request.control_plane,
        environments=outcomes,
        seconds=time.perf_counter() - started,
    )


def _load(clones: Clones, control_plane: str, allowed: list[str] | None) -> LoadResult:
    fetch = ControlPlaneFetch(clones, control_plane, allowed)
    return load_control_plane(RepoRef(repo=control_plane, branch=MAIN_BRANCH), fetch)


def _platform(clones: Clones, location: str) -> tuple[LocalRepository | None, str | None]:
    try:
        return clones.get(location), None
    except (GitFailure, InvalidRepositoryUrl) as exc:
        return None, f"the platform GitOps repository cannot be read: {exc}"


async def _schedule_environment(units: Units, job: _Job, name: str) -> EnvironmentOutcome:
    snapshot = job.loaded.snapshots.get(name)
    if snapshot is None:
        # Nothing is stored: the name may be a typo, which must not become an environment.
        loaded = ", ".join(sorted(job.loaded.snapshots)) or "none"
        failure = f"environment {name!r} was not loaded from the control plane (loaded: {loaded})"
        if job.loaded.errors:
            failure += "; see the load errors"
        outcome = _Written.failed(job, name, failure, _load_problems(name, job.loaded.errors))
        async with units() as session:
            await _announce(session, job, outcome)
        return outcome.outcome
    async with units() as session:
        stored = await repository.stored_target(session, job.gitops_url, name)
    written = await asyncio.to_thread(_write_environment, job, snapshot, stored)
    async with units() as session:
        await _record(session, job, written, stored, sorted(snapshot.cluster_types))
        await _announce(session, job, written)
    return written.outcome


# The kinds of the states (hub.events) scheduling holds: an environment whose scheduling
# fails, by its name; a control plane that cannot be read while no environment it schedules
# is known, by its URL.
FAILING = "schedule"
UNREAD = "schedule_control_plane"
# The API answer that shows what an environment's last run could not do: an event's evidence.
ERRORS_ANSWER = "/api/v1/scheduling/errors"


def _unread(loaded: LoadResult) -> bool:
    """The control plane could not be read: it loaded no environment, and failed."""
    return not loaded.snapshots and bool(loaded.errors)


async def _known_environments(session: AsyncSession, job: _Job) -> list[str]:
    """The environments a control plane that cannot be read leaves unscheduled: those scheduled
    into the platform repository before, and those failing already."""
    known = await repository.scheduled_environments(session, job.gitops_url)
    return sorted({*known, *(await held(session, FAILING))})


@dataclass(frozen=True, slots=True)
class _Failing:
    """Why an environment's run fails: nothing could be written, or the assignments of some
    cluster types failed to render (they keep their old output, the others are written)."""

    failure: str
    cluster_types: list[str] = field(default_factory=list)
    assignments: int = 0


def _failing(written: "_Written") -> _Failing | None:
    """What fails in an environment's run; None: everything was written."""
    outcome = written.outcome
    if outcome.failure is not None:
        return _Failing(outcome.failure)
    if written.state is None or not outcome.failed:
        return None
    records = [record for record in written.state.records() if record.status == "failed"]
    cluster_types = sorted({record.inputs.cluster_type for record in records})
    first = next((error.message for record in records for error in record.errors), None)
    assignments = "1 assignment" if len(records) == 1 else f"{len(records)} assignments"
    of = "cluster type" if len(cluster_types) == 1 else "cluster types"
    fail = "fails" if len(records) == 1 else "fail"
    failure = (
        f"{assignments} of {of} {', '.join(cluster_types)} {fail} to render "
        f"(old output kept){f': {first}' if first else ''}"
    )
    return _Failing(failure, cluster_types, len(records))


def _schedule_event(
    job: _Job,
    environment: str | None,
    failing: _Failing | None,
    since: datetime,
    *,
    declared: bool = True,
) -> Event:
    """fleetmark.schedule.failed (`failing`) or .recovered (None), of an environment or (None)
    of the control plane."""
    control_plane = normalise_repository_url(job.request.control_plane)
    data = ScheduleEventData(
        environment=environment,
        control_plane=control_plane,
        gitops_url=job.gitops_url,
        failure=failing.failure if failing else None,
        failing_cluster_types=failing.cluster_types if failing else [],
        failed_assignments=failing.assignments if failing else 0,
        failing_since=since,
        declared=declared,
        evidence_url=page_url(job.source, ERRORS_ANSWER, {"environment": environment}),
    )
    about = (
        f"environments/{environment}"
        if environment is not None
        else f"control-planes/{redact_url(control_plane)}"
    )
    return Event(
        type="fleetmark.schedule.failed" if failing else "fleetmark.schedule.recovered",
        subject=f"{about}/schedule",
        time=job.now,
        data=data.model_dump(mode="json"),
        environment=environment,
    )


async def _announce(session: AsyncSession, job: _Job, written: "_Written") -> None:
    """fleetmark.schedule.failed when an environment's run fails, wholly or in part (some
    assignments fail to render), and the one before did not; .recovered when it writes
    everything after failing."""
    name = written.outcome.environment
    failing = _failing(written)
    was_failing = (await held(session, FAILING)).get(name)
    if (failing is None) == (was_failing is None):
        return
    if was_failing is None:
        since = job.now
        await hold(session, FAILING, {name: Held(since, announced=True)})
    else:
        since = was_failing.since
        await release(session, FAILING, [name])
    await publish(session, [_schedule_event(job, name, failing, since)], source=job.source)


async def _announce_control_plane(
    session: AsyncSession, job: _Job, scheduled: Sequence[str]
) -> None:
    """After a run: fleetmark.schedule.failed of the control plane when it cannot be read and
    no environment could be named for it, .recovered once it is read again. A control plane
    that is read closes what it no longer declares: each environment failing that it did not
    load and the run did not name (removed, or a mistyped name) is recovered, undeclared."""
    control_plane = normalise_repository_url(job.request.control_plane)
    unread = (await held(session, UNREAD)).get(control_plane)
    events = []
    if _unread(job.loaded):
        if unread is None and not scheduled:
            await hold(session, UNREAD, {control_plane: Held(job.now, announced=True)})
            unreadable = _Failing("the control plane could not be read; see the load errors")
            events.append(_schedule_event(job, None, unreadable, job.now))
    else:
        if unread is not None:
            await release(session, UNREAD, [control_plane])
            events.append(_schedule_event(job, None, None, unread.since))
        failing = await held(session, FAILING)
        gone = sorted(failing.keys() - job.loaded.snapshots.keys() - set(scheduled))
        await release(session, FAILING, gone)
        events += [
            _schedule_event(job, name, None, failing[name].since, declared=False) for name in gone
        ]
    await publish(session, events, source=job.source)


# --- rendering and writing one environment (worker thread) -----------------------------------


@dataclass(slots=True)
class _Written:
    """An environment after its run: what to report, and what to store."""

    outcome: EnvironmentOutcome
    # The render, when its result is what the branch (or the proposal) holds now.
    state: RenderState | None = None
    state_json: bytes | None = None
    # The tree the render state describes; None: render in full next time.
    state_tree: str | None = None
    # The head the render was made against, and the commit holding the changed assignments.
    head: str | None = None
    change_commit: str | None = None
    change_branch: str | None = None
    changed: set[Pair] = field(default_factory=set)

    @classmethod
    def failed(
        cls, job: _Job, environment: str, failure: str, errors: Sequence[Problem]
    ) -> "_Written":
        return cls(
            outcome=EnvironmentOutcome(
                environment=environment,
                gitops_url=job.gitops_url,
                mode=job.request.mode,
                branch=None,
                commit=None,
                parent=None,
                promoted_commit=None,
                promoted_changed=False,
                render=None,
                assignments=0,
                failed=0,
                written=[],
                deleted=[],
                held=[],
                changes=[],
                errors=list(errors),
                failure=failure,
            )
        )


def _write_environment(
    job: _Job, snapshot: ControlPlaneSnapshot, stored: StoredTarget | None
) -> _Written:
    name = snapshot.name
    problems = _load_problems(name, job.loaded.errors)
    if job.platform is None:
        assert job.platform_failure is not None
        return _Written.failed(
            job, name, job.platform_failure, [*problems, _git_problem(name, job.platform_failure)]
        )
    platform = job.platform
    try:
        current = read_branch(platform, name, job.clones.max_file_bytes)
    except GitFailure as exc:
        failure = f"branch {name} of the platform GitOps repository cannot be read: {exc}"
        return _Written.failed(job, name, failure, [*problems, _git_problem(name, failure)])

    result, render = _render(snapshot, current, stored, job.now, job.time_limit)
    problems += [_render_problem(error) for error in result.errors]
    write = dict(result.write)
    delete = list(result.delete)
    held: list[str] = []
    if job.loaded.errors and delete:
        held, delete = delete, []
    promoted = snapshot.base.commit or snapshot.base.ref.commit
    if promoted is not None and promoted != current.promoted_commit:
        write[PROMOTED_COMMIT_FILE] = promoted.encode()
    promoted_changed = PROMOTED_COMMIT_FILE in write
    changes = _changes(current.files, write, delete, result.state)
    records = list(result.state.records())
    written = _Written(
        outcome=EnvironmentOutcome(
            environment=name,
            gitops_url=job.gitops_url,
            mode=job.request.mode,
            branch=None,
            commit=None,
            parent=current.head,
            promoted_commit=promoted,
            promoted_changed=False,
            render=render,
            assignments=sum(record.status != "rejected" for record in records),
            failed=sum(record.status == "failed" for record in records),
            written=sorted(write),
            deleted=sorted(delete),
            held=held,
            changes=changes,
            errors=problems,
        ),
        state=result.state,
        state_json=dump_state(result.state),
        state_tree=None if held else current.tree,
        head=current.head,
        changed={(change.cluster_type, change.deployment_target) for change in changes},
    )
    if not write and not delete:
        return written

    message = _commit_message(snapshot, changes, records, promoted if promoted_changed else None)
    try:
        _publish(job, platform, written, write, delete, message)
    except GitFailure as exc:
        failure = f"the commit could not be written: {exc}"
        failed = _Written.failed(job, name, failure, [*problems, _git_problem(name, failure)])
        failed.outcome.render = render
        return failed
    written.outcome.promoted_changed = promoted_changed and written.outcome.commit is not None
    if held:
        written.state_tree = None
    return written


def _publish(
    job: _Job,
    platform: LocalRepository,
    written: _Written,
    write: Mapping[str, bytes],
    delete: Sequence[str],
    message: str,
) -> None:
    """Commit the changes on the branch head and push them: to the environment branch, or to
    a new deployment branch unless one holds this very tree already."""
    outcome = written.outcome
    commit = platform.write_commit(written.head, write, delete, message=message, author=job.author)
    tree = platform.tree_of(commit)
    written.state_tree = tree
    branch = outcome.environment
    if job.request.mode == "branch":
        proposed = _proposal_of(platform, tree)
        if proposed is not None:
            outcome.already_proposed = proposed[0]
            written.change_branch, written.change_commit = proposed
            return
        branch = f"{DEPLOYMENT_BRANCH_PREFIX}{job.now:%Y%m%d-%H%M%S}-{outcome.environment}"
    job.clones.push(platform, job.request.gitops, commit, branch)
    outcome.branch, outcome.commit = branch, commit
    written.change_branch, written.change_commit = branch, commit


def _render(
    snapshot: ControlPlaneSnapshot,
    current: PlatformBranch,
    stored: StoredTarget | None,
    now: datetime,
    time_limit: TimeLimit,
) -> tuple[RenderResult, Literal["full", "incremental"]]:
    """Only what changed when the branch holds the tree the stored state describes."""
    if (
        stored is not None
        and stored.render_state is not None
        and stored.tree_sha is not None
        and stored.tree_sha == current.tree
    ):
        try:
            state = load_state(stored.render_state)
            result = render_incremental(
                snapshot, current.files, state, now=now, time_limit=time_limit
            )
            return result, "incremental"
        except ValueError as exc:  # a state of an older format, or of another tree
            log.info("rendering in full: the stored render state does not fit", reason=str(exc))
    plan = plan_environment(snapshot)
    return render_environment(plan, current.files, now=now, time_limit=time_limit), "full"


def _proposal_of(platform: LocalRepository, tree: str) -> tuple[str, str] | None:
    """A deployment branch (and its head) whose tree is `tree`: the change is proposed already."""
    for branch, head in sorted(platform.branch_heads().items()):
        if branch.startswith(DEPLOYMENT_BRANCH_PREFIX) and platform.tree_of(head) == tree:
            return branch, head
    return None


def _folder(path: str) -> Pair | None:
    parts = path.split("/")
    return (parts[0], parts[1]) if len(parts) == 3 and owned(path) else None


def _changes(
    previous: Mapping[str, bytes],
    write: Mapping[str, bytes],
    delete: Iterable[str],
    state: RenderState,
) -> list[AssignmentChange]:
    """The assignment folders the commit adds, updates or removes."""
    before: dict[Pair, set[str]] = {}
    for path in previous:
        if (pair := _folder(path)) is not None:
            before.setdefault(pair, set()).add(path)
    touched: dict[Pair, set[str]] = {}
    deleted = set(delete)
    for path in [*write, *deleted]:
        if (pair := _folder(path)) is not None:
            touched.setdefault(pair, set()).add(path)
    status = {record.key: record.status for record in state.records()}
    changes = []
    for pair in sorted(touched):
        old = before.get(pair, set())
        new = (old - deleted) | {path for path in touched[pair] if path in write}
        change: Change = "added" if not old else "removed" if not new else "updated"
        changes.append(
            AssignmentChange(
                cluster_type=pair[0],
                deployment_target=pair[1],
                change=change,
                status=None if change == "removed" else status.get(pair),
            )
        )
    return changes


def _commit_message(
    snapshot: ControlPlaneSnapshot,
    changes: Sequence[AssignmentChange],
    records: Sequence[AssignmentRecord],
    promoted: str | None,
) -> str:
    counts = {
        kind: sum(change.change == kind for change in changes)
        for kind in ("added", "updated", "removed")
    }
    summary = ", ".join(f"{count} {kind}" for kind, count in counts.items() if count)
    title = f"Schedule {snapshot.name}: {summary or 'no assignment changed'}"
    if promoted is not None:
        title += f"; promote {short_sha(promoted)}"
    lines = [
        title,
        "",
        f"Environment branch: {snapshot.branch}",
        f"Promoted from: {snapshot.base}",
    ]
    if changes:
        lines += ["", *(f"{c.change} {c.cluster_type}/{c.deployment_target}" for c in changes)]
    failed = [record for record in records if record.status == "failed"]
    if failed:
        lines += ["", "Failed, previous output kept:", *(f"  {record.folder}" for record in failed)]
    return "\n".join(lines) + "\n"


def _load_problems(environment: str, errors: Iterable[LoadError]) -> list[Problem]:
    return [
        Problem(
            environment=environment,
            kind="load",
            message=str(error),
            source=error.source,
            file=error.file,
            document=error.document,
            line=error.line,
            field=error.field,
        )
        for error in errors
    ]


def _render_problem(error: RenderError) -> Problem:
    return Problem(
        environment=error.environment,
        kind=error.kind,
        message=error.message,
        cluster_type=error.cluster_type,
        deployment_target=error.deployment_target,
        template=error.template,
        file=error.file,
        line=error.line,
    )


def _git_problem(environment: str, message: str) -> Problem:
    return Problem(environment=environment, kind="git", message=message)


# --- storing ----------------------------------------------------------------------------------


async def _record(
    session: AsyncSession,
    job: _Job,
    written: _Written,
    stored: StoredTarget | None,
    cluster_types: list[str],
) -> None:
    """Store a run for one environment, with the cluster types the control plane declares for
    it (where FLEETMARK_AGENT_PLACEMENT=first-report, a claim may name only those)."""
    outcome = written.outcome
    environment_id = await ensure_environment(session, outcome.environment)
    target_id = await repository.ensure_target(session, job.gitops_url, environment_id)
    values: dict[str, Any] = {
        "control_plane_url": normalise_repository_url(job.request.control_plane),
        "scheduled_at": job.now,
        "cluster_types": cluster_types,
    }
    # A state is written only when it changed: unchanged, it is most runs' and can be large.
    state_changed = written.state_json is not None and (
        stored is None or stored.render_state != written.state_json
    )
    if written.state is not None:
        values |= {"tree_sha": written.state_tree, "promoted_commit_sha": outcome.promoted_commit}
        if state_changed:
            values["render_state"] = written.state_json
    if outcome.commit is not None:
        values |= {"last_commit_sha": outcome.commit, "last_branch": outcome.branch}
    await repository.update_target(session, target_id, **values)
    if written.state is not None and (written.change_commit is not None or state_changed):
        await _record_assignments(session, target_id, job, written, written.state)
    await repository.replace_errors(
        session, target_id, [_error_row(problem) for problem in outcome.errors], job.now
    )


async def _record_assignments(
    session: AsyncSession, target_id: int, job: _Job, written: _Written, state: RenderState
) -> None:
    changed, kept = [], []
    for record in state.records():
        inputs = record.inputs
        row = {
            "target_id": target_id,
            "cluster_type_name": inputs.cluster_type,
            "deployment_target_name": inputs.deployment_target,
            "workload_name": inputs.workload,
            "namespace": record.namespace,
            "status": record.status,
            "policies": list(inputs.policies),
            "config_maps": list(inputs.config_maps),
            "files": list(record.files),
            "content_hash": record.content_hash,
            "config_hash": record.config_hash,
            "scheduled_at": job.now,
        }
        if record.key in written.changed and written.change_commit is not None:
            changed.append(
                row
                | {
                    "commit_sha": written.change_commit,
                    "branch": written.change_branch,
                    "changed_at": job.now,
                }
            )
        else:
            # First seen unchanged: its output is in the branch head, since some earlier time.
            has_output = written.head is not None and bool(record.files)
            kept.append(
                row
                | {
                    "commit_sha": written.head if has_output else None,
                    "branch": written.outcome.environment if has_output else None,
                    "changed_at": None,
                }
            )
    await repository.upsert_assignments(session, changed, changed=True)
    await repository.upsert_assignments(session, kept, changed=False)
    await repository.delete_unscheduled(
        session, target_id, [record.key for record in state.records()]
    )


def _error_row(problem: Problem) -> dict[str, Any]:
    fields = {
        "kind": problem.kind,
        "message": problem.message,
        "cluster_type_name": problem.cluster_type,
        "deployment_target_name": problem.deployment_target,
        "template": problem.template,
        "source": problem.source,
        "file": problem.file,
        "document": problem.document,
        "line": problem.line,
        "field": problem.field,
    }
    identity = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return fields | {"fingerprint": hashlib.sha256(identity.encode()).hexdigest()}


# --- queries ----------------------------------------------------------------------------------


async def list_assignments(
    session: AsyncSession,
    *,
    environment: str | None,
    cluster_type: str | None,
    workload: str | None,
    limit: int,
    offset: int,
) -> AssignmentPage:
    rows, total = await repository.list_assignments(
        session,
        AssignmentFilter(environment=environment, cluster_type=cluster_type, workload=workload),
        limit=limit,
        offset=offset,
    )
    items = [
        ScheduledAssignmentOut.model_validate(
            {
                "environment": environment_name,
                "cluster_type": row.cluster_type_name,
                "deployment_target": row.deployment_target_name,
                "workload": row.workload_name,
                "namespace": row.namespace,
                "status": row.status,
                "policies": row.policies,
                "config_maps": row.config_maps,
                "files": row.files,
                "content_hash": row.content_hash,
                "config_hash": row.config_hash,
                "gitops_url": gitops_url,
                "branch": row.branch,
                "commit_sha": row.commit_sha,
                "changed_at": row.changed_at,
                "scheduled_at": row.scheduled_at,
            }
        )
        for row, environment_name, gitops_url in rows
    ]
    return AssignmentPage(items=items, total=total, limit=limit, offset=offset)


async def list_errors(
    session: AsyncSession,
    *,
    environment: str | None,
    kind: str | None,
    cluster_type: str | None,
    deployment_target: str | None,
    limit: int,
    offset: int,
) -> SchedulingErrorPage:
    rows, total = await repository.list_errors(
        session,
        ErrorFilter(
            environment=environment,
            kind=kind,
            cluster_type=cluster_type,
            deployment_target=deployment_target,
        ),
        limit=limit,
        offset=offset,
    )
    items = [
        SchedulingErrorOut.model_validate(
            {
                "environment": environment_name,
                "kind": row.kind,
                "message": row.message,
                "cluster_type": row.cluster_type_name,
                "deployment_target": row.deployment_target_name,
                "template": row.template,
                "source": row.source,
                "file": row.file,
                "document": row.document,
                "line": row.line,
                "field": row.field,
                "gitops_url": gitops_url,
                "first_seen_at": row.first_seen_at,
                "last_seen_at": row.last_seen_at,
            }
        )
        for row, environment_name, gitops_url in rows
    ]
    return SchedulingErrorPage(items=items, total=total, limit=limit, offset=offset)


__all__ = [
    "Timer",
    "list_assignments",
    "list_errors",
    "schedule_environments",
]
