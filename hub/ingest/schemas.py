"""Wire format of report contract v1 as the hub accepts it (the agent has its own models)."""

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from hub.client.params import WithinReach, within_reach

REPORT_SCHEMA = "fleetmark.report/v1"
MAX_MESSAGE_CHARS = 16_384
MAX_OBJECTS = 20_000
MAX_SNAPSHOT_PARTS = 10_000
# Every reply to a report, 413 included, says the largest body the hub takes, so that an
# agent splits its full snapshots below it.
MAX_REPORT_BYTES_HEADER = "X-Fleetmark-Max-Report-Bytes"
TRUNCATION_MARK = "… [truncated by fleetmark]"
# Validation context key: True when the raw body may carry a NUL character (see Report).
MAY_HOLD_NUL = "may_hold_nul"
# Validation context key: the latest time a report may carry, the hub's clock plus the allowed
# skew (see ReportedTime); without it, times are not checked.
NOT_AFTER = "not_after"


def _nul_paths(value: object, path: str = "") -> Iterator[str]:
    """The dotted paths of the strings in `value` (a validated model) that hold a NUL."""
    if isinstance(value, str):
        if "\x00" in value:
            yield path or "(body)"
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            field = type(value).model_fields[name]
            yield from _nul_paths(getattr(value, name), _join(path, field.alias or name))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _nul_paths(item, _join(path, str(index)))
    elif isinstance(value, dict):
        for key, item in value.items():
            shown = repr(key) if "\x00" in key else key
            yield from _nul_paths(key, _join(path, f"{shown} (key)"))
            yield from _nul_paths(item, _join(path, shown))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _not_after(value: datetime, not_after: datetime | None) -> datetime:
    """A time far ahead of the hub's clock would make whatever it stamps newer than every
    report to come, so it is refused rather than stored (a late time is fine: spooled
    reports arrive hours late)."""
    if not_after is not None and value > not_after:
        raise PydanticCustomError(
            "ahead_of_hub_clock",
            "{value} is ahead of the hub's clock by more than the allowed clock skew "
            "(FLEETMARK_INGEST_MAX_CLOCK_SKEW): it may be at most {not_after}",
            {"value": value.isoformat(), "not_after": not_after.isoformat()},
        )
    return value


def _not_ahead_of_the_hub(value: datetime, info: ValidationInfo) -> datetime:
    return _not_after(value, info.context.get(NOT_AFTER) if info.context else None)


def _truncate_message(value: str) -> str:
    if len(value) <= MAX_MESSAGE_CHARS:
        return value
    return value[: MAX_MESSAGE_CHARS - len(TRUNCATION_MARK)] + TRUNCATION_MARK


Name = Annotated[str, StringConstraints(min_length=1, max_length=253)]
ShortText = Annotated[str, StringConstraints(max_length=1024)]
Message = Annotated[str, AfterValidator(_truncate_message)]
# A time before 1970 is refused, naming the field: nothing a cluster observed is that old, and
# the hub's arithmetic on it (observed_at less FLEETMARK_INGEST_MAX_BACKDATE) must stay in range.
ReportedTime = Annotated[AwareDatetime, AfterValidator(_not_ahead_of_the_hub), WithinReach]
# A record's time is held to the same bounds, checked once per report over all its records
# (Report.from_body) rather than by a Python call per record.
# What an agent claims about its placement: never refused (an agent drops a refused report for
# good), only recorded when it is a name registration would take (hub.ingest.service).
Claim = Annotated[
    str,
    Field(description="Claimed only: an admin places the cluster (see FLEETMARK_AGENT_PLACEMENT)."),
]
LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=317)]
LabelValue = Annotated[str, StringConstraints(max_length=1024)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterIdentity(Strict):
    name: Name
    environment: Claim | None = None
    cluster_type: Claim | None = None
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=256)


class AgentIdentity(Strict):
    version: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    boot_id: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    instance: Name


class Source(Strict):
    url: ShortText | None = None
    ref: ShortText | None = None
    path: ShortText | None = None
    # When `ref` names the object holding the URL (a Flux source object): its ref of `url`.
    url_ref: ShortText | None = None


class ObjectRecord(Strict):
    reconciler: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,31}$")]
    kind: Annotated[str, StringConstraints(min_length=1, max_length=63)]
    namespace: Annotated[str, StringConstraints(max_length=253)] = ""
    name: Name
    source: Source | None = None
    applied_revision: ShortText | None = None
    attempted_revision: ShortText | None = None
    ready: bool | None = None
    reason: ShortText | None = None
    message: Message | None = None
    health: Annotated[str, StringConstraints(max_length=32)] | None = None
    drifted: bool = False
    suspended: bool = False
    last_transition_at: AwareDatetime | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.reconciler, self.kind, self.namespace, self.name)


