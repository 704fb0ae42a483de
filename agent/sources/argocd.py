"""Argo CD Applications, as the Kubernetes API returns them, mapped to report records.

Called by the agent's watch loop for every Application it sees. Pure: an object and the time
in, a record out, never an exception. How applied, attempted, drift and Ready are read is in
docs/agent.md ("What is reported").
"""

from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import zip_longest

from agent.report import ObjectRecord, Source
from agent.revisions import same_revision
from agent.sources._fields import DEGRADED, STATUS_MISSING, UNKNOWN, Node, State, record

__all__ = ["application"]

SKIP_RECONCILE = "argocd.argoproj.io/skip-reconcile"
_UNFINISHED_OPERATION = {"Running", "Terminating"}
_FAILED_OPERATION = {"Failed": "SyncFailed", "Error": "SyncError"}

Revisions = tuple[str | None, ...]


def _sources(spec: Node) -> tuple[list[Node], bool]:
    multi = spec.items("sources")
    if multi:
        return multi, True
    single = spec.at("source")
    return ([single] if single.present else []), False


def _primary(sources: Sequence[Node]) -> int:
    for index, source in enumerate(sources):
        if source.text("path") or source.text("chart"):
            return index
    return 0


def _revisions(node: Node, multi: bool) -> Revisions | None:
    """The revision of every source recorded at `node` (a syncResult, history entry, sync)."""
    if not node.present:
        return None
    listed = tuple(node.texts("revisions"))
    single = node.text("revision")
    # Argo CD writes `revisions` for several sources and `revision` for one; a status written
    # before the Application changed between the two may hold the other form.
    if multi and any(listed):
        return listed
    if single:
        return (single,)
    return listed if any(listed) else None


def _pick(revisions: Revisions | None, index: int) -> str | None:
    if revisions is None or index >= len(revisions):
        return None
    return revisions[index]


def _same(applied: Revisions | None, compared: Revisions | None) -> bool:
    if not applied or not compared or len(applied) != len(compared):
        return False
    return all(same_revision(a, c) for a, c in zip(applied, compared, strict=True))


def _pending(
    applied: Revisions | None, compared: Revisions | None, sources: Sequence[Node], multi: bool
) -> str:
    parts: list[str] = []
    pairs = zip_longest(applied or (), compared or ())
    for index, (done, wanted) in enumerate(pairs):
        if wanted is None or same_revision(done, wanted):
            continue
        where = ""
        if multi:
            url = sources[index].text("repoURL") if index < len(sources) else None
            where = f"source {index + 1}" + (f" ({url})" if url else "") + ": "
        applied_text = f"applied: {done}" if done else "nothing applied yet"
        parts.append(f"{where}revision {wanted} is not applied yet ({applied_text})")
    return "; ".join(parts) or "the live state differs from the desired state"


def _joined(revisions: Revisions | None) -> str:
    return ", ".join(revision or "?" for revision in revisions or ())


def _latest(*times: datetime | None) -> datetime | None:
    known = [time for time in times if time is not None]
    return max(known) if known else None


def application(obj: Mapping[str, object], now: datetime) -> ObjectRecord:
    root = Node.root(obj)
    spec = root.at("spec")
    status = root.at("status")
    sources, multi = _sources(spec)
    primary = _primary(sources)

    operation = status.at("operationState")
    phase = operation.text("phase")
    dry_run = bool(operation.flag("operation", "sync", "dryRun"))
    history = status.items("history")
    newest = history[-1] if history else None

    applied: Revisions | None = None
    if phase == "Succeeded" and not dry_run:
        applied = _revisions(operation.at("syncResult"), multi)
    if applied is None and newest is not None:
        applied = _revisions(newest, multi)

    compared = _revisions(status.at("sync"), multi)
    attempted = compared
    if phase in _UNFINISHED_OPERATION or phase in _FAILED_OPERATION:
        attempted = (
            _revisions(operation.at("syncResult"), multi)
            or _revisions(operation.at("operation", "sync"), multi)
            or compared
        )

    sync_status = status.text("sync", "status")
    health = status.text("health", "status")
    out_of_sync = sync_status == "OutOfSync"
    # Without a compared revision nothing says a newer one is pending: the live state differs.
    drifted = out_of_sync and (compared is None or _same(applied, compared))

    errors = [
        condition
        for condition in status.items("conditions")
        if (condition.text("type", required=True) or "").endswith("Error")
    ]
    since = _latest(
        status.time("health", "lastTransitionTime", now=now),
        operation.time("finishedAt", now=now) or operation.time("startedAt", now=now),
        newest.time("deployedAt", now=now) if newest else None,
        *(condition.time("lastTransitionTime", now=now) for condition in errors),
    )
    operation_message = operation.text("message")

    def state(ready: bool | None, reason: str | None, message: str | None = None) -> State:
        return State(ready, reason, message, health or UNKNOWN, since)

    if not status.present:
        current = State(None, STATUS_MISSING, "no status written yet")
    elif errors:
        first = errors[0]
        current = state(False, first.text("type"), first.text("message"))
    elif phase in _FAILED_OPERATION:
        current = state(False, _FAILED_OPERATION[phase], operation_message)
    elif health == DEGRADED:
        current = state(False, DEGRADED, status.text("health", "message"))
    elif phase in _UNFINISHED_OPERATION:
        current = state(None, "Syncing", operation_message)
    elif drifted and compared is None:
        message = (
            "the live state differs from the desired state; the revision Argo CD compared "
            "against is unknown (status.sync has none)"
        )
        current = state(None, "ComparedRevisionUnknown", message)
    elif drifted:
        message = f"the live state differs from the applied revision {_joined(applied)}"
        current = state(None, "Drifted", message)
    elif out_of_sync:
        current = state(None, "OutOfSync", _pending(applied, compared, sources, multi))
    elif sync_status == "Synced" and health == "Healthy":
        current = state(True, "Synced", operation_message)
    elif sync_status == "Synced":
        current = state(None, health or UNKNOWN, status.text("health", "message"))
    else:
        current = state(None, f"Sync{sync_status or UNKNOWN}")

    source = None
    if primary < len(sources):
        chosen = sources[primary]
        source = Source(
            url=chosen.text("repoURL"),
            ref=chosen.text("targetRevision"),
            path=chosen.text("path") or chosen.text("chart"),
        )
    skip = root.text("metadata", "annotations", SKIP_RECONCILE)
    return record(
        root,
        reconciler="argocd",
        kind="Application",
        state=current,
        source=source,
        applied=_pick(applied, primary),
        attempted=_pick(attempted, primary),
        drifted=drifted,
        suspended=skip == "true",
    )
