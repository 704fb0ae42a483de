"""The watch loop: what WatchState sends when; the loop and the runner against a local API."""

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.client import HubClient
from agent.kube import Backoff, ClusterReader
from agent.leader import LeaderElector
from agent.report import ObjectRecord
from agent.runner import AgentRunner, main
from agent.settings import AgentSettings
from agent.sources import WATCHED_KINDS, WatchedKind
from agent.watch import Emission, Placement, WatchLoop, WatchState, stream_name
from tests.agent import examples
from tests.agent.apiserver import FakeApiServer, served, until
from tests.agent.conftest import TOKEN, FakeHub
from tests.support import FakeClock

BOUND = 5.0  # seconds a real-I/O wait may take before the test fails
KIND = {kind.plural: kind for kind in WATCHED_KINDS}
KUSTOMIZATIONS = KIND["kustomizations"]
GIT_REPOSITORIES = KIND["gitrepositories"]
STREAMS = [stream_name(KUSTOMIZATIONS), stream_name(GIT_REPOSITORIES)]
ROOT = ("Kustomization", "flux-system", "flux-system")


def kustomization(name: str, revision: str = examples.SHA_A, **spec: Any) -> dict[str, Any]:
    obj = examples.kustomization(applied=f"dev@sha1:{revision}")
    obj["metadata"] = examples.metadata(name)
    obj["spec"]["sourceRef"] = {"kind": "GitRepository", "name": "flux-system"}
    obj["spec"]["path"] = f"./drone/{name}" if name != "flux-system" else "./drone"
    obj["spec"].update(spec)
    return obj


def git_repository(url: str = examples.GIT_URL, branch: str = "dev") -> dict[str, Any]:
    obj = examples.git_repository({"branch": branch})
    obj["metadata"] = examples.metadata("flux-system")
    obj["spec"]["url"] = url
    return obj


def names(emission: Emission) -> list[str]:
    return [f"{record.kind}/{record.name}" for record in emission.objects]


def new_state(clock: FakeClock, **options: Any) -> WatchState:
    settings: dict[str, Any] = {
        "now": clock(),
        "min_interval": timedelta(seconds=5),
        "snapshot_interval": timedelta(minutes=5),
        "root": ROOT,
    }
    return WatchState(STREAMS, **(settings | options))


def listed_state(clock: FakeClock, **options: Any) -> WatchState:
    """A state whose streams have listed two Kustomizations and the repository they follow."""
    state = new_state(clock, **options)
    state.listed(
        KUSTOMIZATIONS, None, [kustomization("flux-system"), kustomization("apps")], clock()
    )
    state.listed(GIT_REPOSITORIES, None, [git_repository()], clock())
    return state


# --- WatchState ----------------------------------------------------------------------------


def test_the_first_full_snapshot_waits_for_every_stream() -> None:
    clock = FakeClock()
    state = new_state(clock)
    state.listed(KUSTOMIZATIONS, None, [kustomization("apps")], clock())
    assert state.poll(clock()) is None
    assert state.waiting == {stream_name(GIT_REPOSITORIES)}

    state.listed(GIT_REPOSITORIES, None, [git_repository()], clock())
    emission = state.poll(clock())
    assert emission is not None
    assert emission.full_snapshot
    assert names(emission) == ["GitRepository/flux-system", "Kustomization/apps"]
    assert state.poll(clock()) is None


def test_records_carry_the_url_and_branch_of_the_repository_they_follow() -> None:
    clock = FakeClock()
    emission = listed_state(clock).poll(clock())
    assert emission is not None
    followed = {
        f"{record.kind}/{record.name}": (record.source.url, record.source.url_ref)
        for record in emission.objects
        if record.source
    }
    assert followed == {
        "GitRepository/flux-system": (examples.GIT_URL, None),
        "Kustomization/flux-system": (examples.GIT_URL, "dev"),
        "Kustomization/apps": (examples.GIT_URL, "dev"),
    }


def test_the_placement_is_inferred_from_the_root() -> None:
    clock = FakeClock()
    emission = listed_state(clock).poll(clock())
    assert emission is not None
    assert emission.placement == Placement("dev", "drone")


