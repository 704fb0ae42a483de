"""The agent's on-disk queue of reports the hub has not taken yet.

The reporter (`agent.delivery`) spools reports while the hub is unreachable and replays them,
oldest first, before it sends anything new; the directory survives restarts. Its layout and
bound are in docs/contributing.md ("The agent's delivery").
"""

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from pydantic import ValidationError

from agent.report import Report

__all__ = ["Spool", "SpoolFull", "SpooledReport"]

CORRUPT = "corrupt"
REJECTED = "rejected"
_TEMPORARY = ".tmp-"
_REASON_SUFFIX = ".reason.json"
_NAME = re.compile(
    r"^(?P<generation>\d{8})-(?P<boot_id>[A-Za-z0-9._-]{1,64})-(?P<sequence>\d{20})"
    r"-(?P<kind>full|change|part-(?P<index>\d{5})-of-(?P<count>\d{5}))\.json$"
)
_BOOT_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

log = structlog.get_logger(__name__)


class SpoolFull(Exception):
    """The report was not kept: the spool is full of reports that nothing supersedes, or
    the disk refused the write. The message says which, and nothing was dropped for it."""


@dataclass(frozen=True, slots=True, order=True)
class SpooledReport:
    """One report in the queue; entries order as they are delivered."""

    name: str
    boot_id: str = field(compare=False)
    sequence: int = field(compare=False)
    full_snapshot: bool = field(compare=False)
    size: int = field(compare=False)
    part: tuple[int, int] | None = field(compare=False, default=None)  # (index, count)

    def completes(self, before: Sequence["SpooledReport"]) -> bool:
        """Whether this is a full snapshot, or the last part of one whose other parts are
        the entries just `before` it."""
        if self.full_snapshot:
            return True
        if self.part is None or self.part[0] != self.part[1] - 1:
            return False
        count = self.part[1]
        earlier = before[len(before) - (count - 1) :] if count > 1 else []
        return len(earlier) == count - 1 and all(
            entry.part == (index, count)
            and entry.boot_id == self.boot_id
            and entry.sequence == self.sequence - (count - 1) + index
            for index, entry in enumerate(earlier)
        )


def _part(report: Report) -> tuple[int, int] | None:
    part = report.snapshot_part
    return None if part is None else (part.index, part.count)


def _file_name(generation: int, report: Report) -> str:
    if not _BOOT_ID.match(report.agent.boot_id):
        raise ValueError(f"boot id {report.agent.boot_id!r} cannot name a spool file")
    part = report.snapshot_part
    if part is not None:
        kind = f"part-{part.index:05d}-of-{part.count:05d}"
    else:
        kind = "full" if report.full_snapshot else "change"
    return f"{generation:08d}-{report.agent.boot_id}-{report.sequence:020d}-{kind}.json"


def _parse_name(name: str, size: int) -> SpooledReport | None:
    match = _NAME.match(name)
    if match is None:
        return None
    return SpooledReport(
        name=name,
        boot_id=match["boot_id"],
        sequence=int(match["sequence"]),
        full_snapshot=match["kind"] == "full",
        size=size,
        part=None if match["index"] is None else (int(match["index"]), int(match["count"])),
    )


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(_TEMPORARY + path.name)
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


