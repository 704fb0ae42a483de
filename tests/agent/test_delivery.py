"""The reporter: numbering, direct delivery, spooling while the hub is away, ordered replay,
rejections that do not block the queue — against a scripted hub, then end to end over real
HTTP against the real hub, stopped and started again."""

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from structlog.testing import capture_logs

from agent.client import HubClient
from agent.delivery import DeliveryCounters, Outcome, Reporter
from agent.report import ClusterIdentity, ObjectRecord
from agent.spool import Spool, SpoolFull
from tests.agent.conftest import (
    IDENTITY,
    TOKEN,
    FakeHub,
    LiveHub,
    Sleeps,
    reason_of,
    record,
    register_cluster,
    write_token,
)
from tests.support import SHA_A, SHA_B, SHA_C, START, Store

V1 = f"dev@sha1:{SHA_A}"
V2 = f"dev@sha1:{SHA_B}"
V3 = f"dev@sha1:{SHA_C}"
RETRY = 10.0  # the reporter's first hold-off, in seconds (jittered to 5-10)


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def apps(*names: str) -> list[ObjectRecord]:
    return [record(name) for name in names]


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    return Spool(tmp_path / "spool", max_bytes=1_000_000)


def reporter_for(client: HubClient, spool: Spool, **options: Any) -> Reporter:
    values: dict[str, Any] = {
        "cluster": IDENTITY,
        "instance": "fleetmark-agent-0",
        "version": "0.1.0",
        "retry_interval": RETRY,
        "max_retry_interval": 80.0,
    }
    return Reporter(client, spool, **(values | options))


@pytest.fixture
def reporter(hub_client: HubClient, spool: Spool) -> Reporter:
    return reporter_for(hub_client, spool)


class Attempts:
    """Counts requests that reach the scripted hub's transport, up or down."""

    def __init__(self, hub: FakeHub) -> None:
        self.hub = hub
        self.count = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.count += 1
        return self.hub.handler(request)


@pytest.fixture
async def counted(
    fake_hub: FakeHub, token_file: Path, sleeps: Sleeps, spool: Spool
) -> AsyncIterator[tuple[Reporter, Attempts]]:
    attempts = Attempts(fake_hub)
    async with HubClient(
        "http://hub.test",
        token_file=token_file,
        transport=httpx.MockTransport(attempts),
        attempts=2,
        sleep=sleeps,
    ) as client:
        yield reporter_for(client, spool), attempts


# --- against a scripted hub ------------------------------------------------------------------


async def test_the_first_report_goes_straight_to_the_hub_as_sequence_1(
    reporter: Reporter, fake_hub: FakeHub, spool: Spool
) -> None:
    outcome = await reporter.submit(apps("a", "b"), full_snapshot=True, now=at(0))

    assert outcome is Outcome.SENT
    assert uuid.UUID(reporter.boot_id).version == 4
    ((boot_id, sequence),) = fake_hub.delivered()
    assert (boot_id, sequence) == (reporter.boot_id, 1)
    sent = fake_hub.taken[(boot_id, 1)]
    assert sent.full_snapshot is True
    assert sent.observed_at == at(0)
    assert sent.cluster == IDENTITY
    assert (sent.agent.version, sent.agent.instance) == ("0.1.0", "fleetmark-agent-0")
    assert [item.name for item in sent.objects] == ["a", "b"]
    assert reporter.counters == DeliveryCounters(sent=1)
    assert (reporter.sequence, reporter.pending, len(spool)) == (1, 0, 0)


async def test_sequences_count_up_and_each_start_has_its_own_boot_id(
    reporter: Reporter, hub_client: HubClient, spool: Spool, fake_hub: FakeHub
) -> None:
    for second in range(3):
        await reporter.submit(apps("a"), full_snapshot=False, now=at(second))
    restarted = reporter_for(hub_client, spool)
    await restarted.submit(apps("a"), full_snapshot=True, now=at(3))

    assert restarted.boot_id != reporter.boot_id
    assert fake_hub.delivered() == [
        (reporter.boot_id, 1),
        (reporter.boot_id, 2),
        (reporter.boot_id, 3),
        (restarted.boot_id, 1),
    ]