def test_changes_are_sent_at_most_every_min_interval_and_alone() -> None:
    clock = FakeClock()
    state = listed_state(clock)
    assert state.poll(clock()) is not None  # the first full snapshot

    clock.advance(seconds=1)
    state.changed(KUSTOMIZATIONS, None, "MODIFIED", kustomization("apps", examples.SHA_B), clock())
    assert state.poll(clock()) is None
    assert state.next_poll_at() == clock.now + timedelta(seconds=4)

    clock.advance(seconds=2)
    state.changed(KUSTOMIZATIONS, None, "ADDED", kustomization("infra"), clock())
    assert state.poll(clock()) is None

    clock.advance(seconds=2)
    emission = state.poll(clock())
    assert emission is not None
    assert not emission.full_snapshot
    assert names(emission) == ["Kustomization/apps", "Kustomization/infra"]
    assert emission.objects[0].applied_revision == f"dev@sha1:{examples.SHA_B}"
    assert state.poll(clock.advance(seconds=10)) is None


def test_an_event_that_changes_no_record_sends_nothing() -> None:
    clock = FakeClock()
    state = listed_state(clock)
    state.poll(clock())
    same = kustomization("apps")
    same["metadata"]["resourceVersion"] = "99999"
    same["status"]["lastHandledReconcileAt"] = "2026-11-22T12:01:00Z"
    state.changed(KUSTOMIZATIONS, None, "MODIFIED", same, clock())
    assert state.poll(clock.advance(seconds=10)) is None


def test_a_deletion_makes_the_next_report_a_full_snapshot() -> None:
    clock = FakeClock()
    state = listed_state(clock)
    state.poll(clock())
    clock.advance(seconds=10)
    state.changed(KUSTOMIZATIONS, None, "DELETED", kustomization("apps"), clock())
    emission = state.poll(clock())
    assert emission is not None
    assert emission.full_snapshot
    assert names(emission) == ["GitRepository/flux-system", "Kustomization/flux-system"]


def test_a_relist_without_an_object_is_a_deletion() -> None:
    clock = FakeClock()
    state = listed_state(clock)
    state.poll(clock())
    clock.advance(seconds=10)
    state.listed(KUSTOMIZATIONS, None, [kustomization("flux-system")], clock())
    emission = state.poll(clock())
    assert emission is not None
    assert emission.full_snapshot
    assert "Kustomization/apps" not in names(emission)


def test_a_full_snapshot_is_sent_every_snapshot_interval() -> None:
    clock = FakeClock()
    state = listed_state(clock)
    first = state.poll(clock())
    assert first is not None
    assert state.next_poll_at() == clock.now + timedelta(minutes=5)
    assert state.poll(clock.advance(minutes=4, seconds=59)) is None
    again = state.poll(clock.advance(seconds=1))
    assert again is not None
    assert again.full_snapshot
    assert again.objects == first.objects


MOVED = "https://github.com/contoso/platform-gitops-moved"


@pytest.mark.parametrize(
    ("repository", "followed"),
    [
        (git_repository(MOVED), (MOVED, "dev")),
        (git_repository(branch="main"), (examples.GIT_URL, "main")),
    ],
    ids=["url", "branch"],
)
def test_a_moved_repository_is_sent_with_the_kustomizations_that_follow_it(
    repository: dict[str, Any], followed: tuple[str, str]
) -> None:
    clock = FakeClock()
    state = listed_state(clock)
    state.poll(clock())
    state.changed(GIT_REPOSITORIES, None, "MODIFIED", repository, clock())
    emission = state.poll(clock.advance(seconds=5))
    assert emission is not None
    assert not emission.full_snapshot
    assert names(emission) == [
        "GitRepository/flux-system",
        "Kustomization/apps",
        "Kustomization/flux-system",
    ]
    assert [
        (record.source.url, record.source.url_ref)
        for record in emission.objects[1:]
        if record.source
    ] == [followed, followed]


def test_a_stream_that_never_lists_holds_back_full_snapshots_not_reports() -> None:
    clock = FakeClock()
    state = new_state(clock, sync_timeout=timedelta(seconds=30))
    state.listed(KUSTOMIZATIONS, None, [kustomization("apps")], clock())
    assert state.poll(clock.advance(seconds=29)) is None
    partial = state.poll(clock.advance(seconds=1))
    assert partial is not None
    assert not partial.full_snapshot  # the repositories are unknown: not all there is
    assert names(partial) == ["Kustomization/apps"]

    state.listed(GIT_REPOSITORIES, None, [git_repository()], clock())
    complete = state.poll(clock.advance(seconds=5))
    assert complete is not None
    assert complete.full_snapshot


