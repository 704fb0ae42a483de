"""The spool: one file per report in delivery order, a byte bound kept by compaction only of
superseded reports, restarts, and files that cannot be read back."""

import errno
import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agent.report import Report, SnapshotPart
from agent.spool import Spool, SpooledReport, SpoolFull
from tests.agent.conftest import make_report, reason_of, record

BOOT = "0b7c6a52-3d4e-4f60-9a8b-1c2d3e4f5a6b"
NEXT_BOOT = "f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b"


def report(sequence: int, *, full: bool = False, boot_id: str = BOOT) -> Report:
    """A change report names one object; a full snapshot, being bigger, three."""
    objects = tuple(record(f"app-{sequence}-{index}") for index in range(3 if full else 1))
    return make_report(sequence, boot_id=boot_id, full_snapshot=full, objects=objects)


def size(sequence: int, *, full: bool = False) -> int:
    return len(report(sequence, full=full).to_json())


def queued(spool: Spool) -> list[tuple[str, int, bool]]:
    return [(entry.boot_id, entry.sequence, entry.full_snapshot) for entry in spool]


def files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.is_file())


def drain(spool: Spool) -> list[Report]:
    delivered = []
    while (item := spool.oldest()) is not None:
        entry, found = item
        delivered.append(found)
        spool.remove(entry)
    return delivered