async def test_while_the_hub_is_away_reports_spool_and_replay_in_order_before_new_ones(
    counted: tuple[Reporter, Attempts], fake_hub: FakeHub, spool: Spool
) -> None:
    reporter, attempts = counted
    fake_hub.down = True

    with capture_logs() as logs:
        assert await reporter.submit(apps("a"), full_snapshot=True, now=at(0)) is Outcome.SPOOLED
    assert attempts.count == 2  # the client's own retries
    assert any(entry["event"].startswith("hub unavailable; reports are kept") for entry in logs)

    # Within the hold-off the hub is left alone: reports go to the spool without a request.
    assert await reporter.submit(apps("b"), full_snapshot=False, now=at(1)) is Outcome.SPOOLED
    assert await reporter.submit(apps("c"), full_snapshot=False, now=at(2)) is Outcome.SPOOLED
    assert attempts.count == 2
    assert reporter.pending == 3

    fake_hub.down = False
    assert await reporter.submit(apps("d"), full_snapshot=False, now=at(RETRY)) is Outcome.SENT

    assert [sequence for _, sequence in fake_hub.delivered()] == [1, 2, 3, 4]
    assert [sequence for _, sequence, _ in fake_hub.seen] == [1, 2, 3, 4]
    assert reporter.pending == 0
    assert spool.used_bytes == 0
    assert reporter.counters == DeliveryCounters(sent=1, spooled=3, replayed=3)


async def test_flush_replays_once_the_hold_off_is_over(
    counted: tuple[Reporter, Attempts], fake_hub: FakeHub
) -> None:
    reporter, attempts = counted
    fake_hub.down = True
    await reporter.submit(apps("a"), full_snapshot=True, now=at(0))
    await reporter.submit(apps("b"), full_snapshot=False, now=at(1))
    fake_hub.down = False
    tried = attempts.count

    assert await reporter.flush(at(RETRY / 2 - 0.1)) == 2
    assert attempts.count == tried

    assert await reporter.flush(at(RETRY)) == 0
    assert [sequence for _, sequence in fake_hub.delivered()] == [1, 2]
    assert await reporter.flush(at(RETRY + 1)) == 0


async def test_while_the_gate_is_closed_nothing_is_sent_and_the_spool_waits(
    hub_client: HubClient, spool: Spool, fake_hub: FakeHub
) -> None:
    leading = [True]
    reporter = reporter_for(hub_client, spool, gate=lambda seconds: leading[0])
    fake_hub.down = True
    await reporter.submit(apps("a"), full_snapshot=True, now=at(0))
    fake_hub.down = False
    leading[0] = False  # another pod leads now

    assert await reporter.flush(at(RETRY)) == 1
    assert await reporter.submit(apps("b"), full_snapshot=False, now=at(RETRY)) is Outcome.SPOOLED
    assert fake_hub.seen == []  # no request reached the hub
    assert reporter.pending == 2

    # Leading again: being held back cost no hold-off; the spool goes out at once, in order.
    leading[0] = True
    assert await reporter.flush(at(RETRY + 1)) == 0
    assert [sequence for _, sequence in fake_hub.delivered()] == [1, 2]


async def test_the_hold_off_doubles_up_to_its_ceiling_and_resets_on_success(
    counted: tuple[Reporter, Attempts], fake_hub: FakeHub
) -> None:
    reporter, attempts = counted
    fake_hub.down = True
    await reporter.submit(apps("a"), full_snapshot=True, now=at(0))
    now, tried = 0.0, attempts.count

    # Each wait lies between half and all of 10, 20, 40, 80, 80 seconds.
    for ceiling in (10, 20, 40, 80, 80):
        await reporter.flush(at(now + ceiling / 2 - 0.01))
        assert attempts.count == tried, f"tried again before half of {ceiling}s"
        now += ceiling
        await reporter.flush(at(now))
        assert attempts.count == tried + 2, f"not tried again after {ceiling}s"
        tried = attempts.count

    fake_hub.down = False
    assert await reporter.flush(at(now + 80)) == 0
    # A success forgets the failures: the next outage starts again at the first hold-off.
    fake_hub.down = True
    await reporter.submit(apps("b"), full_snapshot=False, now=at(now + 100))
    fake_hub.down = False
    assert await reporter.flush(at(now + 100 + RETRY)) == 0