def test_an_empty_cluster_still_sends_its_snapshot() -> None:
    clock = FakeClock()
    state = new_state(clock)
    state.listed(KUSTOMIZATIONS, None, [], clock())
    state.listed(GIT_REPOSITORIES, None, [], clock())
    emission = state.poll(clock())
    assert emission is not None
    assert emission.full_snapshot
    assert emission.objects == ()
    assert emission.placement == Placement()


def test_a_list_in_pages_takes_effect_at_its_last_page() -> None:
    clock = FakeClock()
    state = listed_state(clock)
    state.poll(clock())
    clock.advance(seconds=10)
    state.listed(KUSTOMIZATIONS, None, [kustomization("flux-system")], clock(), last=False)
    assert state.poll(clock()) is None  # the old set holds until the list is complete
    assert len(state) == 3
    state.listed(KUSTOMIZATIONS, None, [kustomization("infra")], clock(), first=False, last=False)
    state.listed(KUSTOMIZATIONS, None, [], clock(), first=False)
    emission = state.poll(clock())
    assert emission is not None
    assert emission.full_snapshot  # apps is gone
    assert names(emission) == [
        "GitRepository/flux-system",
        "Kustomization/flux-system",
        "Kustomization/infra",
    ]


def test_a_page_without_its_list_start_is_ignored() -> None:
    clock = FakeClock()
    state = new_state(clock)
    state.listed(KUSTOMIZATIONS, None, [kustomization("apps")], clock(), first=False)
    assert len(state) == 0
    assert stream_name(KUSTOMIZATIONS) in state.waiting


def test_namespaced_streams_keep_their_own_objects() -> None:
    clock = FakeClock()
    streams = [stream_name(KUSTOMIZATIONS, "team-a"), stream_name(KUSTOMIZATIONS, "team-b")]
    state = WatchState(
        streams, now=clock(), min_interval=timedelta(0), snapshot_interval=timedelta(minutes=5)
    )
    a = kustomization("apps")
    a["metadata"]["namespace"] = "team-a"
    b = kustomization("apps")
    b["metadata"]["namespace"] = "team-b"
    state.listed(KUSTOMIZATIONS, "team-a", [a], clock())
    state.listed(KUSTOMIZATIONS, "team-b", [b], clock())
    state.listed(KUSTOMIZATIONS, "team-a", [a], clock())  # a relist of one leaves the other
    assert len(state) == 2


def test_a_mapper_that_fails_costs_only_its_object() -> None:
    def broken(obj: Mapping[str, object], now: Any) -> ObjectRecord:
        raise RuntimeError("boom")

    broken_kind = WatchedKind("example.io", ("v1",), "things", "Thing", "flux", broken)
    clock = FakeClock()
    state = WatchState(
        [stream_name(broken_kind)],
        now=clock(),
        min_interval=timedelta(0),
        snapshot_interval=timedelta(minutes=5),
    )
    state.listed(broken_kind, None, [{"metadata": {"name": "x"}}], clock())
    assert state.mapping_errors == 1
    emission = state.poll(clock())
    assert emission is not None
    assert emission.objects == ()


# --- WatchLoop against the local API server ------------------------------------------------


class Sent:
    """The loop's `send`: keeps every emission for the test to look at."""

    def __init__(self) -> None:
        self.emissions: list[Emission] = []

    async def __call__(self, emission: Emission) -> None:
        self.emissions.append(emission)

    async def wait_for(self, count: int) -> list[Emission]:
        await until(lambda: len(self.emissions) >= count)
        return self.emissions


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(served("kustomizations", "gitrepositories", "helmreleases")) as server:
        server.put("gitrepositories", git_repository())
        server.put("kustomizations", kustomization("flux-system"))
        server.put("kustomizations", kustomization("apps"))
        yield server


@pytest.fixture
async def running(api: FakeApiServer) -> AsyncIterator[tuple[WatchLoop, Sent]]:
    reader = ClusterReader.connect(
        host=api.url, request_timeout=5, backoff=lambda: Backoff(0.01, 0.05)
    )
    sent = Sent()
    loop = WatchLoop(
        reader,
        WATCHED_KINDS,
        send=sent,
        clock=FakeClock(),
        min_interval=timedelta(0),
        snapshot_interval=timedelta(minutes=5),
        root=ROOT,
    )
    task = asyncio.create_task(loop.run())
    try:
        await sent.wait_for(1)
        yield loop, sent
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        reader.close()


