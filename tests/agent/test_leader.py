"""Leader election: two agent pods and one Lease on the local API server, time moved by hand."""

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from agent.client import HubClient
from agent.kube import ClusterReader, LeaseRecord
from agent.leader import LeaderElector
from agent.runner import AgentRunner
from agent.settings import AgentSettings
from tests.agent import examples
from tests.agent.apiserver import FakeApiServer, served, until
from tests.agent.conftest import TOKEN, FakeHub
from tests.support import FakeClock

NAMESPACE = "fleetmark"
LEASE = "fleetmark-agent"
DURATION = timedelta(seconds=15)
DEADLINE = timedelta(seconds=10)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def reader(api: FakeApiServer) -> Iterator[ClusterReader]:
    reader = ClusterReader.connect(host=api.url, request_timeout=5)
    yield reader
    reader.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def candidate(reader: ClusterReader, clock: FakeClock, pod: str) -> LeaderElector:
    return LeaderElector(
        reader,
        namespace=NAMESPACE,
        name=LEASE,
        identity=pod,
        lease_duration=DURATION,
        renew_deadline=DEADLINE,
        clock=clock,
    )


async def test_the_first_candidate_creates_the_lease_and_leads(
    api: FakeApiServer, reader: ClusterReader, clock: FakeClock
) -> None:
    a, b = candidate(reader, clock, "pod-a"), candidate(reader, clock, "pod-b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert b.holder == "pod-a"
    lease = api.lease(NAMESPACE, LEASE)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "pod-a"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["spec"]["leaseTransitions"] == 0
    assert lease["spec"]["renewTime"] == "2026-11-22T12:02:30.000000Z"


async def test_a_standby_takes_over_when_the_leader_stops_renewing(
    api: FakeApiServer, reader: ClusterReader, clock: FakeClock
) -> None:
    a, b = candidate(reader, clock, "pod-a"), candidate(reader, clock, "pod-b")
    assert await a.try_acquire_or_renew()
    # The leader renews every few seconds; the standby sees the record change each time.
    for _ in range(3):
        clock.advance(seconds=5)
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
    last_seen_renewal = clock.now

    # pod-a's node dies: no more renewals. Within the lease duration pod-b keeps waiting…
    clock.advance(seconds=14)
    assert not await b.try_acquire_or_renew()
    # …and pod-a, had it survived cut off, stopped leading at its renew deadline, before that.
    assert not a.is_leader()

    clock.advance(seconds=2)
    assert clock.now - last_seen_renewal > DURATION
    assert await b.try_acquire_or_renew()
    lease = api.lease(NAMESPACE, LEASE)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "pod-b"
    assert lease["spec"]["leaseTransitions"] == 1

    # pod-a comes back: it finds pod-b leading and stands by.
    assert not await a.try_acquire_or_renew()
    assert a.holder == "pod-b"


async def test_the_leader_keeps_the_lease_while_it_renews(
    reader: ClusterReader, clock: FakeClock
) -> None:
    a, b = candidate(reader, clock, "pod-a"), candidate(reader, clock, "pod-b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    for _ in range(10):  # well past the lease duration in total
        clock.advance(seconds=4)
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()


async def test_a_leader_that_cannot_renew_steps_down_at_the_renew_deadline(
    api: FakeApiServer, reader: ClusterReader, clock: FakeClock
) -> None:
    a = candidate(reader, clock, "pod-a")
    assert await a.try_acquire_or_renew()
    api.fail(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases", 500, times=100)
    clock.advance(seconds=5)
    assert await a.try_acquire_or_renew()  # a failed renewal, still within the deadline
    assert a.last_error is not None
    clock.advance(seconds=6)
    assert not await a.try_acquire_or_renew()


async def test_two_candidates_racing_for_an_expired_lease_give_one_leader(
    api: FakeApiServer, reader: ClusterReader, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, a, b = (candidate(reader, clock, pod) for pod in ("pod-old", "pod-a", "pod-b"))
    assert await old.try_acquire_or_renew()
    assert not await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.advance(seconds=16)
    # Both read the expired Lease before either writes; the second write is refused (409).
    stale = await reader.read_lease(NAMESPACE, LEASE)

    async def read_as_before(namespace: str, name: str) -> LeaseRecord | None:
        return stale

    monkeypatch.setattr(reader, "read_lease", read_as_before)
    results = [await a.try_acquire_or_renew(), await b.try_acquire_or_renew()]
    assert results == [True, False]
    lease = api.lease(NAMESPACE, LEASE)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "pod-a"


async def test_release_lets_a_standby_take_over_at_once(
    reader: ClusterReader, clock: FakeClock
) -> None:
    a, b = candidate(reader, clock, "pod-a"), candidate(reader, clock, "pod-b")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert not a.is_leader()
    clock.advance(seconds=1)
    assert await b.try_acquire_or_renew()


async def test_a_restarted_leader_with_the_same_name_keeps_its_lease(
    reader: ClusterReader, clock: FakeClock
) -> None:
    assert await candidate(reader, clock, "pod-a").try_acquire_or_renew()
    clock.advance(seconds=3)
    assert await candidate(reader, clock, "pod-a").try_acquire_or_renew()


def test_the_renew_deadline_must_fall_inside_the_lease(reader: ClusterReader) -> None:
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaderElector(
            reader,
            namespace=NAMESPACE,
            name=LEASE,
            identity="pod-a",
            lease_duration=DURATION,
            renew_deadline=DURATION,
            clock=FakeClock(),
        )


async def test_a_leader_cut_off_from_its_lease_sends_nothing_once_another_pod_took_it_over(
    fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    with FakeApiServer(served("kustomizations")) as api:
        api.put("kustomizations", examples.kustomization())
        settings = AgentSettings(
            hub_url="http://hub.test",
            cluster_name="drone-dev-1",
            instance="pod-a",
            kinds="Kustomization",
            kube_host=api.url,
            spool_dir=tmp_path / "spool",
            lease_namespace=NAMESPACE,
            lease_name=LEASE,
            lease_duration=DURATION,
            renew_deadline=DEADLINE,
            health_host="127.0.0.1",
            health_port=0,
            min_interval=0,
            retry_period=0.05,
        )
        reader_a = ClusterReader.connect(host=api.url, request_timeout=5)
        reader_b = ClusterReader.connect(host=api.url, request_timeout=5)
        client = HubClient(
            "http://hub.test", token=TOKEN, transport=httpx.MockTransport(fake_hub.handler)
        )
        runner = AgentRunner(settings, clock=clock, reader=reader_a, client=client)
        task = asyncio.create_task(runner.run())
        try:
            await until(lambda: fake_hub.taken)
            ((boot_id, _),) = fake_hub.taken

            # pod-a's next renewal hangs (its node lost the API server, not the hub): its
            # watch loop goes on, and no round of the election comes back to stop it.
            stuck = asyncio.Event()

            async def hang(namespace: str, name: str) -> LeaseRecord | None:
                stuck.set()
                await asyncio.Event().wait()
                return None

            monkeypatch.setattr(reader_a, "read_lease", hang)
            async with asyncio.timeout(5):
                await stuck.wait()

            b = candidate(reader_b, clock, "pod-b")
            assert not await b.try_acquire_or_renew()
            clock.advance(seconds=16)
            assert await b.try_acquire_or_renew()  # pod-b leads from here on

            changed = examples.kustomization(applied=f"main@sha1:{examples.SHA_B}")
            api.put("kustomizations", changed)
            await until(lambda: runner.status().get("sequence") == 2)

            assert [sequence for boot, sequence in fake_hub.taken if boot == boot_id] == [1]
            assert runner.status()["pending"] == 1  # kept, not lost
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            reader_b.close()
    lease = api.lease(NAMESPACE, LEASE)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "pod-b"