async def test_a_long_retry_after_holds_the_reporter_off_that_long(
    token_file: Path, sleeps: Sleeps, spool: Spool
) -> None:
    answers = [httpx.Response(503, headers={"Retry-After": "600"})]

    def handler(request: httpx.Request) -> httpx.Response:
        return answers[-1]

    async with HubClient(
        "http://hub.test", token_file=token_file, transport=httpx.MockTransport(handler)
    ) as client:
        reporter = reporter_for(client, spool)
        assert await reporter.submit(apps("a"), full_snapshot=True, now=at(0)) is Outcome.SPOOLED
        answers.append(httpx.Response(200, json={"accepted": 1, "changed": 1, "duplicate": False}))
        assert await reporter.flush(at(599)) == 1
        assert await reporter.flush(at(600)) == 0
    assert sleeps.delays == []


async def test_a_refused_token_keeps_reports_until_it_is_fixed(
    reporter: Reporter, fake_hub: FakeHub, token_file: Path
) -> None:
    fake_hub.token = "fm-the-new-token"

    with capture_logs() as logs:
        outcome = await reporter.submit(apps("a"), full_snapshot=True, now=at(0))

    assert outcome is Outcome.SPOOLED
    (refusal,) = [entry for entry in logs if entry["log_level"] == "error"]
    assert "cluster token" in refusal["event"]
    assert (refusal["status"], refusal["error"]) == (401, "not_authenticated")
    assert fake_hub.delivered() == []

    # The Secret is rotated; the next attempt reads the new token.
    write_token(token_file, "fm-the-new-token")
    assert await reporter.flush(at(RETRY)) == 0
    assert fake_hub.delivered() == [(reporter.boot_id, 1)]
    assert reporter.counters == DeliveryCounters(spooled=1, replayed=1)


async def test_a_report_rejected_on_direct_delivery_is_kept_aside_with_the_reason(
    reporter: Reporter, fake_hub: FakeHub, spool: Spool
) -> None:
    fake_hub.reject[1] = (422, {"error": "invalid_input", "detail": "objects.0: no"})

    with capture_logs() as logs:
        outcome = await reporter.submit(apps("a"), full_snapshot=True, now=at(0))

    assert outcome is Outcome.REJECTED
    (kept,) = [
        path
        for path in (spool.directory / "rejected").iterdir()
        if not path.name.endswith(".reason.json")
    ]
    assert f"-{reporter.boot_id}-{1:020d}-full.json" in kept.name
    assert reason_of(kept) == {
        "status": 422,
        "error": "invalid_input",
        "detail": "objects.0: no",
        "boot_id": reporter.boot_id,
        "sequence": 1,
    }
    assert any(entry["event"].startswith("the hub rejected a report") for entry in logs)
    assert await reporter.submit(apps("a"), full_snapshot=True, now=at(1)) is Outcome.SENT
    assert reporter.counters == DeliveryCounters(sent=1, rejected=1)


async def test_a_rejected_spooled_report_does_not_block_the_ones_behind_it(
    reporter: Reporter, fake_hub: FakeHub, spool: Spool
) -> None:
    fake_hub.down = True
    for second, name in enumerate("abc"):
        await reporter.submit(apps(name), full_snapshot=False, now=at(second))
    fake_hub.down = False
    fake_hub.reject[2] = (413, {"error": "payload_too_large", "detail": "over the limit"})

    assert await reporter.flush(at(RETRY)) == 0

    assert [sequence for _, sequence in fake_hub.delivered()] == [1, 3]
    rejected = sorted((spool.directory / "rejected").iterdir())
    assert [path.name.endswith(".reason.json") for path in rejected] == [False, True]
    assert f"-{2:020d}-change.json" in rejected[0].name
    assert reason_of(rejected[0])["error"] == "payload_too_large"
    assert reporter.counters == DeliveryCounters(spooled=3, replayed=2, rejected=1)