async def test_the_loop_starts_with_a_full_snapshot_of_what_is_served(
    running: tuple[WatchLoop, Sent],
) -> None:
    loop, sent = running
    first = sent.emissions[0]
    assert first.full_snapshot
    assert names(first) == [
        "GitRepository/flux-system",
        "Kustomization/apps",
        "Kustomization/flux-system",
    ]
    assert first.placement == Placement("dev", "drone")
    assert loop.discovery is not None
    assert loop.discovery.describe_missing() == [
        "OCIRepository (ocirepositories.source.toolkit.fluxcd.io)",
        "Application (applications.argoproj.io)",
    ]


async def test_the_loop_sends_changes_and_deletions(
    api: FakeApiServer, running: tuple[WatchLoop, Sent]
) -> None:
    _, sent = running
    api.put("kustomizations", kustomization("apps", examples.SHA_B))
    change = (await sent.wait_for(2))[1]
    assert not change.full_snapshot
    assert names(change) == ["Kustomization/apps"]
    assert change.objects[0].applied_revision == f"dev@sha1:{examples.SHA_B}"

    api.delete("kustomizations", "flux-system", "apps")
    deletion = (await sent.wait_for(3))[2]
    assert deletion.full_snapshot
    assert "Kustomization/apps" not in names(deletion)


async def test_the_loop_relists_after_410_gone(
    api: FakeApiServer, running: tuple[WatchLoop, Sent]
) -> None:
    _, sent = running
    await until(lambda: api.open_watches >= 3)
    api.put_silently("kustomizations", kustomization("apps", examples.SHA_C))
    api.expire()
    change = (await sent.wait_for(2))[1]
    assert names(change) == ["Kustomization/apps"]
    assert change.objects[0].applied_revision == f"dev@sha1:{examples.SHA_C}"
    assert api.count("GET /apis/kustomize.toolkit.fluxcd.io/v1/kustomizations?", watch=False) == 2


async def test_the_loop_rewatches_after_a_dropped_connection(
    api: FakeApiServer, running: tuple[WatchLoop, Sent]
) -> None:
    loop, sent = running
    await until(lambda: api.open_watches >= 3)
    api.drop_watches()
    await until(lambda: len(loop.failing) == 3)
    api.put("kustomizations", kustomization("infra"))
    change = (await sent.wait_for(2))[1]
    assert names(change) == ["Kustomization/infra"]
    await until(lambda: not loop.failing.get(stream_name(KUSTOMIZATIONS)))
    assert api.count("GET /apis/kustomize.toolkit.fluxcd.io/v1/kustomizations?", watch=False) == 1


async def test_a_kind_installed_later_ends_the_loop_for_a_fresh_start(
    api: FakeApiServer,
) -> None:
    reader = ClusterReader.connect(host=api.url, request_timeout=5)
    clock = FakeClock()
    sent = Sent()
    loop = WatchLoop(
        reader,
        WATCHED_KINDS,
        send=sent,
        clock=clock,
        min_interval=timedelta(0),
        snapshot_interval=timedelta(minutes=5),
        rediscover_interval=timedelta(minutes=1),
    )
    task = asyncio.create_task(loop.run())
    try:
        await sent.wait_for(1)
        clock.advance(minutes=1)
        api.put("kustomizations", kustomization("wake-up"))  # the loop looks again
        await sent.wait_for(2)
        await until(lambda: api.count("GET /apis/argoproj.io/v1alpha1") >= 2)
        assert not task.done()  # still not served: the loop goes on

        api.serve(served("applications")[0])
        clock.advance(minutes=1)
        api.put("kustomizations", kustomization("wake-up", examples.SHA_B))
        async with asyncio.timeout(BOUND):
            await task  # returns, for the runner to start a loop that watches Applications
    finally:
        task.cancel()
        reader.close()


# --- the runner: lease, loop, reporter and probes together ---------------------------------


