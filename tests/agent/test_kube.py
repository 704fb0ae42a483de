"""ClusterReader against a local server speaking the Kubernetes list/watch protocol."""

import asyncio
import random
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from agent import kube
from agent.kube import (
    Backoff,
    ClusterReader,
    KubeError,
    LeaseConflict,
    LeaseRecord,
    Listed,
    ServedKind,
    StreamFailed,
    StreamItem,
    Watcher,
    WatchEvent,
)
from agent.sources import WATCHED_KINDS
from tests.agent import examples
from tests.agent.apiserver import FakeApiServer, Resource, served, until
from tests.support import START

KUSTOMIZATIONS = "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations"
BOUND = 5.0  # seconds a real-I/O wait may take before the test fails


def kind(plural: str) -> Any:
    return next(kind for kind in WATCHED_KINDS if kind.plural == plural)


def kustomization(name: str, namespace: str = "flux-system", **changes: Any) -> dict[str, Any]:
    obj = examples.kustomization(**changes)
    obj["metadata"] = examples.metadata(name, namespace)
    return obj


def quick_backoff() -> Backoff:
    return Backoff(base=0.01, cap=0.05)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(served("kustomizations", "gitrepositories")) as server:
        yield server


@pytest.fixture
def reader(api: FakeApiServer) -> Iterator[ClusterReader]:
    reader = ClusterReader.connect(host=api.url, backoff=quick_backoff, request_timeout=5)
    yield reader
    reader.close()


async def next_item(watcher: Watcher) -> StreamItem:
    async with asyncio.timeout(BOUND):
        return await watcher.get()


async def next_of(watcher: Watcher, wanted: type[Any]) -> Any:
    """The next item of type `wanted`, skipping any others (e.g. StreamFailed)."""
    while not isinstance(item := await next_item(watcher), wanted):
        pass
    return item


async def test_discovery_picks_the_newest_served_version_and_names_missing_kinds() -> None:
    resources = [
        Resource("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "Kustomization"),
        Resource("helm.toolkit.fluxcd.io", "v2beta1", "helmreleases", "HelmRelease"),
    ]
    with FakeApiServer(resources) as api:
        reader = ClusterReader.connect(host=api.url)
        try:
            discovery = await reader.discover(WATCHED_KINDS)
        finally:
            reader.close()
    assert [(s.kind.plural, s.version) for s in discovery.served] == [
        ("kustomizations", "v1"),
        ("helmreleases", "v2beta1"),
    ]
    assert [kind.plural for kind in discovery.missing] == [
        "gitrepositories",
        "ocirepositories",
        "applications",
    ]
    assert discovery.describe_missing()[-1] == "Application (applications.argoproj.io)"
    # v2 and v2beta2 were asked for first and answered 404.
    assert api.count("GET /apis/helm.toolkit.fluxcd.io/v2beta2") == 1


async def test_discovery_failure_is_a_kube_error(api: FakeApiServer, reader: ClusterReader) -> None:
    api.fail("/apis/kustomize.toolkit.fluxcd.io/v1", 403)
    with pytest.raises(KubeError, match="403") as raised:
        await reader.discover(WATCHED_KINDS)
    assert raised.value.status == 403


async def test_list_reads_every_page(
    api: FakeApiServer, reader: ClusterReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube, "LIST_PAGE_SIZE", 2)
    for index in range(5):
        api.put("kustomizations", kustomization(f"app-{index}"))
    listed = await asyncio.to_thread(
        reader.list_objects, ServedKind(kind("kustomizations"), "v1"), None
    )
    assert [item["metadata"]["name"] for item in listed.items] == [f"app-{i}" for i in range(5)]
    assert listed.resource_version == "1005"
    assert api.count(f"GET {KUSTOMIZATIONS}?", watch=False) == 3


async def test_a_stream_hands_its_list_over_page_by_page(
    api: FakeApiServer, reader: ClusterReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube, "LIST_PAGE_SIZE", 2)
    for index in range(5):
        api.put("kustomizations", kustomization(f"app-{index}"))
    async with reader.watch([ServedKind(kind("kustomizations"), "v1")]) as watcher:
        pages = [await next_of(watcher, Listed) for _ in range(3)]
    assert [(page.first, page.last, len(page.items)) for page in pages] == [
        (True, False, 2),
        (False, False, 2),
        (False, True, 1),
    ]
    assert [page.resource_version for page in pages] == [None, None, "1005"]


async def test_a_stream_lists_then_watches_from_the_lists_resource_version(
    api: FakeApiServer, reader: ClusterReader
) -> None:
    api.put("kustomizations", kustomization("apps"))
    served_kind = ServedKind(kind("kustomizations"), "v1")
    async with reader.watch([served_kind]) as watcher:
        listed = await next_item(watcher)
        assert isinstance(listed, Listed)
        assert [item["metadata"]["name"] for item in listed.items] == ["apps"]

        api.put("kustomizations", kustomization("infra"))
        api.put("kustomizations", kustomization("apps", applied=f"main@sha1:{examples.SHA_B}"))
        api.delete("kustomizations", "flux-system", "infra")
        events = [await next_item(watcher) for _ in range(3)]
    assert [
        (e.type, e.object["metadata"]["name"]) for e in events if isinstance(e, WatchEvent)
    ] == [
        ("ADDED", "infra"),
        ("MODIFIED", "apps"),
        ("DELETED", "infra"),
    ]
    assert api.count(f"GET {KUSTOMIZATIONS}?", watch=True) == 1
    watch_request = next(line for line in api.requests if "watch=" in line)
    assert f"resourceVersion={listed.resource_version}" in watch_request
    assert "allowWatchBookmarks=true" in watch_request


async def test_410_gone_starts_over_with_a_fresh_list(
    api: FakeApiServer, reader: ClusterReader
) -> None:
    api.put("kustomizations", kustomization("apps"))
    async with reader.watch([ServedKind(kind("kustomizations"), "v1")]) as watcher:
        first = await next_of(watcher, Listed)
        await _watching(api)
        # A change whose event the server no longer has, then the watch expires.
        api.put_silently("kustomizations", kustomization("infra"))
        api.expire()
        second = await next_of(watcher, Listed)
        api.put("kustomizations", kustomization("late"))
        event = await next_of(watcher, WatchEvent)
    assert [item["metadata"]["name"] for item in first.items] == ["apps"]
    assert [item["metadata"]["name"] for item in second.items] == ["apps", "infra"]
    assert int(second.resource_version) > int(first.resource_version)
    assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "late")
    assert api.count(f"GET {KUSTOMIZATIONS}?", watch=False) == 2