class SkippedKind(Strict):
    """A kind the agent was set to watch and could not, so the report holds none of it."""

    kind: Annotated[str, StringConstraints(min_length=1, max_length=63)]
    api_group: ShortText
    reason: ShortText


class SnapshotPart(Strict):
    """Where a report stands in a full snapshot sent in several reports (too large for one)."""

    id: Annotated[str, StringConstraints(min_length=1, max_length=64)] = Field(
        description="The snapshot's id, the same in each of its parts; the agent makes it."
    )
    index: int = Field(ge=0, lt=MAX_SNAPSHOT_PARTS, description="This part's place, from 0.")
    count: int = Field(ge=1, le=MAX_SNAPSHOT_PARTS, description="The snapshot's parts.")

    @model_validator(mode="after")
    def _within_count(self) -> "SnapshotPart":
        if self.index >= self.count:
            raise ValueError(f"index {self.index} is not below count {self.count}")
        return self


class Report(Strict):
    report_schema: Literal["fleetmark.report/v1"] = Field(alias="schema")
    cluster: ClusterIdentity
    agent: AgentIdentity
    sequence: int = Field(ge=1, le=2**62, description="Starts at 1 for every agent boot id.")
    observed_at: ReportedTime
    full_snapshot: bool = False
    objects: list[ObjectRecord] = Field(default_factory=list, max_length=MAX_OBJECTS)
    skipped_kinds: list[SkippedKind] = Field(
        default_factory=list,
        max_length=256,
        description="Kinds the agent could not watch; absent from `objects` for that reason.",
    )
    snapshot_part: SnapshotPart | None = Field(
        default=None,
        description="This report is one part of a full snapshot: its records are taken as a "
        "change report's, and objects missing from every part are removed once all have "
        "arrived. `full_snapshot` is then false.",
    )

    @classmethod
    def from_body(cls, body: bytes, *, not_after: datetime | None = None) -> "Report":
        """The report a request body holds, its times no later than `not_after` when given;
        raises pydantic's ValidationError."""
        report = cls.model_validate_json(
            body, context={MAY_HOLD_NUL: b"\\u0000" in body, NOT_AFTER: not_after}
        )
        report._check_record_times(not_after)
        return report

    def _check_record_times(self, not_after: datetime | None) -> None:
        """The records' times within ReportedTime's bounds: only the newest and the oldest are
        compared, and only when one is out are the records gone through, naming each refused."""
        times = [
            record.last_transition_at
            for record in self.objects
            if record.last_transition_at is not None
        ]
        if not times:
            return
        try:
            within_reach(_not_after(max(times), not_after))
            within_reach(min(times))
        except PydanticCustomError:
            errors = []
            for index, record in enumerate(self.objects):
                moment = record.last_transition_at
                if moment is None:
                    continue
                try:
                    within_reach(_not_after(moment, not_after))
                except PydanticCustomError as error:
                    loc = ("objects", index, "last_transition_at")
                    errors.append(InitErrorDetails(type=error, loc=loc, input=moment))
            raise ValidationError.from_exception_data(type(self).__name__, errors) from None

    @model_validator(mode="after")
    def _storable(self, info: ValidationInfo) -> "Report":
        """PostgreSQL text cannot hold NUL characters.

        JSON carries one only as the escape \\u0000, so the caller says (in the validation
        context) whether the body holds that escape at all, and only then are the strings
        searched. (Unpaired surrogates need no check: the JSON parser refuses them.)
        """
        if info.context and info.context.get(MAY_HOLD_NUL):
            paths = list(_nul_paths(self))
            if paths:
                raise ValueError(
                    "; ".join(f"{path}: must not contain a NUL character" for path in paths)
                )
        return self

    @model_validator(mode="after")
    def _part_is_no_whole_snapshot(self) -> "Report":
        if self.snapshot_part is not None and self.full_snapshot:
            raise ValueError(
                "full_snapshot must be false in a part of a snapshot (snapshot_part): "
                "only all its parts together list every object"
            )
        return self

    @model_validator(mode="after")
    def _unique_objects(self) -> "Report":
        keys = [record.key for record in self.objects]
        if len(set(keys)) == len(keys):
            return self
        seen: set[tuple[str, str, str, str]] = set()
        for index, key in enumerate(keys):
            if key in seen:
                reconciler, kind, namespace, name = key
                raise ValueError(
                    f"objects.{index}: {reconciler} {kind} {namespace}/{name} "
                    "appears more than once in this report"
                )
            seen.add(key)
        return self


class ReportReply(BaseModel):
    accepted: int = Field(description="Records taken from this report (0 for a duplicate).")
    changed: int = Field(description="Objects whose state changed, including removed ones.")
    duplicate: bool = Field(description="This (cluster, boot id, sequence) was seen before.")
    warnings: list[str] = Field(default_factory=list)