async def probe(port: int, path: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.get(f"http://127.0.0.1:{port}{path}", timeout=BOUND)


async def test_the_runner_leads_reports_and_answers_probes(
    api: FakeApiServer, fake_hub: FakeHub, tmp_path: Path
) -> None:
    settings = AgentSettings(
        hub_url="http://hub.test",
        cluster_name="drone-dev-1",
        labels="region=east-us",
        instance="fleetmark-agent-abcde",
        kube_host=api.url,
        spool_dir=tmp_path / "spool",
        lease_namespace="fleetmark",
        health_host="127.0.0.1",
        health_port=0,
        min_interval=0,
        retry_period=0.05,
    )
    client = HubClient(
        "http://hub.test", token=TOKEN, transport=httpx.MockTransport(fake_hub.handler)
    )
    runner = AgentRunner(settings, client=client)
    task = asyncio.create_task(runner.run())
    try:
        await until(lambda: fake_hub.taken)
        (report,) = fake_hub.taken.values()
        assert report.full_snapshot
        assert report.sequence == 1
        assert report.cluster.name == "drone-dev-1"
        assert (report.cluster.environment, report.cluster.cluster_type) == ("dev", "drone")
        assert report.cluster.labels == {"region": "east-us"}
        assert report.agent.instance == "fleetmark-agent-abcde"
        assert len(report.objects) == 3
        # The cluster has no OCIRepository or Application CRD: the report says so.
        assert [(kind.kind, kind.api_group) for kind in report.skipped_kinds] == [
            ("OCIRepository", "source.toolkit.fluxcd.io"),
            ("Application", "argoproj.io"),
        ]
        assert "CustomResourceDefinition is absent" in report.skipped_kinds[0].reason

        api.put("kustomizations", kustomization("apps", examples.SHA_B))
        await until(lambda: len(fake_hub.taken) == 2)

        # The root moves to another cluster type's folder: the same agent boot goes on
        # reporting, under the new placement.
        api.put("kustomizations", kustomization("flux-system", path="./large"))
        await until(lambda: len(fake_hub.taken) == 3)
        moved = fake_hub.taken[(report.agent.boot_id, 3)]
        assert (moved.cluster.environment, moved.cluster.cluster_type) == ("dev", "large")

        ready = await probe(runner.health.port, "/readyz")
        assert ready.status_code == 200
        assert ready.json()["role"] == "leader"
        assert ready.json()["objects"] == 3
        assert ready.json()["delivery"]["sent"] == 3
        assert (await probe(runner.health.port, "/healthz")).status_code == 200
        assert (await probe(runner.health.port, "/nope")).status_code == 404
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    lease = api.lease("fleetmark", "fleetmark-agent")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == ""  # released on the way out


async def test_a_standby_runner_waits_then_takes_over_from_a_silent_leader(
    api: FakeApiServer, fake_hub: FakeHub, tmp_path: Path
) -> None:
    settings = AgentSettings(
        hub_url="http://hub.test",
        cluster_name="drone-dev-1",
        instance="fleetmark-agent-standby",
        kube_host=api.url,
        spool_dir=tmp_path / "spool",
        lease_namespace="fleetmark",
        health_host="127.0.0.1",
        health_port=0,
        retry_period=0.05,
    )
    clock = FakeClock()
    # Another pod holds the Lease, renewed once, then never again (its node died).
    holder = ClusterReader.connect(host=api.url)
    leader = LeaderElector(
        holder,
        namespace="fleetmark",
        name="fleetmark-agent",
        identity="fleetmark-agent-leader",
        lease_duration=settings.lease_duration,
        renew_deadline=settings.renew_deadline,
        clock=clock,
    )
    assert await leader.try_acquire_or_renew()
    holder.close()
    client = HubClient(
        "http://hub.test", token=TOKEN, transport=httpx.MockTransport(fake_hub.handler)
    )
    runner = AgentRunner(settings, client=client, clock=clock)
    task = asyncio.create_task(runner.run())
    try:
        await until(lambda: api.count("GET /apis/coordination.k8s.io") >= 3)
        ready = await probe(runner.health.port, "/readyz")
        assert ready.status_code == 200
        assert ready.json()["role"] == "standby"
        assert ready.json()["holder"] == "fleetmark-agent-leader"
        clock.advance(seconds=14)
        reads = api.count("GET /apis/coordination.k8s.io")
        await until(lambda: api.count("GET /apis/coordination.k8s.io") >= reads + 3)
        assert api.count("GET /apis/kustomize.toolkit.fluxcd.io") == 0
        assert fake_hub.taken == {}

        clock.advance(seconds=2)  # past the lease duration since the record last changed
        await until(lambda: fake_hub.taken)
        (report,) = fake_hub.taken.values()
        assert report.full_snapshot
        assert report.agent.instance == "fleetmark-agent-standby"
        lease = api.lease("fleetmark", "fleetmark-agent")
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "fleetmark-agent-standby"
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_on_a_host_without_kubernetes_the_state_file_is_reported(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    state_file = tmp_path / "state.yaml"
    state_file.write_text(
        "objects:\n"
        "  - kind: Playbook\n"
        "    name: site\n"
        f'    applied_revision: "main@sha1:{examples.SHA_A}"\n'
        "    ready: true\n"
    )
    settings = AgentSettings(
        hub_url="http://hub.test",
        cluster_name="vm-web-1",
        environment="dev",
        cluster_type="vms",
        state_file=state_file,
        spool_dir=tmp_path / "spool",
        health_host="127.0.0.1",
        health_port=0,
    )
    client = HubClient(
        "http://hub.test", token=TOKEN, transport=httpx.MockTransport(fake_hub.handler)
    )
    task = asyncio.create_task(AgentRunner(settings, client=client).run())
    try:
        await until(lambda: fake_hub.taken)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    (report,) = fake_hub.taken.values()
    assert report.full_snapshot
    assert (report.cluster.environment, report.cluster.cluster_type) == ("dev", "vms")
    assert [(r.reconciler, r.kind, r.name, r.ready) for r in report.objects] == [
        ("generic", "Playbook", "site", True)
    ]


# --- settings ------------------------------------------------------------------------------


def test_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    environment = {
        "FLEETMARK_AGENT_HUB_URL": "https://fleetmark.example.com",
        "FLEETMARK_AGENT_CLUSTER_NAME": "drone-dev-1",
        "FLEETMARK_AGENT_LABELS": "region=east-us, size=large",
        "FLEETMARK_AGENT_NAMESPACES": "flux-system, argocd",
        "FLEETMARK_AGENT_KINDS": "kustomizations,Application",
        "FLEETMARK_AGENT_MIN_INTERVAL": "2.5",
        "FLEETMARK_AGENT_SNAPSHOT_INTERVAL": "PT10M",
        "FLEETMARK_AGENT_LEASE_DURATION": "20",
        "FLEETMARK_AGENT_LEADER_ELECTION": "false",
        "FLEETMARK_AGENT_SPOOL_DIR": str(tmp_path),
    }
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings = AgentSettings()
    assert settings.labels == {"region": "east-us", "size": "large"}
    assert settings.namespaces == ["flux-system", "argocd"]
    assert [kind.kind for kind in settings.watched_kinds] == ["Kustomization", "Application"]
    assert settings.min_interval == timedelta(seconds=2.5)
    assert settings.snapshot_interval == timedelta(minutes=10)
    assert settings.lease_duration == timedelta(seconds=20)
    assert settings.leader_election is False
    assert settings.root == ("Kustomization", "flux-system", "flux-system")


def test_settings_take_json_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETMARK_AGENT_LABELS", '{"region": "west-us"}')
    monkeypatch.setenv("FLEETMARK_AGENT_NAMESPACES", '["apps"]')
    settings = AgentSettings(hub_url="http://hub.test", cluster_name="c")
    assert settings.labels == {"region": "west-us"}
    assert settings.namespaces == ["apps"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kinds": "Deployment"}, "unknown kind"),
        ({"root_object": "flux-system"}, "Kind/namespace/name"),
        ({"renew_deadline": 20}, "renew_deadline must be shorter"),
        ({"retry_period": 12}, "retry_period must be shorter"),
        ({"hub_timeout": 10}, "hub_timeout must be shorter than renew_deadline"),
        ({"hub_timeout": 8, "renew_deadline": 7}, "hub_timeout must be shorter than renew_d"),
        ({"labels": "region"}, "expected key=value"),
        ({"environment": "x" * 64}, "at most 63"),
    ],
)
def test_settings_refuse_what_cannot_work(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AgentSettings(hub_url="http://hub.test", cluster_name="c", **overrides)


def test_without_leader_election_the_hub_timeout_is_free() -> None:
    settings = AgentSettings(
        hub_url="http://hub.test", cluster_name="c", leader_election=False, hub_timeout=30
    )
    assert settings.hub_timeout == timedelta(seconds=30)


def test_missing_settings_are_named_by_their_variables(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("FLEETMARK_AGENT_HUB_URL", raising=False)
    monkeypatch.delenv("FLEETMARK_AGENT_CLUSTER_NAME", raising=False)
    assert main() == 2
    errors = capsys.readouterr().err
    assert "FLEETMARK_AGENT_HUB_URL: Field required" in errors
    assert "FLEETMARK_AGENT_CLUSTER_NAME: Field required" in errors
