"""Typed, forgiving reads from raw objects, and the record every mapper finishes with.

Objects reach the mappers in shapes the agent does not control, so every read returns a typed
value or None and notes what was wrong instead of raising: a mapper always produces a record
and can say why it could not trust the object.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from agent.report import MAX_NAME_CHARS, ObjectRecord, Reconciler, Source, fit_text

# Health words shared by every source (Argo CD's vocabulary, which dashboards already know).
HEALTHY = "Healthy"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
UNKNOWN = "Unknown"

# Reasons the agent itself gives when it cannot read a state.
UNEXPECTED_SHAPE = "UnexpectedShape"
STATUS_MISSING = "StatusMissing"

UNNAMED = "(unnamed)"


def describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, Sequence):
        return "a list"
    return f"a {type(value).__name__}"


def quoted(value: str, limit: int = 60) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "…")


@dataclass
class Problems:
    """What was wrong with an object, by the path of the field, first finding kept."""

    found: dict[str, str] = field(default_factory=dict)

    def note(self, path: str, what: str) -> None:
        self.found.setdefault(path or "(object)", what)

    def __bool__(self) -> bool:
        return bool(self.found)

    def summary(self) -> str:
        return "; ".join(f"{path}: {what}" for path, what in self.found.items())


@dataclass(frozen=True, slots=True)
class Node:
    """A value inside a raw object, with its path for messages and the object's problem list."""

    value: object
    path: str
    problems: Problems

    @classmethod
    def root(cls, value: object) -> "Node":
        return cls(value, "", Problems())

    def _child(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def at(self, *keys: str) -> "Node":
        node = self
        for key in keys:
            if node.value is None:
                node = Node(None, node._child(key), self.problems)
            elif isinstance(node.value, Mapping):
                node = Node(node.value.get(key), node._child(key), self.problems)
            else:
                self.problems.note(node.path, f"expected an object, got {describe(node.value)}")
                node = Node(None, node._child(key), self.problems)
        return node

    @property
    def present(self) -> bool:
        return self.value is not None

    def text(self, *keys: str, required: bool = False) -> str | None:
        """A non-empty string, or None (noted when required or of another type)."""
        node = self.at(*keys)
        value = node.value
        if isinstance(value, str) and value.strip():
            return value
        if value is not None and not isinstance(value, str):
            self.problems.note(node.path, f"expected a string, got {describe(value)}")
        elif required:
            self.problems.note(node.path, "missing")
        return None

    def flag(self, *keys: str) -> bool | None:
        node = self.at(*keys)
        if node.value is None or isinstance(node.value, bool):
            return node.value
        self.problems.note(node.path, f"expected true or false, got {describe(node.value)}")
        return None

    def items(self, *keys: str) -> list["Node"]:
        node = self.at(*keys)
        value = node.value
        if value is None:
            return []
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            return [Node(item, f"{node.path}[{i}]", self.problems) for i, item in enumerate(value)]
        self.problems.note(node.path, f"expected a list, got {describe(value)}")
        return []

    def texts(self, *keys: str) -> list[str | None]:
        return [item.text() for item in self.items(*keys)]

    def time(self, *keys: str, now: datetime) -> datetime | None:
        """An RFC 3339 time with its offset, in UTC; a time ahead of `now` (clock skew) is `now`."""
        node = self.at(*keys)
        value = node.value
        if value is None:
            return None
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value.strip())
            except ValueError:
                self.problems.note(node.path, f"not an RFC 3339 time: {quoted(value)}")
                return None
        elif isinstance(value, datetime):  # YAML state files yield datetimes themselves
            parsed = value
        else:
            self.problems.note(node.path, f"expected a time, got {describe(value)}")
            return None
        if parsed.utcoffset() is None:
            self.problems.note(node.path, f"time without a UTC offset: {quoted(str(value))}")
            return None
        try:
            parsed = parsed.astimezone(UTC)
        except OverflowError:
            self.problems.note(node.path, f"time out of range: {quoted(str(value))}")
            return None
        return min(parsed, aware(now))


def aware(now: datetime) -> datetime:
    # A naive clock is the caller's mistake, but it must not take the watch loop down with a
    # comparison error; it is read as UTC, as every clock the agent is given should be.
    return now if now.utcoffset() is not None else now.replace(tzinfo=UTC)


def fitted(value: str | None, limit: int) -> str | None:
    """`value` made storable and cut to `limit`, or None when nothing printable is left."""
    if value is None:
        return None
    return fit_text(value, limit).strip() or None


def identity(root: Node) -> tuple[str, str]:
    """(namespace, name) from `metadata`; a nameless object is still reported, as `(unnamed)`."""
    namespace = root.text("metadata", "namespace") or ""
    name = fitted(root.text("metadata", "name", required=True), MAX_NAME_CHARS)
    return namespace, name or UNNAMED


@dataclass(frozen=True, slots=True)
class State:
    """What a mapper concluded about an object's readiness, before shape problems are applied."""

    ready: bool | None
    reason: str | None
    message: str | None = None
    health: str | None = UNKNOWN
    since: datetime | None = None


def record(
    root: Node,
    *,
    reconciler: Reconciler,
    kind: str,
    state: State,
    source: Source | None = None,
    applied: str | None = None,
    attempted: str | None = None,
    drifted: bool = False,
    suspended: bool = False,
    name: tuple[str, str] | None = None,
) -> ObjectRecord:
    """The record for `root`; any problem noted while reading it makes its state Unknown.

    `name` is (namespace, name); by default it is read from the object's `metadata`.
    """
    namespace, object_name = name or identity(root)
    if source is not None and not (source.url or source.ref or source.path):
        source = None
    if root.problems:
        state = State(
            ready=None,
            reason=UNEXPECTED_SHAPE,
            message=root.problems.summary(),
            health=UNKNOWN,
            since=state.since,
        )
    return ObjectRecord(
        reconciler=reconciler,
        kind=kind,
        namespace=namespace,
        name=object_name,
        source=source,
        applied_revision=applied,
        attempted_revision=attempted,
        ready=state.ready,
        reason=state.reason,
        message=state.message,
        health=state.health,
        drifted=drifted,
        suspended=suspended,
        last_transition_at=state.since,
    )