async def test_a_dropped_connection_resumes_the_watch_without_listing_again(
    api: FakeApiServer, reader: ClusterReader
) -> None:
    async with reader.watch([ServedKind(kind("kustomizations"), "v1")]) as watcher:
        await next_of(watcher, Listed)
        api.put("kustomizations", kustomization("apps"))
        added = await next_of(watcher, WatchEvent)
        api.drop_watches()
        failed = await next_of(watcher, StreamFailed)
        api.put("kustomizations", kustomization("infra"))
        after = await next_of(watcher, WatchEvent)
    assert "stream broke" in failed.error
    assert after.object["metadata"]["name"] == "infra"
    assert api.count(f"GET {KUSTOMIZATIONS}?", watch=False) == 1
    rewatch = [line for line in api.requests if "watch=" in line][-1]
    assert f"resourceVersion={added.object['metadata']['resourceVersion']}" in rewatch


async def test_a_bookmark_moves_the_resource_version_on(
    api: FakeApiServer, reader: ClusterReader
) -> None:
    async with reader.watch([ServedKind(kind("kustomizations"), "v1")]) as watcher:
        await next_of(watcher, Listed)
        await _watching(api)
        api.bookmark()
        bookmark_rv = api.resource_version
        await until(lambda: api.bookmarks_sent >= 1)
        api.drop_watches()
        await next_of(watcher, StreamFailed)
        api.put("kustomizations", kustomization("apps"))
        await next_of(watcher, WatchEvent)
    rewatch = [line for line in api.requests if "watch=" in line][-1]
    assert f"resourceVersion={bookmark_rv}" in rewatch


async def test_a_failing_list_is_retried_with_backoff(
    api: FakeApiServer, reader: ClusterReader
) -> None:
    api.fail(KUSTOMIZATIONS, 500, times=2)
    async with reader.watch([ServedKind(kind("kustomizations"), "v1")]) as watcher:
        failures = [await next_of(watcher, StreamFailed) for _ in range(2)]
        listed = await next_of(watcher, Listed)
    assert [failure.status for failure in failures] == [500, 500]
    assert all(0 < failure.retry_in <= 0.05 for failure in failures)
    assert listed.items == []
    assert watcher.failures == 2