def test_a_report_is_one_file_named_for_its_place_in_the_queue(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    first = report(1, full=True)

    assert spool.put(first) == []

    name = f"00000001-{BOOT}-{1:020d}-full.json"
    assert files(tmp_path) == [name]
    assert (tmp_path / name).read_bytes() == first.to_json()
    assert spool.used_bytes == len(first.to_json())
    assert len(spool) == 1
    item = spool.oldest()
    assert item is not None
    entry, read_back = item
    assert read_back == first
    assert entry == SpooledReport(name, BOOT, 1, True, len(first.to_json()))

    spool.remove(entry)
    assert files(tmp_path) == []
    assert (len(spool), spool.used_bytes, spool.oldest()) == (0, 0, None)


def test_reports_come_back_in_sequence_order_past_ten_and_beyond(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10_000_000)
    for sequence in (1, 2, 9, 10, 11, 100, 12_345):
        spool.put(report(sequence))

    # Zero-padding makes name order the sequence order (a plain "10" sorts before "9").
    assert [found.sequence for found in drain(spool)] == [1, 2, 9, 10, 11, 100, 12_345]


def test_a_report_older_than_the_newest_in_the_queue_is_refused(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    spool.put(report(5))

    with pytest.raises(ValueError, match="newest"):
        spool.put(report(4))


def test_a_boot_id_that_cannot_name_a_file_is_refused(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)

    with pytest.raises(ValueError, match="boot id"):
        spool.put(report(1, boot_id="../escape"))
    assert files(tmp_path) == []


def test_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    for sequence in range(1, 6):
        spool.put(report(sequence))

    assert all(not name.startswith(".") for name in os.listdir(tmp_path))


def test_a_restarted_agent_finds_the_earlier_boots_reports_and_they_go_first(
    tmp_path: Path,
) -> None:
    before = Spool(tmp_path, max_bytes=1_000_000)
    # Boot ids are random: the later boot's id sorts before the earlier one's here.
    later_boot = "00000000-0000-4000-8000-000000000000"
    for sequence in (1, 2, 3):
        before.put(report(sequence, boot_id=NEXT_BOOT))
    used = before.used_bytes

    with capture_logs() as logs:
        after = Spool(tmp_path, max_bytes=1_000_000)
    assert (len(after), after.used_bytes) == (3, used)
    assert any(entry["event"].startswith("spool holds reports") for entry in logs)
    after.put(report(1, boot_id=later_boot))
    after.put(report(2, boot_id=later_boot))

    assert [(found.agent.boot_id, found.sequence) for found in drain(after)] == [
        (NEXT_BOOT, 1),
        (NEXT_BOOT, 2),
        (NEXT_BOOT, 3),
        (later_boot, 1),
        (later_boot, 2),
    ]


def test_three_boots_in_a_row_replay_in_boot_order(tmp_path: Path) -> None:
    boots = ["c" * 8, "a" * 8, "b" * 8]
    for boot in boots:
        Spool(tmp_path, max_bytes=1_000_000).put(report(1, boot_id=boot))

    spool = Spool(tmp_path, max_bytes=1_000_000)
    assert [found.agent.boot_id for found in drain(spool)] == boots


def test_a_report_over_the_bound_of_change_reports_is_refused_and_nothing_dropped(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path, max_bytes=size(1) * 3)
    for sequence in (1, 2, 3):
        spool.put(report(sequence))
    before = files(tmp_path)

    with pytest.raises(SpoolFull, match=r"full .* report 0b7c6a52-.*/4 .* was not kept"):
        spool.put(report(4))

    assert files(tmp_path) == before
    assert queued(spool) == [(BOOT, 1, False), (BOOT, 2, False), (BOOT, 3, False)]


def test_change_reports_after_the_newest_snapshot_are_never_compacted(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=size(1, full=True) + size(2) * 2)
    spool.put(report(1, full=True))
    spool.put(report(2))
    spool.put(report(3))

    with pytest.raises(SpoolFull):
        spool.put(report(4))
    assert queued(spool) == [(BOOT, 1, True), (BOOT, 2, False), (BOOT, 3, False)]


def test_compaction_drops_superseded_snapshots_first_then_older_changes(
    tmp_path: Path,
) -> None:
    full, change = size(1, full=True), size(2)
    # S1 c2 S3 c4 fill the spool exactly.
    spool = Spool(tmp_path, max_bytes=2 * full + 2 * change)
    spool.put(report(1, full=True))
    spool.put(report(2))
    spool.put(report(3, full=True))
    spool.put(report(4))

    with capture_logs() as logs:
        dropped = spool.put(report(5))
    # One change report's room: the snapshot S3 supersedes is the first to go.
    assert [entry.sequence for entry in dropped] == [1]
    assert queued(spool) == [(BOOT, 2, False), (BOOT, 3, True), (BOOT, 4, False), (BOOT, 5, False)]
    (compacted,) = [entry for entry in logs if entry["event"].startswith("spool full")]
    assert compacted["log_level"] == "warning"
    assert (compacted["dropped"], compacted["full_snapshots"], compacted["change_reports"]) == (
        1,
        1,
        0,
    )

    # Then the change report before S3, whose state S3 already carries.
    sequence, dropped = 5, []
    while not dropped:
        sequence += 1
        dropped = spool.put(report(sequence))
    assert [entry.sequence for entry in dropped] == [2]

    # S3 and everything after it stay, until there is no room left for another.
    sequence += 1
    while spool.used_bytes + size(sequence) <= spool.max_bytes:
        assert spool.put(report(sequence)) == []
        sequence += 1
    with pytest.raises(SpoolFull):
        spool.put(report(sequence))
    assert queued(spool) == [(BOOT, 3, True)] + [(BOOT, kept, False) for kept in range(4, sequence)]
    assert files(tmp_path) == [entry.name for entry in spool]


def test_an_incoming_snapshot_supersedes_everything_before_it(tmp_path: Path) -> None:
    change = size(1)
    spool = Spool(tmp_path, max_bytes=change * 6)
    for sequence in range(1, 7):
        spool.put(report(sequence))
    needed = size(7, full=True)

    dropped = spool.put(report(7, full=True))

    # Oldest first, and only as many as the snapshot needs.
    assert [entry.sequence for entry in dropped] == list(range(1, 1 + -(-needed // change)))
    assert queued(spool)[-1] == (BOOT, 7, True)
    assert spool.used_bytes <= spool.max_bytes
    assert spool.used_bytes == sum(
        path.stat().st_size for path in tmp_path.iterdir() if path.is_file()
    )


def test_snapshots_keep_a_long_outage_within_the_bound(tmp_path: Path) -> None:
    full, change = size(1, full=True), size(2)
    spool = Spool(tmp_path, max_bytes=2 * full + 6 * change)
    compacted = 0
    sequence = 0
    for _ in range(20):  # an hour's snapshot, then a few changes, twenty times over
        sequence += 1
        compacted += len(spool.put(report(sequence, full=True)))
        for _ in range(3):
            sequence += 1
            compacted += len(spool.put(report(sequence)))

    assert spool.used_bytes <= spool.max_bytes
    assert compacted > 0
    assert compacted + len(spool) == sequence
    # The newest snapshot and the changes after it are all there.
    assert queued(spool)[-4:] == [
        (BOOT, sequence - 3, True),
        (BOOT, sequence - 2, False),
        (BOOT, sequence - 1, False),
        (BOOT, sequence, False),
    ]


def test_a_report_larger_than_the_whole_spool_is_refused(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=size(1, full=True) - 1)
    with pytest.raises(SpoolFull, match="larger than the whole spool"):
        spool.put(report(1, full=True))
    assert files(tmp_path) == []


def test_a_full_disk_refuses_the_report_and_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    spool.put(report(1))

    def no_space(descriptor: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", no_space)
    with pytest.raises(SpoolFull, match="No space left"):
        spool.put(report(2))
    monkeypatch.undo()

    assert files(tmp_path) == [entry.name for entry in spool]
    assert queued(spool) == [(BOOT, 1, False)]


def test_a_partial_write_from_a_crash_is_moved_aside_at_start(tmp_path: Path) -> None:
    Spool(tmp_path, max_bytes=1_000_000).put(report(1))
    partial = tmp_path / f".tmp-00000001-{BOOT}-{2:020d}-change.json"
    partial.write_bytes(report(2).to_json()[:40])

    with capture_logs() as logs:
        spool = Spool(tmp_path, max_bytes=1_000_000)

    assert queued(spool) == [(BOOT, 1, False)]
    assert spool.corrupt == 1
    assert (tmp_path / "corrupt" / partial.name.removeprefix(".tmp-")).exists()
    assert not partial.exists()
    (moved,) = [entry for entry in logs if entry["event"] == "spool file moved aside"]
    assert moved["log_level"] == "error"
    assert moved["reason"] == "a partial write from an earlier run"


def test_stray_files_are_moved_aside_and_folders_left_alone(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "lost+found").mkdir()

    spool = Spool(tmp_path, max_bytes=1_000_000)

    assert len(spool) == 0
    assert spool.corrupt == 1
    assert (tmp_path / "corrupt" / "notes.txt").read_text() == "hello"
    assert (tmp_path / "lost+found").is_dir()


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b'{"schema": "fleetmark.report/v1"}', b"\xff\xfe"],
    ids=["empty", "truncated", "incomplete", "binary"],
)
def test_an_unreadable_report_is_moved_aside_and_the_queue_goes_on(
    tmp_path: Path, content: bytes
) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    for sequence in (1, 2, 3):
        spool.put(report(sequence))
    broken = next(iter(spool))
    (tmp_path / broken.name).write_bytes(content)

    with capture_logs() as logs:
        delivered = drain(spool)

    assert [found.sequence for found in delivered] == [2, 3]
    assert spool.corrupt == 1
    assert (tmp_path / "corrupt" / broken.name).read_bytes() == content
    assert any(entry["event"] == "spool file moved aside" for entry in logs)
    assert spool.used_bytes == 0


def test_a_report_whose_content_does_not_match_its_name_is_moved_aside(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    spool.put(report(1))
    spool.put(report(2))
    first, second = list(spool)
    (tmp_path / first.name).write_bytes((tmp_path / second.name).read_bytes())

    assert [found.sequence for found in drain(spool)] == [2]
    assert spool.corrupt == 1


def test_a_report_that_vanished_is_skipped(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    spool.put(report(1))
    spool.put(report(2))
    (tmp_path / next(iter(spool)).name).unlink()

    assert [found.sequence for found in drain(spool)] == [2]
    assert spool.corrupt == 0


def test_a_rejected_report_moves_to_rejected_with_the_hubs_reason(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    spool.put(report(1))
    spool.put(report(2))
    entry = next(iter(spool))
    reason = {"status": 422, "error": "invalid_input", "detail": "objects.0.name: too long"}

    spool.reject(entry, reason)

    kept = tmp_path / "rejected" / entry.name
    assert kept.read_bytes() == report(1).to_json()
    assert reason_of(kept) == reason
    assert queued(spool) == [(BOOT, 2, False)]
    # The rejected copy still counts against the spool's bound.
    reason_bytes = kept.with_name(kept.name + ".reason.json").stat().st_size
    assert spool.used_bytes == size(2) + size(1) + reason_bytes


def test_a_report_rejected_before_it_was_spooled_is_kept_too(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    reason = {"status": 413, "error": "payload_too_large", "detail": "over the limit"}

    spool.keep_rejected(report(1), reason)

    (kept,) = [
        path
        for path in (tmp_path / "rejected").iterdir()
        if path.suffix == ".json" and not path.name.endswith(".reason.json")
    ]
    assert kept.read_bytes() == report(1).to_json()
    assert reason_of(kept) == reason
    assert len(spool) == 0


def test_set_aside_folders_keep_only_the_newest_files(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000, keep_set_aside=2)
    for sequence in range(1, 5):
        spool.put(report(sequence))
    for number, entry in enumerate(list(spool)):
        os.utime(tmp_path / entry.name, ns=(number * 10**9, number * 10**9))

    with capture_logs() as logs:
        for entry in list(spool):
            spool.reject(entry, {"status": 422})

    kept = sorted(path.name for path in (tmp_path / "rejected").iterdir())
    names = [entry.name for entry in spool]
    assert names == []
    assert len(kept) == 4  # two reports, each beside its reason
    assert all(f"-{3:020d}-" in name or f"-{4:020d}-" in name for name in kept)
    assert sum(entry["event"] == "spool removed an old set-aside file" for entry in logs) == 2


def test_max_bytes_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        Spool(tmp_path, max_bytes=0)


def rejected_files(directory: Path) -> list[str]:
    return sorted(path.name for path in (directory / "rejected").iterdir())


def test_rejected_reports_count_against_the_bound_and_make_way_for_the_queue(
    tmp_path: Path,
) -> None:
    bound = 2 * size(1) + 4 * size(3) // 2
    spool = Spool(tmp_path, max_bytes=bound)
    for sequence in (1, 2):
        spool.keep_rejected(report(sequence), {"status": 422})
    held = spool.used_bytes
    assert held > 2 * size(1)

    # Queued reports take the room the rejected copies held, the oldest copy going first.
    with capture_logs() as logs:
        for sequence in range(3, 7):
            spool.put(report(sequence))

    assert spool.used_bytes <= bound
    assert len(spool) == 4
    assert not any(f"-{1:020d}-" in name for name in rejected_files(tmp_path))
    assert any(entry["event"] == "spool removed an old set-aside file" for entry in logs)
    # A restarted agent counts what rejected/ holds too.
    assert Spool(tmp_path, max_bytes=bound).used_bytes == spool.used_bytes


def test_a_rejected_copy_over_the_bound_is_not_kept(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=size(1) + size(2))
    spool.put(report(1))
    spool.put(report(2))

    spool.keep_rejected(report(3, full=True), {"status": 422})

    assert rejected_files(tmp_path) == []
    assert spool.used_bytes == size(1) + size(2)
    assert len(spool) == 2


def part(sequence: int, index: int, count: int) -> Report:
    return report(sequence).model_copy(
        update={"snapshot_part": SnapshotPart(id="snap", index=index, count=count)}
    )


def test_parts_of_a_snapshot_are_named_as_parts_and_read_back(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1_000_000)
    for index in range(3):
        spool.put(part(index + 1, index, 3))

    assert files(tmp_path) == [
        f"00000001-{BOOT}-{index + 1:020d}-part-{index:05d}-of-00003.json" for index in range(3)
    ]
    assert [found.snapshot_part for found in drain(Spool(tmp_path, max_bytes=1_000_000))] == [
        SnapshotPart(id="snap", index=index, count=3) for index in range(3)
    ]


def test_a_snapshot_in_parts_supersedes_only_once_its_last_part_is_queued(
    tmp_path: Path,
) -> None:
    parts_bytes = sum(len(part(5 + index, index, 3).to_json()) for index in range(3))
    # Short by a little more than a snapshot part says about itself.
    spool = Spool(tmp_path, max_bytes=size(1, full=True) + 3 * size(2) + parts_bytes - 60)
    spool.put(report(1, full=True))
    for sequence in (2, 3, 4):
        spool.put(report(sequence))
    for index in range(2):
        spool.put(part(5 + index, index, 3))
    # Room is short, but the snapshot is not whole yet: nothing it would supersede goes.
    with pytest.raises(SpoolFull):
        spool.put(report(7))

    dropped = spool.put(part(7, 2, 3))

    assert [entry.sequence for entry in dropped] == [1]
    assert [entry.sequence for entry in spool] == [2, 3, 4, 5, 6, 7]