async def test_a_lost_reply_is_replayed_and_the_hub_counts_it_once(
    fake_hub: FakeHub, token_file: Path, spool: Spool
) -> None:
    async with HubClient(
        "http://hub.test",
        token_file=token_file,
        transport=httpx.MockTransport(fake_hub.handler),
        attempts=1,
    ) as client:
        reporter = reporter_for(client, spool)
        fake_hub.lose_reply_for.add(1)
        assert await reporter.submit(apps("a"), full_snapshot=True, now=at(0)) is Outcome.SPOOLED
        assert await reporter.submit(apps("b"), full_snapshot=False, now=at(RETRY)) is Outcome.SENT

    assert [(sequence, duplicate) for _, sequence, duplicate in fake_hub.seen] == [
        (1, False),
        (1, True),
        (2, False),
    ]
    assert fake_hub.delivered() == [(reporter.boot_id, 1), (reporter.boot_id, 2)]
    assert reporter.counters == DeliveryCounters(sent=1, spooled=1, replayed=1, duplicates=1)


async def test_a_restarted_agent_replays_the_earlier_boots_reports_first(
    hub_client: HubClient, fake_hub: FakeHub, tmp_path: Path
) -> None:
    directory = tmp_path / "spool"
    before = reporter_for(hub_client, Spool(directory, max_bytes=1_000_000))
    fake_hub.down = True
    for second in range(3):
        await before.submit(apps("a"), full_snapshot=second == 0, now=at(second))

    # The process ends; a new one opens the same directory with a new boot id.
    after = reporter_for(hub_client, Spool(directory, max_bytes=1_000_000))
    assert after.pending == 3
    fake_hub.down = False
    assert await after.submit(apps("a"), full_snapshot=True, now=at(60)) is Outcome.SENT

    assert fake_hub.delivered() == [
        (before.boot_id, 1),
        (before.boot_id, 2),
        (before.boot_id, 3),
        (after.boot_id, 1),
    ]
    assert after.counters == DeliveryCounters(sent=1, replayed=3)


async def test_snapshots_compact_the_spool_during_a_long_outage(
    hub_client: HubClient, fake_hub: FakeHub, tmp_path: Path
) -> None:
    fleet = apps("a", "b", "c", "d")
    snapshot_bytes = 1_000 + 4 * len(fleet[0].model_dump_json())
    reporter = reporter_for(hub_client, Spool(tmp_path / "spool", max_bytes=3 * snapshot_bytes))
    fake_hub.down = True
    sequence = 0
    for hour in range(6):
        await reporter.submit(fleet, full_snapshot=True, now=at(hour * 3600))
        await reporter.submit(apps("a"), full_snapshot=False, now=at(hour * 3600 + 60))
        sequence += 2
    fake_hub.down = False

    with capture_logs() as logs:
        assert await reporter.flush(at(6 * 3600)) == 0

    counters = reporter.counters
    assert counters.compacted > 0
    assert counters.spooled == sequence
    assert counters.replayed + counters.compacted == sequence
    delivered = [number for _, number in fake_hub.delivered()]
    assert delivered == sorted(delivered)
    # The newest snapshot and the change after it always make it.
    assert delivered[-2:] == [sequence - 1, sequence]
    assert not any(entry["log_level"] == "error" for entry in logs)


