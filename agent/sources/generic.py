"""A state file as the source of records, for hosts without Kubernetes.

Whatever deploys on a VM or bare host writes what it applied to a state file; the agent reads
it each cycle and reports its entries as `generic` records. docs/agent.md ("State files")
gives the format and what becomes of a file or entry that is not right.
"""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from agent.report import MAX_KIND_CHARS, MAX_NAME_CHARS, ObjectRecord, Source
from agent.sources._fields import (
    DEGRADED,
    HEALTHY,
    UNKNOWN,
    Node,
    State,
    aware,
    describe,
    fitted,
    record,
)

__all__ = ["MAX_STATE_FILE_BYTES", "StateFile", "StateFileError", "parse_state", "read_state_file"]

MAX_STATE_FILE_BYTES = 8 * 1024 * 1024
STATE_FILE_STALE = "StateFileStale"

_TOP_FIELDS = {"written_at", "objects"}
_ENTRY_FIELDS = {
    "kind",
    "name",
    "namespace",
    "source",
    "applied_revision",
    "attempted_revision",
    "ready",
    "reason",
    "message",
    "health",
    "drifted",
    "suspended",
    "last_transition_at",
}
_SOURCE_FIELDS = {"url", "ref", "path"}
_TEXT_FIELDS = {
    "kind",
    "name",
    "namespace",
    "applied_revision",
    "attempted_revision",
    "reason",
    "message",
    "health",
}


class StateFileError(Exception):
    """The state file as a whole cannot be used; the message names the file and the cause."""


@dataclass(frozen=True, slots=True)
class StateFile:
    records: tuple[ObjectRecord, ...]
    errors: tuple[str, ...]


def read_state_file(path: Path, now: datetime, *, max_age: timedelta | None = None) -> StateFile:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_STATE_FILE_BYTES + 1)
    except OSError as exc:
        raise StateFileError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    if len(data) > MAX_STATE_FILE_BYTES:
        raise StateFileError(f"{path}: larger than {MAX_STATE_FILE_BYTES} bytes")
    return parse_state(data, origin=str(path), now=now, max_age=max_age)


def parse_state(
    data: bytes, *, origin: str, now: datetime, max_age: timedelta | None = None
) -> StateFile:
    """Records from the bytes of a state file; `origin` names it in errors and picks the format."""
    document = _load(data, origin)
    if not isinstance(document, dict):
        raise StateFileError(
            f"{origin}: expected a mapping with an `objects` list, got {describe(document)}"
        )
    unknown = sorted(str(key) for key in document if key not in _TOP_FIELDS)
    if unknown:
        raise StateFileError(f"{origin}: unknown top-level field(s): {', '.join(unknown)}")
    top = Node.root(document)
    if not top.at("objects").present:
        raise StateFileError(f"{origin}: has no `objects` list")
    entries = top.items("objects")
    written_at = top.time("written_at", now=now)
    if top.problems:
        raise StateFileError(f"{origin}: {top.problems.summary()}")

    stale: State | None = None
    if max_age is not None and written_at is not None and aware(now) - written_at > max_age:
        stale = State(
            ready=None,
            reason=STATE_FILE_STALE,
            message=(
                f"{origin} was last written at {written_at.isoformat()}, more than {max_age} "
                "ago; the states it holds may no longer be true"
            ),
        )

    records: list[ObjectRecord] = []
    errors: list[str] = []
    first_seen: dict[tuple[str, str, str], int] = {}
    for index, entry in enumerate(entries):
        where = f"{origin}: objects[{index}]"
        outcome = _entry(entry.value, now, stale)
        if isinstance(outcome, str):
            errors.append(f"{where}: {outcome}")
            continue
        key = (outcome.kind, outcome.namespace, outcome.name)
        if key in first_seen:
            errors.append(
                f"{where}: repeats {outcome.kind} {outcome.namespace}/{outcome.name} of "
                f"objects[{first_seen[key]}]; only the first is reported"
            )
            continue
        first_seen[key] = index
        records.append(outcome)
    return StateFile(records=tuple(records), errors=tuple(errors))


def _load(data: bytes, origin: str) -> object:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StateFileError(f"{origin}: not UTF-8 text (byte {exc.start})") from exc
    try:
        if origin.lower().endswith(".json"):
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise StateFileError(f"{origin}: not valid JSON: {exc}") from exc
    except yaml.YAMLError as exc:
        raise StateFileError(f"{origin}: not valid YAML: {exc}") from exc
    except RecursionError as exc:
        raise StateFileError(f"{origin}: nested too deeply") from exc


def _entry(value: object, now: datetime, stale: State | None) -> ObjectRecord | str:
    """The record for one entry, or why the entry cannot be one."""
    entry = Node.root(value)
    if not isinstance(value, dict):
        return f"expected a mapping, got {describe(value)}"
    for key in value:
        if key not in _ENTRY_FIELDS:
            entry.problems.note(str(key), "not a field of a state file entry")
        elif key in _TEXT_FIELDS and describe(value[key]) == "a number":
            # YAML turns unquoted versions into numbers (1.10 -> 1.1): say so, not just "wrong".
            entry.problems.note(
                str(key), f"expected a string, got the number {value[key]!r}; quote it"
            )
    kind = fitted(entry.text("kind", required=True), MAX_KIND_CHARS)
    name = fitted(entry.text("name", required=True), MAX_NAME_CHARS)
    if kind is None or name is None:
        # Notes only where nothing more precise was found (a value that is all NULs).
        for field, got in (("kind", kind), ("name", name)):
            if got is None:
                entry.problems.note(field, "empty")
        return f"cannot be reported without a kind and a name: {entry.problems.summary()}"
    namespace = entry.text("namespace") or ""

    source_node = entry.at("source")
    source = None
    if source_node.present:
        if isinstance(source_node.value, dict):
            for key in source_node.value:
                if key not in _SOURCE_FIELDS:
                    entry.problems.note(f"source.{key}", "not a field of a source")
        source = Source(
            url=source_node.text("url"),
            ref=source_node.text("ref"),
            path=source_node.text("path"),
        )

    ready = entry.flag("ready")
    health = entry.text("health") or {True: HEALTHY, False: DEGRADED, None: UNKNOWN}[ready]
    state = State(
        ready=ready,
        reason=entry.text("reason"),
        message=entry.text("message"),
        health=health,
        since=entry.time("last_transition_at", now=now),
    )
    if stale is not None:
        state = State(stale.ready, stale.reason, stale.message, UNKNOWN, state.since)
    return record(
        entry,
        reconciler="generic",
        kind=kind,
        name=(namespace, name),
        state=state,
        source=source,
        applied=entry.text("applied_revision"),
        attempted=entry.text("attempted_revision"),
        drifted=bool(entry.flag("drifted")),
        suspended=bool(entry.flag("suspended")),
    )
