"""Flux objects, as the Kubernetes API returns them, mapped to report records.

Called by the agent's watch loop for every Kustomization, HelmRelease, GitRepository and
OCIRepository it sees. Pure: an object and the time in, a record out, never an exception.
The choices where the Flux API leaves room are in docs/agent.md ("What is reported").
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from agent.report import ObjectRecord, Source
from agent.sources._fields import (
    DEGRADED,
    HEALTHY,
    PROGRESSING,
    STATUS_MISSING,
    UNKNOWN,
    Node,
    State,
    quoted,
    record,
)

__all__ = [
    "git_repository",
    "helm_release",
    "kustomization",
    "link_sources",
    "oci_repository",
]

READY_CONDITION_MISSING = "ReadyConditionMissing"
_CONDITION_STATUS = {"True": True, "False": False, "Unknown": None}
# Helm release states after which the previous release is what still runs.
_UNFINISHED_RELEASE = {"failed", "pending-install", "pending-upgrade", "pending-rollback"}
_FINISHED_RELEASE = {"deployed", "superseded"}


@dataclass(frozen=True, slots=True)
class Condition:
    status: bool | None
    reason: str | None
    message: str | None
    since: datetime | None


def _conditions(root: Node, now: datetime) -> dict[str, Condition]:
    found: dict[str, Condition] = {}
    for item in root.items("status", "conditions"):
        kind = item.text("type", required=True)
        raw = item.text("status", required=True)
        if kind is None or raw is None:
            continue
        if raw not in _CONDITION_STATUS:
            item.problems.note(
                f"{item.path}.status", f"expected True, False or Unknown, got {quoted(raw)}"
            )
            continue
        found.setdefault(
            kind,
            Condition(
                status=_CONDITION_STATUS[raw],
                reason=item.text("reason"),
                message=item.text("message"),
                since=item.time("lastTransitionTime", now=now),
            ),
        )
    return found


def _state(root: Node, conditions: Mapping[str, Condition]) -> State:
    """Readiness from the kstatus conditions every Flux object carries."""
    if not root.at("status").present:
        return State(ready=None, reason=STATUS_MISSING, message="no status written yet")
    ready = conditions.get("Ready")
    if ready is None:
        return State(
            ready=None,
            reason=READY_CONDITION_MISSING,
            message="status.conditions has no Ready condition",
            health=_health(conditions),
        )
    return State(
        ready=ready.status,
        reason=ready.reason,
        message=ready.message,
        health=_health(conditions),
        since=ready.since,
    )


def _health(conditions: Mapping[str, Condition]) -> str:
    def holds(kind: str, status: bool | None) -> bool:
        condition = conditions.get(kind)
        return condition is not None and condition.status is status

    # Kustomization's Healthy (its health checks) and HelmRelease's Released, Remediated and
    # TestSuccess say the same as a False Ready; they keep an object Degraded while a retry
    # has already turned Ready to Unknown.
    if (
        holds("Stalled", True)
        or holds("Ready", False)
        or holds("Healthy", False)
        or holds("Released", False)
        or holds("Remediated", True)
        or holds("TestSuccess", False)
    ):
        return DEGRADED
    if holds("Reconciling", True) or holds("Ready", None):
        return PROGRESSING
    if holds("Ready", True):
        return HEALTHY
    return UNKNOWN


def _object_ref(root: Node, ref: Node) -> str | None:
    """`<Kind>/<namespace>/<name>` of a referenced Flux object (namespace defaults to ours)."""
    if not ref.present:
        return None
    kind = ref.text("kind", required=True)
    name = ref.text("name", required=True)
    namespace = ref.text("namespace") or root.text("metadata", "namespace") or ""
    if kind is None or name is None:
        return None
    return f"{kind}/{namespace}/{name}"


def kustomization(obj: Mapping[str, object], now: datetime) -> ObjectRecord:
    root = Node.root(obj)
    source = Source(
        ref=_object_ref(root, root.at("spec", "sourceRef")),
        path=root.text("spec", "path"),
    )
    return record(
        root,
        reconciler="flux",
        kind="Kustomization",
        state=_state(root, _conditions(root, now)),
        source=source,
        applied=root.text("status", "lastAppliedRevision"),
        attempted=root.text("status", "lastAttemptedRevision"),
        suspended=bool(root.flag("spec", "suspend")),
    )


def _running_release(root: Node) -> Node | None:
    """The history entry of the Helm release that runs now (history is newest first)."""
    history = root.items("status", "history")
    for position, entry in enumerate(history):
        status = entry.text("status", required=True)
        if position == 0:
            if status == "deployed":
                return entry
            if status not in _UNFINISHED_RELEASE:
                return None
        elif status in _FINISHED_RELEASE:
            return entry
    return None


def _summarised(root: Node, conditions: dict[str, Condition]) -> dict[str, Condition]:
    """A HelmRelease's conditions as helm-controller summarises them into Ready: a test
    result only when tests run and their failures are not ignored."""
    # The remediations' ignoreTestFailures only decide whether a failed test is remediated,
    # not Ready, so they are not read.
    test = root.at("spec", "test")
    if test.flag("enable") and not test.flag("ignoreFailures"):
        return conditions
    return {kind: found for kind, found in conditions.items() if kind != "TestSuccess"}


def helm_release(obj: Mapping[str, object], now: datetime) -> ObjectRecord:
    root = Node.root(obj)
    conditions = _summarised(root, _conditions(root, now))
    state = _state(root, conditions)
    if root.at("status", "history").present:
        release = _running_release(root)
        applied = release.text("chartVersion", required=True) if release else None
        app_version = release.text("appVersion") if release else None
    else:
        applied = root.text("status", "lastAppliedRevision")
        app_version = None
    if app_version:
        suffix = f"(app version {app_version})"
        message = f"{state.message} {suffix}" if state.message else suffix
        state = State(state.ready, state.reason, message, state.health, state.since)

    chart_ref = root.at("spec", "chartRef")
    if chart_ref.present:
        source = Source(ref=_object_ref(root, chart_ref))
    else:
        source = Source(
            ref=_object_ref(root, root.at("spec", "chart", "spec", "sourceRef")),
            path=root.text("spec", "chart", "spec", "chart"),
        )
    drifted = conditions.get("Drifted")
    return record(
        root,
        reconciler="flux",
        kind="HelmRelease",
        state=state,
        source=source,
        applied=applied,
        attempted=root.text("status", "lastAttemptedRevision"),
        drifted=bool(drifted and drifted.status),
        suspended=bool(root.flag("spec", "suspend")),
    )


def _git_ref(root: Node) -> str | None:
    ref = root.at("spec", "ref")
    if commit := ref.text("commit"):
        return commit
    if name := ref.text("name"):
        return name
    if semver := ref.text("semver"):
        return f"semver:{semver}"
    if tag := ref.text("tag"):
        return f"refs/tags/{tag}"
    return ref.text("branch")


def _oci_ref(root: Node) -> str | None:
    ref = root.at("spec", "ref")
    if digest := ref.text("digest"):
        return digest
    if semver := ref.text("semver"):
        return f"semver:{semver}"
    return ref.text("tag")


def _source_object(root: Node, now: datetime, kind: str, ref: str | None) -> ObjectRecord:
    return record(
        root,
        reconciler="flux",
        kind=kind,
        state=_state(root, _conditions(root, now)),
        source=Source(url=root.text("spec", "url"), ref=ref),
        attempted=root.text("status", "artifact", "revision"),
        suspended=bool(root.flag("spec", "suspend")),
    )


def git_repository(obj: Mapping[str, object], now: datetime) -> ObjectRecord:
    root = Node.root(obj)
    return _source_object(root, now, "GitRepository", _git_ref(root))


def oci_repository(obj: Mapping[str, object], now: datetime) -> ObjectRecord:
    root = Node.root(obj)
    return _source_object(root, now, "OCIRepository", _oci_ref(root))


_SOURCE_KINDS = ("GitRepository", "OCIRepository")


def link_sources(records: Iterable[ObjectRecord]) -> list[ObjectRecord]:
    """Give Flux Kustomizations and HelmReleases the URL and ref of the source object they
    follow.

    A record whose `source.ref` names a GitRepository or OCIRepository present in `records`
    gets that repository's URL as `source.url` and its ref as `source.url_ref`; every other
    record is returned unchanged, in order.
    """
    records = list(records)
    origins: dict[str, Source] = {}
    for item in records:
        source = item.source
        if item.reconciler == "flux" and item.kind in _SOURCE_KINDS and source and source.url:
            origins[f"{item.kind}/{item.namespace}/{item.name}"] = source
    linked: list[ObjectRecord] = []
    for item in records:
        source = item.source
        if item.reconciler == "flux" and source and source.ref in origins and not source.url:
            assert source.ref is not None
            origin = origins[source.ref]
            source = source.model_copy(update={"url": origin.url, "url_ref": origin.ref})
            item = item.model_copy(update={"source": source})
        linked.append(item)
    return linked