async def test_a_full_spool_refuses_loudly(
    hub_client: HubClient, fake_hub: FakeHub, tmp_path: Path
) -> None:
    reporter = reporter_for(hub_client, Spool(tmp_path / "spool", max_bytes=2_000))
    fake_hub.down = True
    await reporter.submit(apps("a"), full_snapshot=True, now=at(0))

    with capture_logs() as logs:
        for second in range(1, 100):
            try:
                await reporter.submit(apps("a"), full_snapshot=False, now=at(second))
            except SpoolFull:
                break
        else:
            pytest.fail("the spool never filled up")

    assert reporter.counters.refused == 1
    (lost,) = [entry for entry in logs if entry["event"].startswith("report lost")]
    assert lost["log_level"] == "error"
    assert lost["sequence"] == reporter.sequence
    # What was spooled is all still there, in order, and goes out once the hub is back.
    fake_hub.down = False
    assert await reporter.flush(at(1000)) == 0
    assert [number for _, number in fake_hub.delivered()] == list(range(1, reporter.sequence))


async def test_a_corrupt_spool_file_is_counted_and_skipped(
    reporter: Reporter, fake_hub: FakeHub, spool: Spool
) -> None:
    fake_hub.down = True
    for second in range(3):
        await reporter.submit(apps("a"), full_snapshot=False, now=at(second))
    (spool.directory / next(iter(spool)).name).write_bytes(b"\x00\x00")
    fake_hub.down = False

    assert await reporter.flush(at(RETRY)) == 0

    assert [number for _, number in fake_hub.delivered()] == [2, 3]
    assert reporter.counters.corrupt == 1


async def test_a_report_interrupted_mid_send_is_kept(
    token_file: Path, spool: Spool, fake_hub: FakeHub
) -> None:
    arrived = asyncio.Event()

    async def stalls(request: httpx.Request) -> httpx.Response:
        arrived.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with HubClient(
        "http://hub.test", token_file=token_file, transport=httpx.MockTransport(stalls)
    ) as client:
        reporter = reporter_for(client, spool)
        sending = asyncio.create_task(reporter.submit(apps("a"), full_snapshot=True, now=at(0)))
        await arrived.wait()
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending

    assert [(entry.sequence, entry.full_snapshot) for entry in spool] == [(1, True)]
    assert reporter.counters.spooled == 1


async def test_a_report_interrupted_while_the_spool_replays_is_kept_behind_it(
    token_file: Path, spool: Spool, fake_hub: FakeHub
) -> None:
    stall = asyncio.Event()
    arrived = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        if stall.is_set():
            arrived.set()
            await asyncio.Event().wait()
        return fake_hub.handler(request)

    async with HubClient(
        "http://hub.test", token_file=token_file, transport=httpx.MockTransport(handler)
    ) as client:
        reporter = reporter_for(client, spool)
        fake_hub.down = True
        await reporter.submit(apps("a"), full_snapshot=True, now=at(0))
        fake_hub.down = False
        stall.set()
        sending = asyncio.create_task(
            reporter.submit(apps("b"), full_snapshot=False, now=at(RETRY))
        )
        await arrived.wait()
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending

    assert [entry.sequence for entry in spool] == [1, 2]
    assert fake_hub.delivered() == []


async def test_concurrent_submissions_keep_their_order(
    reporter: Reporter, fake_hub: FakeHub
) -> None:
    fake_hub.down = True
    await reporter.submit(apps("a"), full_snapshot=True, now=at(0))
    fake_hub.down = False

    await asyncio.gather(
        *(
            reporter.submit(apps(f"app-{n}"), full_snapshot=False, now=at(RETRY + n))
            for n in range(5)
        )
    )

    assert [number for _, number in fake_hub.delivered()] == [1, 2, 3, 4, 5, 6]


async def test_records_no_report_may_hold_use_no_sequence(
    reporter: Reporter, fake_hub: FakeHub
) -> None:
    with pytest.raises(ValidationError, match="more than once"):
        await reporter.submit(apps("a", "a"), full_snapshot=True, now=at(0))

    assert reporter.sequence == 0
    await reporter.submit(apps("a"), full_snapshot=True, now=at(1))
    assert fake_hub.delivered() == [(reporter.boot_id, 1)]