async def test_a_list_that_is_gone_is_retried_after_a_pause(
    api: FakeApiServer, reader: ClusterReader
) -> None:
    # An expired continue token answers 410 too; listing again at once could spin.
    api.fail(KUSTOMIZATIONS, 410)
    async with reader.watch([ServedKind(kind("kustomizations"), "v1")]) as watcher:
        failed = await next_item(watcher)
        listed = await next_item(watcher)
    assert isinstance(failed, StreamFailed)
    assert failed.status == 410
    assert failed.retry_in > 0
    assert isinstance(listed, Listed)


async def test_namespaces_are_watched_one_by_one(api: FakeApiServer, reader: ClusterReader) -> None:
    api.put("kustomizations", kustomization("apps", "team-a"))
    api.put("kustomizations", kustomization("apps", "team-b"))
    api.put("kustomizations", kustomization("apps", "team-c"))
    streams = [ServedKind(kind("kustomizations"), "v1")]
    async with reader.watch(streams, ["team-a", "team-b"]) as watcher:
        lists = [await next_of(watcher, Listed) for _ in range(2)]
    found = {(item.namespace, obj["metadata"]["namespace"]) for item in lists for obj in item.items}
    assert found == {("team-a", "team-a"), ("team-b", "team-b")}
    assert api.count("GET /apis/kustomize.toolkit.fluxcd.io/v1/namespaces/team-a/") >= 1


async def test_stopping_ends_the_threads_promptly(
    api: FakeApiServer, reader: ClusterReader
) -> None:
    served_kinds = [ServedKind(kind(p), "v1") for p in ("kustomizations", "gitrepositories")]
    watcher = reader.watch(served_kinds)
    async with watcher:
        await next_of(watcher, Listed)
        await next_of(watcher, Listed)
        await _watching(api, 2)
        threads = list(watcher._threads)
    assert not any(thread.is_alive() for thread in threads)


def test_the_kubernetes_client_speaks_through_urllib3_itself() -> None:
    """urllib3-future (which niquests, and so grafana-client 4 and later, bring along) installs
    itself as `urllib3`: on it, the Kubernetes client's watches did not stop (the test above)."""
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.distribution("urllib3-future")


async def test_lease_create_read_update_and_conflict(reader: ClusterReader) -> None:
    record = LeaseRecord(holder="pod-a", duration_seconds=15, acquire_time=START, renew_time=START)
    created = await reader.create_lease("fleetmark", "agent", record)
    assert created == record
    assert created.resource_version is not None
    with pytest.raises(LeaseConflict):
        await reader.create_lease("fleetmark", "agent", record)

    read = await reader.read_lease("fleetmark", "agent")
    assert read == record
    assert await reader.read_lease("fleetmark", "other") is None

    renewed = LeaseRecord(
        holder="pod-a",
        duration_seconds=15,
        acquire_time=START,
        renew_time=START.replace(second=40),
        resource_version=created.resource_version,
    )
    updated = await reader.update_lease("fleetmark", "agent", renewed)
    assert updated.renew_time == renewed.renew_time
    with pytest.raises(LeaseConflict):  # written from a stale read
        await reader.update_lease("fleetmark", "agent", renewed)


def test_backoff_grows_with_jitter_up_to_its_cap() -> None:
    backoff = Backoff(base=1.0, cap=8.0, rng=random.Random(7))
    delays = [backoff.next() for _ in range(6)]
    for delay, ceiling in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert ceiling / 2 <= delay <= ceiling
    backoff.reset()
    assert backoff.next() <= 1.0


def test_without_any_configuration_connect_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeError, match="no Kubernetes configuration"):
        ClusterReader.connect(kubeconfig=tmp_path / "missing")


def test_connect_reads_a_kubeconfig(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        """
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://lab.example:6443"}}]
users: [{name: agent, user: {token: abc}}]
contexts: [{name: lab, context: {cluster: lab, user: agent}}]
current-context: lab
"""
    )
    reader = ClusterReader.connect(kubeconfig=config)
    try:
        assert reader.host == "https://lab.example:6443"
    finally:
        reader.close()


async def _watching(api: FakeApiServer, count: int = 1) -> None:
    await until(lambda: api.open_watches >= count)