class Spool:
    """A bounded, ordered, crash-safe queue of reports in `directory` (created if missing).

    `max_bytes` bounds the queued reports and the rejected ones together; `keep_set_aside`
    bounds how many files each of `corrupt/` and `rejected/` keeps (the oldest go first, with
    a log line), so neither grows without end when something keeps going wrong.
    """

    def __init__(self, directory: Path, *, max_bytes: int, keep_set_aside: int = 20) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.directory = directory
        self.max_bytes = max_bytes
        self._keep_set_aside = keep_set_aside
        self._entries: list[SpooledReport] = []
        self._used = 0  # bytes of the queued reports
        self._rejected = 0  # bytes in rejected/
        self._generations: dict[str, int] = {}
        self._corrupt = 0
        for folder in (directory, directory / CORRUPT, directory / REJECTED):
            folder.mkdir(parents=True, exist_ok=True)
        self._scan()

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[SpooledReport]:
        return iter(tuple(self._entries))

    @property
    def used_bytes(self) -> int:
        """Bytes counted against `max_bytes`: queued and rejected reports."""
        return self._used + self._rejected

    @property
    def corrupt(self) -> int:
        """Files moved to `corrupt/` since this spool was opened."""
        return self._corrupt

    def put(self, report: Report) -> list[SpooledReport]:
        """Queue `report` behind everything already here; returns what compaction dropped.

        Raises `SpoolFull` (having dropped nothing) when the report cannot be made to fit.
        """
        name = _file_name(self._generation(report.agent.boot_id), report)
        data = report.to_json()
        entry = SpooledReport(
            name=name,
            boot_id=report.agent.boot_id,
            sequence=report.sequence,
            full_snapshot=report.full_snapshot,
            size=len(data),
            part=_part(report),
        )
        if self._entries and entry <= self._entries[-1]:
            raise ValueError(f"{entry.name} would not be the newest report in the spool")
        victims = self._compaction(entry)
        try:
            _write_atomically(self.directory / entry.name, data)
        except OSError as exc:
            raise SpoolFull(f"cannot write {entry.name} to {self.directory}: {exc}") from exc
        # Written before anything is dropped: were the write to fail, what it would have
        # superseded must still be there.
        self._entries.append(entry)
        self._used += entry.size
        for victim in victims:
            self._discard(victim)
        self._trim(REJECTED)
        if victims:
            snapshots = sum(victim.full_snapshot for victim in victims)
            log.warning(
                "spool full: dropped reports superseded by a newer full snapshot",
                spool=str(self.directory),
                dropped=len(victims),
                full_snapshots=snapshots,
                change_reports=len(victims) - snapshots,
                freed_bytes=sum(victim.size for victim in victims),
                oldest=victims[0].name,
                newest=victims[-1].name,
            )
        return victims

    def oldest(self) -> tuple[SpooledReport, Report] | None:
        """The next report to deliver, read back; unreadable files are moved aside on the way."""
        while self._entries:
            entry = self._entries[0]
            path = self.directory / entry.name
            try:
                report = Report.model_validate_json(path.read_bytes())
            except FileNotFoundError:
                log.warning("spooled report vanished", spool=str(self.directory), name=entry.name)
                self._forget(entry)
                continue
            except (OSError, ValidationError) as exc:
                self._move_aside(entry, f"cannot be read back: {exc}")
                continue
            if (report.agent.boot_id, report.sequence, report.full_snapshot, _part(report)) != (
                entry.boot_id,
                entry.sequence,
                entry.full_snapshot,
                entry.part,
            ):
                self._move_aside(entry, "its content does not match its name")
                continue
            return entry, report
        return None

    def remove(self, entry: SpooledReport) -> None:
        """Forget a delivered report."""
        self._discard(entry)

    def reject(self, entry: SpooledReport, reason: Mapping[str, object]) -> None:
        """Move a report the hub refused to `rejected/`, beside the hub's reason."""
        target = self.directory / REJECTED / entry.name
        reason_json = _reason_json(reason)
        _write_atomically(target.with_name(entry.name + _REASON_SUFFIX), reason_json)
        os.replace(self.directory / entry.name, target)
        self._forget(entry)
        self._rejected += entry.size + len(reason_json)
        self._trim(REJECTED)

    def keep_rejected(self, report: Report, reason: Mapping[str, object]) -> None:
        """Keep a report the hub refused that never was in the queue, as `reject` does."""
        name = _file_name(self._generation(report.agent.boot_id), report)
        target = self.directory / REJECTED / name
        reason_json, data = _reason_json(reason), report.to_json()
        _write_atomically(target.with_name(name + _REASON_SUFFIX), reason_json)
        _write_atomically(target, data)
        self._rejected += len(data) + len(reason_json)
        self._trim(REJECTED)

    def _generation(self, boot_id: str) -> int:
        generation = self._generations.get(boot_id)
        if generation is None:
            generation = max(self._generations.values(), default=0) + 1
            self._generations[boot_id] = generation
        return generation

    def _compaction(self, incoming: SpooledReport) -> list[SpooledReport]:
        """The oldest superseded reports whose removal makes room for `incoming`."""
        # Rejected reports always make way for the queue (`put` trims them after the write).
        needed = self._used + incoming.size - self.max_bytes
        if needed <= 0:
            return []
        if incoming.size > self.max_bytes:
            raise SpoolFull(
                f"report {incoming.boot_id}/{incoming.sequence} ({incoming.size} bytes) is "
                f"larger than the whole spool at {self.directory} ({self.max_bytes} bytes)"
            )
        queue = [*self._entries, incoming]
        newest = max(
            (index for index, entry in enumerate(queue) if entry.completes(queue[:index])),
            default=0,
        )
        last = queue[newest]
        superseded = queue[: newest - (last.part[1] - 1 if last.part else 0)]
        candidates = [entry for entry in superseded if entry.full_snapshot or entry.part] + [
            entry for entry in superseded if not (entry.full_snapshot or entry.part)
        ]
        victims: list[SpooledReport] = []
        freed = 0
        for candidate in candidates:
            if freed >= needed:
                break
            victims.append(candidate)
            freed += candidate.size
        if freed < needed:
            raise SpoolFull(
                f"the spool at {self.directory} is full ({self._used} of {self.max_bytes} "
                f"bytes in {len(self._entries)} reports, {len(superseded)} of them superseded "
                f"by a newer full snapshot); report {incoming.boot_id}/{incoming.sequence} "
                f"({incoming.size} bytes) was not kept"
            )
        return sorted(victims)

    def _scan(self) -> None:
        for path in sorted(self.directory.iterdir()):
            if not path.is_file():
                continue
            if path.name.startswith(_TEMPORARY):
                self._set_aside(path, "a partial write from an earlier run")
                continue
            entry = _parse_name(path.name, path.stat().st_size)
            if entry is None:
                self._set_aside(path, "not a spooled report")
                continue
            self._entries.append(entry)
            self._used += entry.size
            generation = int(path.name[:8])
            self._generations[entry.boot_id] = max(
                generation, self._generations.get(entry.boot_id, 0)
            )
        self._entries.sort()
        self._rejected = sum(
            path.stat().st_size for path in (self.directory / REJECTED).iterdir() if path.is_file()
        )
        self._trim(REJECTED)
        if self._entries:
            log.info(
                "spool holds reports from an earlier run; they are delivered first",
                spool=str(self.directory),
                reports=len(self._entries),
                bytes=self._used,
            )
        if self._used > self.max_bytes:
            log.warning(
                "spool is over its bound; new reports will compact it",
                spool=str(self.directory),
                bytes=self._used,
                max_bytes=self.max_bytes,
            )

    def _forget(self, entry: SpooledReport) -> None:
        self._entries.remove(entry)
        self._used -= entry.size

    def _discard(self, entry: SpooledReport) -> None:
        (self.directory / entry.name).unlink(missing_ok=True)
        self._forget(entry)

    def _move_aside(self, entry: SpooledReport, why: str) -> None:
        self._forget(entry)
        self._set_aside(self.directory / entry.name, why)

    def _set_aside(self, path: Path, why: str) -> None:
        target = self.directory / CORRUPT / path.name.removeprefix(_TEMPORARY)
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return
        self._corrupt += 1
        log.error(
            "spool file moved aside",
            spool=str(self.directory),
            name=path.name,
            moved_to=str(target),
            reason=why,
        )
        self._trim(CORRUPT)

    def _trim(self, folder: str) -> None:
        """Remove the oldest files of `folder` beyond `keep_set_aside`, and rejected reports
        beyond the byte bound."""
        kept = [
            path
            for path in (self.directory / folder).iterdir()
            if path.is_file() and not path.name.endswith(_REASON_SUFFIX)
        ]
        kept.sort(key=lambda path: (path.stat().st_mtime_ns, path.name))
        for index, path in enumerate(kept):
            beyond_count = len(kept) - index > self._keep_set_aside
            if not beyond_count and not (folder == REJECTED and self.used_bytes > self.max_bytes):
                break
            freed = _remove_with_reason(path)
            if folder == REJECTED:
                self._rejected -= freed
            log.warning(
                "spool removed an old set-aside file",
                spool=str(self.directory),
                folder=folder,
                name=path.name,
                keep=self._keep_set_aside,
                freed_bytes=freed,
            )


def _remove_with_reason(path: Path) -> int:
    """Remove a set-aside file and its reason; returns the bytes freed."""
    freed = 0
    for file in (path, path.with_name(path.name + _REASON_SUFFIX)):
        try:
            freed += file.stat().st_size
            file.unlink()
        except FileNotFoundError:
            continue
    return freed


def _reason_json(reason: Mapping[str, object]) -> bytes:
    return json.dumps(dict(reason), indent=2, default=str).encode() + b"\n"
