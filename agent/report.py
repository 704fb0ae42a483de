"""Report contract v1 as the agent sends it to the hub (`POST /api/v1/reports`).

The reporter wraps the mappers' `ObjectRecord`s in a `Report` and sends `Report.to_json()`.
Identity fields that break the contract are refused; record text is made to fit instead
(docs/contributing.md, "Inside the agent").
"""

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

__all__ = [
    "DEFAULT_MAX_REPORT_BYTES",
    "MAX_HEALTH_CHARS",
    "MAX_KIND_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_NAME_CHARS",
    "MAX_OBJECTS",
    "MAX_SKIPPED_KINDS",
    "MAX_TEXT_CHARS",
    "REPORT_SCHEMA",
    "AgentIdentity",
    "ClusterIdentity",
    "ObjectRecord",
    "Reconciler",
    "Report",
    "SkippedKind",
    "SnapshotPart",
    "Source",
    "fit_text",
    "split",
]

REPORT_SCHEMA: Literal["fleetmark.report/v1"] = "fleetmark.report/v1"
# The hub's limits: records are cut to them here rather than refused there.
MAX_OBJECTS = 20_000
MAX_SKIPPED_KINDS = 256
MAX_MESSAGE_CHARS = 16_384
MAX_TEXT_CHARS = 1_024
MAX_NAME_CHARS = 253
MAX_KIND_CHARS = 63
MAX_HEALTH_CHARS = 32
MAX_SNAPSHOT_PARTS = 10_000
# The hub's default body limit, assumed until the hub states its own.
DEFAULT_MAX_REPORT_BYTES = 4 * 1024 * 1024
TRUNCATION_MARK = "… [truncated by the agent]"

Reconciler = Literal["flux", "argocd", "generic"]


def fit_text(value: str, limit: int) -> str:
    """`value` without NUL characters, as valid UTF-8, and at most `limit` characters long."""
    value = value.replace("\x00", "")
    if not value.isascii():
        # PostgreSQL text cannot hold an unpaired surrogate; a Kubernetes client can hand one over.
        value = value.encode("utf-8", "replace").decode("utf-8")
    if len(value) <= limit:
        return value
    mark = TRUNCATION_MARK if limit > 4 * len(TRUNCATION_MARK) else "…"
    return value[: limit - len(mark)] + mark


def _fitted(limit: int) -> AfterValidator:
    return AfterValidator(lambda value: fit_text(value, limit))