async def test_hub_warnings_are_logged_when_they_change(token_file: Path, spool: Spool) -> None:
    warnings = ["cluster.environment 'stage' ignored: the cluster is registered in 'dev'"]

    def handler(request: httpx.Request) -> httpx.Response:
        body = {"accepted": 1, "changed": 0, "duplicate": False, "warnings": warnings}
        return httpx.Response(200, json=body)

    async with HubClient(
        "http://hub.test", token_file=token_file, transport=httpx.MockTransport(handler)
    ) as client:
        reporter = reporter_for(client, spool)
        with capture_logs() as logs:
            for second in range(3):
                await reporter.submit(apps("a"), full_snapshot=False, now=at(second))

    logged = [entry for entry in logs if entry["event"].startswith("the hub accepted")]
    assert [entry["warnings"] for entry in logged] == [warnings]


# --- end to end, over real HTTP against the real hub -----------------------------------------


class DropsOneReply(httpx.AsyncBaseTransport):
    """A real HTTP transport that, when armed, lets the hub take one report and then loses
    the reply (running `then` first: the hub goes down before the agent can ask again)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.then: Callable[[], Awaitable[None]] | None = None
        self.lost: list[httpx.Response] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if self.then is None:
            return response
        then, self.then = self.then, None
        await response.aread()
        await response.aclose()
        self.lost.append(response)
        await then()
        raise httpx.ReadError("connection reset before the reply arrived", request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def live_reporter(
    hub: LiveHub, token_file: Path, spool: Spool, transport: httpx.AsyncBaseTransport
) -> tuple[HubClient, Reporter]:
    client = HubClient(
        hub.url, token_file=token_file, transport=transport, attempts=3, sleep=Sleeps()
    )
    identity = ClusterIdentity(name="drone-dev-1", environment="dev")
    return client, reporter_for(client, spool, cluster=identity)


def transitions_of(rows: list[dict[str, Any]]) -> list[tuple[str, datetime, str | None, bool]]:
    return [
        (row["name"], row["observed_at"], row["applied_revision"], row["removed"]) for row in rows
    ]


async def test_end_to_end_every_record_arrives_once_across_a_hub_outage(
    live_hub: LiveHub, hub_engine: AsyncEngine, tmp_path: Path
) -> None:
    await asyncio.to_thread(live_hub.start)
    token_file = tmp_path / "token"
    write_token(token_file, await register_cluster(hub_engine, "drone-dev-1", "dev"))
    transport = DropsOneReply()
    spool = Spool(tmp_path / "spool", max_bytes=1_000_000)
    client, reporter = await live_reporter(live_hub, token_file, spool, transport)

    async with client:
        # The hub is up: a snapshot and a change go straight in.
        fleet = {"a": record("a", V1), "b": record("b", V1), "c": record("c", V1)}
        sent = await reporter.submit(fleet.values(), full_snapshot=True, now=at(0))
        fleet["b"] = record("b", V2)
        assert (sent, await reporter.submit([fleet["b"]], full_snapshot=False, now=at(10))) == (
            Outcome.SENT,
            Outcome.SENT,
        )

        # The hub takes report 3, then goes down before its reply reaches the agent.
        async def hub_goes_down() -> None:
            await asyncio.to_thread(live_hub.stop)

        transport.then = hub_goes_down
        fleet["c"] = record("c", V2)
        assert await reporter.submit([fleet["c"]], full_snapshot=False, now=at(20)) == (
            Outcome.SPOOLED
        )
        assert [response.status_code for response in transport.lost] == [200]

        # Changes keep coming while the hub is down; they spool.
        fleet["a"] = record("a", V2, ready=False, reason="HealthCheckFailed")
        await reporter.submit([fleet["a"]], full_snapshot=False, now=at(30))
        fleet["a"] = record("a", V3)
        await reporter.submit([fleet["a"]], full_snapshot=False, now=at(40))
        fleet["d"] = record("d", V1)
        await reporter.submit(fleet.values(), full_snapshot=True, now=at(50))
        del fleet["c"]
        await reporter.submit(fleet.values(), full_snapshot=True, now=at(60))
        assert reporter.pending == 5

        # The hub comes back; the spool is replayed, report 3 first.
        await asyncio.to_thread(live_hub.start)
        assert await reporter.flush(at(3600)) == 0

    assert reporter.counters == DeliveryCounters(sent=2, spooled=5, replayed=5, duplicates=1)
    # The hub's own counts: seven reports taken once each, one replay answered as a duplicate.
    assert (live_hub.reports("accepted"), live_hub.reports("duplicate")) == (7.0, 1.0)

    async with AsyncSession(hub_engine) as session:
        store = Store(session)
        transitions = transitions_of(await store.transitions("drone-dev-1"))
        objects = await store.objects("drone-dev-1")
        (agent_session,) = (await store.agent_sessions("drone-dev-1")).values()
        heartbeats = await store.heartbeats("drone-dev-1")

    assert transitions == [
        ("a", at(0), V1, False),
        ("b", at(0), V1, False),
        ("c", at(0), V1, False),
        ("b", at(10), V2, False),
        ("c", at(20), V2, False),
        ("a", at(30), V2, False),
        ("a", at(40), V3, False),
        ("d", at(50), V1, False),
        ("c", at(60), V2, True),
    ]
    assert {name: row["applied_revision"] for name, row in objects.items()} == {
        "a": V3,
        "b": V2,
        "c": V2,
        "d": V1,
    }
    assert objects["c"]["removed_at"] == at(60)
    assert objects["a"]["ready"] is True
    assert (agent_session["boot_id"], agent_session["max_sequence"]) == (reporter.boot_id, 7)
    assert agent_session["report_count"] == 7
    assert sum(row["report_count"] for row in heartbeats) == 7


async def test_end_to_end_a_restarted_agent_delivers_its_earlier_boots_spool_first(
    live_hub: LiveHub, hub_engine: AsyncEngine, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    write_token(token_file, await register_cluster(hub_engine, "drone-dev-1", "dev"))
    directory = tmp_path / "spool"

    # The first agent process reports while the hub is not running yet, then stops.
    client, before = await live_reporter(
        live_hub, token_file, Spool(directory, max_bytes=1_000_000), httpx.AsyncHTTPTransport()
    )
    async with client:
        await before.submit([record("a", V1)], full_snapshot=True, now=at(0))
        await before.submit([record("a", V2)], full_snapshot=False, now=at(10))
    assert before.counters == DeliveryCounters(spooled=2)

    # A new process starts (new boot id, same spool); by now the hub is up.
    await asyncio.to_thread(live_hub.start)
    client, after = await live_reporter(
        live_hub, token_file, Spool(directory, max_bytes=1_000_000), httpx.AsyncHTTPTransport()
    )
    async with client:
        outcome = await after.submit([record("a", V3)], full_snapshot=True, now=at(20))

    assert outcome is Outcome.SENT
    assert after.counters == DeliveryCounters(sent=1, replayed=2)
    async with AsyncSession(hub_engine) as session:
        store = Store(session)
        transitions = transitions_of(await store.transitions("drone-dev-1"))
        sessions = await store.agent_sessions("drone-dev-1")

    assert transitions == [
        ("a", at(0), V1, False),
        ("a", at(10), V2, False),
        ("a", at(20), V3, False),
    ]
    assert {boot: row["max_sequence"] for boot, row in sessions.items()} == {
        before.boot_id: 2,
        after.boot_id: 1,
    }
    assert live_hub.reports("duplicate") == 0.0
    assert TOKEN not in token_file.read_text()


# --- full snapshots over the hub's limit -------------------------------------------------------


def fleet_of(count: int, revision: str = V1) -> list[ObjectRecord]:
    return [record(f"app-{index:05d}", revision) for index in range(count)]


def kept_aside(spool: Spool) -> list[Path]:
    return sorted((spool.directory / "rejected").iterdir())


async def test_a_snapshot_over_the_hubs_limit_goes_in_parts_under_it(
    reporter: Reporter, fake_hub: FakeHub, hub_client: HubClient
) -> None:
    fake_hub.max_report_bytes = 20_000
    await reporter.submit(apps("a"), full_snapshot=False, now=at(0))  # the hub states its limit
    assert hub_client.max_report_bytes == 20_000

    outcome = await reporter.submit(fleet_of(100), full_snapshot=True, now=at(1))

    assert outcome is Outcome.SENT
    parts = [fake_hub.taken[key] for key in fake_hub.delivered()[1:]]
    assert len(parts) > 1
    assert all(len(part.to_json()) <= 20_000 * 0.9 for part in parts)
    assert [part.sequence for part in parts] == list(range(2, 2 + len(parts)))
    places = [part.snapshot_part for part in parts]
    assert len({place.id for place in places if place}) == 1
    assert [(place.index, place.count) for place in places if place] == [
        (index, len(parts)) for index in range(len(parts))
    ]
    assert not any(part.full_snapshot for part in parts)
    assert [record.name for part in parts for record in part.objects] == [
        record.name for record in fleet_of(100)
    ]


async def test_a_snapshot_refused_as_too_large_is_sent_again_in_parts(
    reporter: Reporter, fake_hub: FakeHub, spool: Spool
) -> None:
    # The agent does not know the hub's limit yet (it assumes 4 MiB), and the hub is away.
    fake_hub.down = True
    await reporter.submit(fleet_of(100), full_snapshot=True, now=at(0))
    await reporter.submit(apps("late"), full_snapshot=False, now=at(1))
    fake_hub.down, fake_hub.max_report_bytes = False, 20_000

    assert await reporter.flush(at(RETRY)) == 0

    delivered = [fake_hub.taken[key] for key in fake_hub.delivered()]
    # The refused snapshot's parts go behind what was spooled after it.
    assert delivered[0].objects[0].name == "late"
    parts = delivered[1:]
    assert len(parts) > 1
    assert all(part.snapshot_part for part in parts)
    assert sum(len(part.objects) for part in parts) == 100
    assert kept_aside(spool) == []
    assert reporter.counters == DeliveryCounters(
        spooled=2 + len(parts), replayed=1 + len(parts), split=1
    )


async def test_a_report_that_cannot_be_split_under_the_limit_is_rejected(
    reporter: Reporter, fake_hub: FakeHub, spool: Spool
) -> None:
    fake_hub.max_report_bytes = 600

    outcome = await reporter.submit(apps("a"), full_snapshot=True, now=at(0))

    assert outcome is Outcome.REJECTED
    assert len(kept_aside(spool)) == 2  # the report and its reason
    assert reporter.counters == DeliveryCounters(rejected=1)


async def test_end_to_end_deletions_in_a_large_cluster_reach_the_hub_in_parts(
    live_hub: LiveHub, hub_engine: AsyncEngine, tmp_path: Path
) -> None:
    live_hub.settings["max_report_bytes"] = 32_768
    await asyncio.to_thread(live_hub.start)
    token_file = tmp_path / "token"
    write_token(token_file, await register_cluster(hub_engine, "drone-dev-1", "dev"))
    spool = Spool(tmp_path / "spool", max_bytes=10_000_000)
    client, reporter = await live_reporter(live_hub, token_file, spool, httpx.AsyncHTTPTransport())
    fleet = fleet_of(400)

    async with client:
        # The first snapshot is refused whole (the agent assumes 4 MiB): it learns the limit.
        assert await reporter.submit(fleet, full_snapshot=True, now=at(0)) is Outcome.SENT
        assert client.max_report_bytes == 32_768
        # Ten objects are deleted from the cluster; the next snapshot goes in parts at once.
        assert await reporter.submit(fleet[10:], full_snapshot=True, now=at(300)) is Outcome.SENT

    async with AsyncSession(hub_engine) as session:
        objects = await Store(session).objects("drone-dev-1")

    assert len(objects) == 400
    gone = {name for name, row in objects.items() if row["removed_at"] is not None}
    assert gone == {record.name for record in fleet[:10]}
    assert all(objects[name]["removed_at"] == at(300) for name in gone)
    assert reporter.counters.split == 1
    assert reporter.counters.rejected == 0
    # Every report but the one refused as too large (sequence 1) was taken.
    assert live_hub.reports("accepted") == reporter.sequence - 1