def _non_empty(what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not value:
            raise ValueError(f"{what} must not be empty")
        return value

    return check


def _storable(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError("must be valid Unicode (unpaired surrogate)") from exc
    return value


Text = Annotated[str, _fitted(MAX_TEXT_CHARS)]
Message = Annotated[str, _fitted(MAX_MESSAGE_CHARS)]
ObjectName = Annotated[str, _fitted(MAX_NAME_CHARS), AfterValidator(_non_empty("name"))]
ObjectKind = Annotated[str, _fitted(MAX_KIND_CHARS), AfterValidator(_non_empty("kind"))]
Namespace = Annotated[str, _fitted(MAX_NAME_CHARS)]
Health = Annotated[str, _fitted(MAX_HEALTH_CHARS)]

IdentityName = Annotated[
    str, StringConstraints(min_length=1, max_length=253), AfterValidator(_storable)
]
# Environment and cluster type names are varchar(63) in the hub, as registration allows.
DimensionName = Annotated[
    str, StringConstraints(min_length=1, max_length=63), AfterValidator(_storable)
]
AgentField = Annotated[
    str, StringConstraints(min_length=1, max_length=64), AfterValidator(_storable)
]
LabelKey = Annotated[
    str, StringConstraints(min_length=1, max_length=317), AfterValidator(_storable)
]
LabelValue = Annotated[str, StringConstraints(max_length=1024), AfterValidator(_storable)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterIdentity(_Model):
    name: IdentityName
    environment: DimensionName | None = None
    cluster_type: DimensionName | None = None
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=256)


class AgentIdentity(_Model):
    version: AgentField
    boot_id: AgentField
    instance: IdentityName


class Source(_Model):
    """Where a reconciler takes its desired state from; each mapper documents its forms.

    `url_ref` is given when `ref` names another object that holds the URL (a Flux source
    object): that object's ref of `url`, the branch or tag whose revisions this one applies.
    """

    url: Text | None = None
    ref: Text | None = None
    path: Text | None = None
    url_ref: Text | None = None


class ObjectRecord(_Model):
    """The observed state of one reconciler object.

    `ready` is True or False when the reconciler said so and None when its state is unknown
    or not settled; `reason` then says why. `applied_revision` is what runs, and
    `attempted_revision` what the reconciler last tried (or fetched) — they differ while a
    new revision is pending or failing.
    """

    reconciler: Reconciler
    kind: ObjectKind
    namespace: Namespace = ""
    name: ObjectName
    source: Source | None = None
    applied_revision: Text | None = None
    attempted_revision: Text | None = None
    ready: bool | None = None
    reason: Text | None = None
    message: Message | None = None
    health: Health | None = None
    drifted: bool = False
    suspended: bool = False
    last_transition_at: AwareDatetime | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.reconciler, self.kind, self.namespace, self.name)


class SkippedKind(_Model):
    """A kind the agent was set to watch and could not: the report holds none of its objects."""

    kind: ObjectKind
    api_group: Text
    reason: Text


class SnapshotPart(_Model):
    """Where a report stands in a full snapshot too large for one report: the snapshot's id
    (the same in each of its parts), this part's index from 0, and the number of parts."""

    id: AgentField
    index: int = Field(ge=0, lt=MAX_SNAPSHOT_PARTS)
    count: int = Field(ge=1, le=MAX_SNAPSHOT_PARTS)

    @model_validator(mode="after")
    def _within_count(self) -> "SnapshotPart":
        if self.index >= self.count:
            raise ValueError(f"index {self.index} is not below count {self.count}")
        return self


class Report(_Model):
    report_schema: Literal["fleetmark.report/v1"] = Field(default=REPORT_SCHEMA, alias="schema")
    cluster: ClusterIdentity
    agent: AgentIdentity
    sequence: int = Field(ge=1, le=2**62, description="Starts at 1 for every agent boot id.")
    observed_at: AwareDatetime
    full_snapshot: bool = False
    objects: tuple[ObjectRecord, ...] = Field(default=(), max_length=MAX_OBJECTS)
    skipped_kinds: tuple[SkippedKind, ...] = Field(default=(), max_length=MAX_SKIPPED_KINDS)
    # A part of a full snapshot sent in several reports; `full_snapshot` is then false.
    snapshot_part: SnapshotPart | None = None

    @model_validator(mode="after")
    def _unique_objects(self) -> "Report":
        # The hub refuses a whole report that names one object twice; fail here, where the
        # caller can still fix it, rather than in a spooled report the hub will never take.
        seen: set[tuple[str, str, str, str]] = set()
        for index, record in enumerate(self.objects):
            if record.key in seen:
                reconciler, kind, namespace, name = record.key
                raise ValueError(
                    f"objects.{index}: {reconciler} {kind} {namespace}/{name} "
                    "appears more than once in this report"
                )
            seen.add(record.key)
        return self

    @model_validator(mode="after")
    def _part_is_no_whole_snapshot(self) -> "Report":
        if self.snapshot_part is not None and self.full_snapshot:
            raise ValueError("a part of a snapshot (snapshot_part) is not a full snapshot")
        return self

    def to_json(self) -> bytes:
        """The request body: UTF-8 JSON with the contract's field names (`schema`, not ours).

        Only a part of a snapshot names `snapshot_part`: any other body is as it always was.
        """
        omitted = None if self.snapshot_part is not None else {"snapshot_part"}
        return self.model_dump_json(by_alias=True, exclude=omitted).encode()


# The largest sequence a report may carry, for the size of a body whose number is not set yet.
_MAX_SEQUENCE = 2**62


def split(report: Report, max_bytes: int, snapshot_id: str) -> list[Report]:
    """`report` as reports whose bodies are at most `max_bytes` each (one record per report
    at the least, whatever its size), or `[report]` when it fits.

    A full snapshot becomes the parts of snapshot `snapshot_id`, each `full_snapshot` false
    with its `snapshot_part`; any other report (a change report, a part) becomes change
    reports. Each keeps the sequence of `report`: the caller numbers them, and bodies are
    measured with the longest sequence.
    """
    sizes = [len(record.model_dump_json()) + 1 for record in report.objects]  # a comma each
    widest = SnapshotPart(id=snapshot_id, index=MAX_SNAPSHOT_PARTS - 1, count=MAX_SNAPSHOT_PARTS)
    empty = report.model_copy(
        update={"objects": (), "sequence": _MAX_SEQUENCE, "full_snapshot": False}
    )
    if report.full_snapshot:
        empty = empty.model_copy(update={"snapshot_part": widest})
    envelope = len(empty.to_json())
    if envelope + sum(sizes) <= max_bytes:
        return [report]
    chunks: list[tuple[ObjectRecord, ...]] = []
    start, size = 0, envelope
    for index, record_size in enumerate(sizes):
        if index > start and (size + record_size > max_bytes or index - start >= MAX_OBJECTS):
            chunks.append(report.objects[start:index])
            start, size = index, envelope
        size += record_size
    chunks.append(report.objects[start:])
    parts = []
    for index, chunk in enumerate(chunks):
        update: dict[str, object] = {"objects": chunk, "full_snapshot": False}
        if report.full_snapshot:
            update["snapshot_part"] = SnapshotPart(id=snapshot_id, index=index, count=len(chunks))
        else:
            update["snapshot_part"] = None
        parts.append(report.model_copy(update=update))
    return parts
