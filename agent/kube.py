"""The agent's one door to the Kubernetes API server: discovery, list+watch, and Leases.

The watch loop (agent.watch) gets the reconciler objects from here, and leader election
(agent.leader) its Lease; nothing else in the agent imports `kubernetes`. How streams run and
recover is in docs/contributing.md ("Inside the agent").
"""

import asyncio
import concurrent.futures
import random
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import orjson
import structlog
import urllib3
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration, CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from agent.report import SkippedKind
from agent.sources import WatchedKind

__all__ = [
    "Backoff",
    "ClusterReader",
    "Discovery",
    "KubeError",
    "LeaseConflict",
    "LeaseRecord",
    "Listed",
    "ResourceGone",
    "ServedKind",
    "StreamFailed",
    "WatchEvent",
    "Watcher",
]

log = structlog.get_logger("agent.kube")

LEASE_GROUP = "coordination.k8s.io"
LEASE_VERSION = "v1"
# Small pages: each is mapped, and its raw objects dropped, before many more are read; the
# peak of a (re)list, which the allocator keeps as RSS, stays small. Costs requests, not memory.
LIST_PAGE_SIZE = 50
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")
# Items (list pages, events) read but not yet taken by the event loop, over all streams.
QUEUE_SIZE = 8


class KubeError(Exception):
    """A request to the API server failed; `status` is its HTTP status when it got one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ResourceGone(KubeError):
    """410 Gone: the resourceVersion (or continue token) is too old; list again."""


class LeaseConflict(KubeError):
    """The Lease changed (or was created) since it was read: someone else got there first."""


@dataclass(frozen=True, slots=True)
class ServedKind:
    """A watched kind in the version the API server serves it in."""

    kind: WatchedKind
    version: str

    def path(self, namespace: str | None = None) -> str:
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"/apis/{self.kind.group}/{self.version}{where}/{self.kind.plural}"


@dataclass(frozen=True, slots=True)
class Discovery:
    served: tuple[ServedKind, ...]
    missing: tuple[WatchedKind, ...]

    def describe_missing(self) -> list[str]:
        return [f"{kind.kind} ({kind.plural}.{kind.group})" for kind in self.missing]

    def skipped_kinds(self) -> tuple[SkippedKind, ...]:
        """The missing kinds as a report names them."""
        return tuple(
            SkippedKind(
                kind=kind.kind,
                api_group=kind.group,
                reason=(
                    f"the API server serves no {kind.plural}.{kind.group} in "
                    f"{' or '.join(kind.versions)}: its CustomResourceDefinition is absent"
                ),
            )
            for kind in self.missing
        )


@dataclass(frozen=True, slots=True)
class Listed:
    """One page of a list: together, from a `first` to a `last` page, the pages are the
    complete current set of one stream's objects. The last page says where the watch starts.
    """

    kind: WatchedKind
    namespace: str | None
    items: list[dict[str, Any]]
    resource_version: str | None
    first: bool = True
    last: bool = True


@dataclass(frozen=True, slots=True)
class WatchEvent:
    kind: WatchedKind
    namespace: str | None
    type: Literal["ADDED", "MODIFIED", "DELETED"]
    object: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StreamFailed:
    """A stream could not list or watch; it retries on its own after `retry_in` seconds."""

    kind: WatchedKind
    namespace: str | None
    error: str
    status: int | None
    retry_in: float


StreamItem = Listed | WatchEvent | StreamFailed


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The leader election fields of a coordination.k8s.io/v1 Lease."""

    holder: str | None = None
    duration_seconds: int | None = None
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    transitions: int = 0
    resource_version: str | None = field(default=None, compare=False)


class Backoff:
    """Exponential delays with jitter: each is between half and all of base·2ⁿ, at most `cap`."""

    def __init__(self, base: float = 0.5, cap: float = 30.0, rng: random.Random | None = None):
        self.base = base
        self.cap = cap
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not security
        self._failures = 0

    def next(self) -> float:
        ceiling = min(self.cap, self.base * float(2**self._failures))
        self._failures = min(self._failures + 1, 32)
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    def reset(self) -> None:
        self._failures = 0


class _Response(Protocol):
    """The raw urllib3 response the client returns with `_preload_content=False`."""

    status: int

    @property
    def data(self) -> bytes: ...

    def stream(
        self, amt: int | None = ..., decode_content: bool | None = ...
    ) -> Iterator[bytes]: ...

    def release_conn(self) -> None: ...

    def close(self) -> None: ...


def _status_message(exc: ApiException) -> str:
    """The `message` of a Kubernetes Status body, else the HTTP reason."""
    body = exc.body
    if body:
        with suppress(orjson.JSONDecodeError, TypeError):
            status = orjson.loads(body)
            if isinstance(status, dict) and isinstance(status.get("message"), str):
                return str(status["message"])
    return str(exc.reason or "request failed")


def _api_error(exc: ApiException, what: str) -> KubeError:
    status = exc.status if isinstance(exc.status, int) else None
    message = f"{what}: {status or ''} {_status_message(exc)}".replace(":  ", ": ")
    if status == 410:
        return ResourceGone(message, status)
    if status == 409:
        return LeaseConflict(message, status)
    return KubeError(message, status)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.utcoffset() is not None else parsed.replace(tzinfo=UTC)


def _micro_time(value: datetime | None) -> str | None:
    # MicroTime: RFC 3339 in UTC with exactly six fractional digits.
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _lease_record(lease: Mapping[str, Any]) -> LeaseRecord:
    spec = lease.get("spec") or {}
    metadata = lease.get("metadata") or {}
    holder = spec.get("holderIdentity")
    duration = spec.get("leaseDurationSeconds")
    transitions = spec.get("leaseTransitions")
    return LeaseRecord(
        holder=holder if isinstance(holder, str) and holder else None,
        duration_seconds=duration if isinstance(duration, int) else None,
        acquire_time=_parse_time(spec.get("acquireTime")),
        renew_time=_parse_time(spec.get("renewTime")),
        transitions=transitions if isinstance(transitions, int) else 0,
        resource_version=metadata.get("resourceVersion"),
    )


def _lease_body(namespace: str, name: str, record: LeaseRecord) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if record.resource_version is not None:
        metadata["resourceVersion"] = record.resource_version
    return {
        "apiVersion": f"{LEASE_GROUP}/{LEASE_VERSION}",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": record.holder or "",
            "leaseDurationSeconds": record.duration_seconds,
            "acquireTime": _micro_time(record.acquire_time),
            "renewTime": _micro_time(record.renew_time),
            "leaseTransitions": record.transitions,
        },
    }


def _shutdown(response: _Response) -> None:
    """Unblock a thread reading `response`: shut its socket down under it."""
    shutdown = getattr(response, "shutdown", None)  # urllib3 ≥ 2.3
    if callable(shutdown):
        with suppress(Exception):
            shutdown()
            return
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    if isinstance(sock, socket.socket):
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class ClusterReader:
    """Reads the API server for the agent, in threads, never on the event loop."""

    def __init__(
        self,
        configuration: Configuration,
        *,
        request_timeout: float = 30.0,
        lease_timeout: float = 5.0,
        watch_timeout: tuple[int, int] = (300, 600),
        backoff: Callable[[], Backoff] = Backoff,
    ) -> None:
        # One connection per stream plus a few for discovery and the Lease.
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 32)
        self._client = ApiClient(configuration)
        self._api = CustomObjectsApi(self._client)
        self._request_timeout = request_timeout
        # Shorter than a renew deadline: a slow answer must not keep a lost leader leading.
        self._lease_timeout = lease_timeout
        self._watch_timeout = watch_timeout
        self._backoff = backoff
        self.host: str = configuration.host

    @classmethod
    def connect(
        cls,
        *,
        host: str | None = None,
        kubeconfig: Path | None = None,
        context: str | None = None,
        **options: Any,
    ) -> "ClusterReader":
        """In-cluster configuration in a pod, else the kubeconfig; or `host`, unauthenticated."""
        configuration = Configuration()
        try:
            if host is not None:
                configuration.host = host.rstrip("/")
            elif kubeconfig is None and context is None:
                try:
                    kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                except ConfigException:
                    kube_config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=str(kubeconfig) if kubeconfig else None,
                    context=context,
                    client_configuration=configuration,
                )
        except (ConfigException, OSError) as exc:
            raise KubeError(
                f"no Kubernetes configuration: not in a pod, and no usable kubeconfig ({exc})"
            ) from exc
        return cls(configuration, **options)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]

    # --- discovery ---------------------------------------------------------------------

    async def discover(self, kinds: Sequence[WatchedKind]) -> Discovery:
        """Each kind in the newest of its versions the server serves; the others as missing."""
        return await asyncio.to_thread(self._discover, kinds)

    def _discover(self, kinds: Sequence[WatchedKind]) -> Discovery:
        resources: dict[tuple[str, str], set[str] | None] = {}
        served: list[ServedKind] = []
        missing: list[WatchedKind] = []
        for kind in kinds:
            for version in kind.versions:
                key = (kind.group, version)
                if key not in resources:
                    resources[key] = self._resources(kind.group, version)
                if kind.plural in (resources[key] or ()):
                    served.append(ServedKind(kind, version))
                    break
            else:
                missing.append(kind)
        return Discovery(tuple(served), tuple(missing))

    def _resources(self, group: str, version: str) -> set[str] | None:
        """The resources `/apis/<group>/<version>` lists; None when it is not served (404)."""
        try:
            response = self._raw(
                self._api.get_api_resources(
                    group,
                    version,
                    _preload_content=False,
                    _request_timeout=self._request_timeout,
                )
            )
            document = self._json(response, f"discovery of {group}/{version}")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _api_error(exc, f"discovery of {group}/{version}") from exc
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"discovery of {group}/{version}: {exc}") from exc
        found = document.get("resources")
        if not isinstance(found, list):
            return set()
        return {item["name"] for item in found if isinstance(item, dict) and "name" in item}

    # --- list and watch ----------------------------------------------------------------

    def list_objects(self, served: ServedKind, namespace: str | None = None) -> Listed:
        """Every object of a kind (in one namespace, or all), as one `Listed`."""
        items: list[dict[str, Any]] = []
        for page in self.list_pages(served, namespace):
            items.extend(page.items)
            if page.last:
                return Listed(served.kind, namespace, items, page.resource_version)
        raise AssertionError("list_pages ends with a last page")

    def list_pages(self, served: ServedKind, namespace: str | None = None) -> Iterator[Listed]:
        """The objects of a kind page by page, so that a large list is never held whole."""
        token: str | None = None
        what = f"list {served.path(namespace)}"
        first = True
        while True:
            page = self._call(
                served,
                namespace,
                what,
                limit=LIST_PAGE_SIZE,
                _continue=token,
                _preload_content=False,
                _request_timeout=self._request_timeout,
            )
            document = self._json(page, what)
            found = document.get("items")
            items = [item for item in found if isinstance(item, dict)] if found else []
            metadata = document.get("metadata") or {}
            token = metadata.get("continue") or None
            if token is not None:
                yield Listed(served.kind, namespace, items, None, first=first, last=False)
                first = False
                continue
            resource_version = metadata.get("resourceVersion")
            if not isinstance(resource_version, str) or not resource_version:
                raise KubeError(f"{what}: the list carries no resourceVersion")
            yield Listed(served.kind, namespace, items, resource_version, first=first)
            return

    def watch_objects(
        self,
        served: ServedKind,
        namespace: str | None,
        resource_version: str,
        *,
        on_response: Callable[[_Response | None], None] = lambda response: None,
    ) -> Iterator[WatchEvent | str]:
        """Watch events from `resource_version` on, until the server ends the stream.

        Yields the events, and the new resourceVersion (a str) for every BOOKMARK. Raises
        `ResourceGone` on a 410 and `KubeError` on any other failure, a broken stream included.
        `on_response` gets the open response (and None when it is closed), so that another
        thread can shut it down.
        """
        what = f"watch {served.path(namespace)}"
        timeout = random.randint(*self._watch_timeout)  # noqa: S311 - spreads reconnects
        response = self._call(
            served,
            namespace,
            what,
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            _request_timeout=(self._request_timeout, timeout + self._request_timeout),
        )
        on_response(response)
        try:
            for line in self._lines(response, what):
                event = orjson.loads(line)
                kind = event.get("type") if isinstance(event, dict) else None
                obj = event.get("object") if isinstance(event, dict) else None
                if not isinstance(obj, dict):
                    raise KubeError(f"{what}: an event without an object: {line[:200]!r}")
                if kind in EVENT_TYPES:
                    yield WatchEvent(served.kind, namespace, kind, obj)
                elif kind == "BOOKMARK":
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if isinstance(version, str) and version:
                        yield version
                elif kind == "ERROR":
                    code = obj.get("code")
                    message = f"{what}: {code} {obj.get('message') or obj.get('reason') or ''}"
                    if code == 410:
                        raise ResourceGone(message, 410)
                    raise KubeError(message, code if isinstance(code, int) else None)
        except orjson.JSONDecodeError as exc:
            raise KubeError(f"{what}: an event that is not JSON: {exc}") from exc
        finally:
            on_response(None)
            response.release_conn()
            response.close()

    def _lines(self, response: _Response, what: str) -> Iterator[bytes]:
        buffer = b""
        try:
            for chunk in response.stream(None, decode_content=True):
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line, buffer = buffer[:end], buffer[end + 1 :]
                    if line.strip():
                        yield line
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"{what}: the stream broke: {exc}") from exc
        if buffer.strip():
            yield buffer

    def _call(
        self, served: ServedKind, namespace: str | None, what: str, **options: Any
    ) -> _Response:
        kind = served.kind
        try:
            if namespace:
                result = self._api.list_namespaced_custom_object(
                    kind.group, served.version, namespace, kind.plural, **options
                )
            else:
                result = self._api.list_cluster_custom_object(
                    kind.group, served.version, kind.plural, **options
                )
        except ApiException as exc:
            raise _api_error(exc, what) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"{what}: {exc}") from exc
        return self._raw(result)

    @staticmethod
    def _raw(result: object) -> _Response:
        return cast(_Response, result)

    @staticmethod
    def _json(response: _Response, what: str) -> dict[str, Any]:
        try:
            data = response.data
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"{what}: {exc}") from exc
        finally:
            response.release_conn()
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise KubeError(f"{what}: the answer is not JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise KubeError(f"{what}: expected a JSON object")
        return document

    def watch(self, served: Sequence[ServedKind], namespaces: Sequence[str] = ()) -> "Watcher":
        """Streams for every served kind, in every namespace given (all when none are)."""
        scopes: list[str | None] = list(namespaces) or [None]
        return Watcher(self, [(kind, scope) for kind in served for scope in scopes])

    # --- leases ------------------------------------------------------------------------

    async def read_lease(self, namespace: str, name: str) -> LeaseRecord | None:
        return await asyncio.to_thread(self._read_lease, namespace, name)

    async def create_lease(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord:
        """Create the Lease; `LeaseConflict` when it exists already."""
        return await asyncio.to_thread(self._write_lease, namespace, name, record, create=True)

    async def update_lease(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord:
        """Replace the Lease read as `record.resource_version`; `LeaseConflict` when it moved."""
        return await asyncio.to_thread(self._write_lease, namespace, name, record, create=False)

    def _read_lease(self, namespace: str, name: str) -> LeaseRecord | None:
        what = f"read Lease {namespace}/{name}"
        try:
            response = self._raw(
                self._api.get_namespaced_custom_object(
                    LEASE_GROUP,
                    LEASE_VERSION,
                    namespace,
                    "leases",
                    name,
                    _preload_content=False,
                    _request_timeout=self._lease_timeout,
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _api_error(exc, what) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"{what}: {exc}") from exc
        return _lease_record(self._json(response, what))

    def _write_lease(
        self, namespace: str, name: str, record: LeaseRecord, *, create: bool
    ) -> LeaseRecord:
        body = _lease_body(namespace, name, record)
        what = f"{'create' if create else 'update'} Lease {namespace}/{name}"
        options: dict[str, Any] = {
            "_preload_content": False,
            "_request_timeout": self._lease_timeout,
        }
        try:
            if create:
                body["metadata"].pop("resourceVersion", None)
                result = self._api.create_namespaced_custom_object(
                    LEASE_GROUP, LEASE_VERSION, namespace, "leases", body, **options
                )
            else:
                result = self._api.replace_namespaced_custom_object(
                    LEASE_GROUP, LEASE_VERSION, namespace, "leases", name, body, **options
                )
        except ApiException as exc:
            raise _api_error(exc, what) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(f"{what}: {exc}") from exc
        return _lease_record(self._json(self._raw(result), what))


class Watcher:
    """List+watch streams, one thread each, read as one async iterator of `StreamItem`s.

    Use as `async with reader.watch(...) as watcher: async for item in watcher: ...`. Every
    stream starts with a `Listed`; its `WatchEvent`s follow in the order the server sent them.
    After a 410 Gone a stream sends a fresh `Listed`, which replaces everything before it.
    """

    def __init__(
        self, reader: ClusterReader, streams: Sequence[tuple[ServedKind, str | None]]
    ) -> None:
        self._reader = reader
        self._streams = list(streams)
        self._queue: asyncio.Queue[StreamItem] = asyncio.Queue(maxsize=QUEUE_SIZE)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._responses: dict[int, _Response] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.lists = 0
        self.watches = 0
        self.failures = 0

    async def __aenter__(self) -> "Watcher":
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for index, (served, namespace) in enumerate(self._streams):
            thread = threading.Thread(
                target=self._follow,
                args=(index, served, namespace),
                name=f"watch-{served.kind.plural}-{namespace or 'all'}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    async def stop(self) -> None:
        self._stop.set()
        with self._lock:
            responses = list(self._responses.values())
        for response in responses:
            _shutdown(response)
        threads, self._threads = self._threads, []
        await asyncio.to_thread(self._join, threads)

    @staticmethod
    def _join(threads: list[threading.Thread]) -> None:
        for thread in threads:
            thread.join(timeout=5)

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self

    async def __anext__(self) -> StreamItem:
        return await self._queue.get()

    async def get(self) -> StreamItem:
        return await self._queue.get()

    def get_nowait(self) -> StreamItem | None:
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def _emit(self, item: StreamItem) -> None:
        """Hand `item` to the event loop (from a stream's thread).

        Blocks while the queue is full, so that a stream reads no further ahead than the
        loop maps: a large list never sits in memory whole.
        """
        assert self._loop is not None
        try:
            done = asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop)
        except RuntimeError:  # the loop closed while this thread was reading
            return
        while not self._stop.is_set():
            try:
                done.result(timeout=0.5)
                return
            except concurrent.futures.TimeoutError:
                continue
        done.cancel()

    def _hold(self, index: int, response: _Response | None) -> None:
        with self._lock:
            if response is None:
                self._responses.pop(index, None)
            else:
                self._responses[index] = response
        if response is not None and self._stop.is_set():
            _shutdown(response)

    def _follow(self, index: int, served: ServedKind, namespace: str | None) -> None:
        reader = self._reader
        emit = self._emit
        backoff = reader._backoff()
        where = {"kind": served.kind.kind, "namespace": namespace or "*"}
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    count = 0
                    for page in reader.list_pages(served, namespace):
                        count += len(page.items)
                        resource_version = page.resource_version
                        emit(page)
                    with self._lock:
                        self.lists += 1
                    backoff.reset()
                    log.debug("listed", count=count, rv=resource_version, **where)
                    assert resource_version is not None
                with self._lock:
                    self.watches += 1
                events = reader.watch_objects(
                    served,
                    namespace,
                    resource_version,
                    on_response=lambda response: self._hold(index, response),
                )
                for event in events:
                    if isinstance(event, str):
                        resource_version = event
                        continue
                    version = (event.object.get("metadata") or {}).get("resourceVersion")
                    if isinstance(version, str) and version:
                        resource_version = version
                    emit(event)
                    backoff.reset()
            except ResourceGone as exc:
                if resource_version is not None:  # the watch fell behind: list again, now
                    log.info("resource version expired, listing again", error=str(exc), **where)
                    resource_version = None
                    continue
                self._failed(served, namespace, backoff, str(exc), exc.status)
            except KubeError as exc:
                self._failed(served, namespace, backoff, str(exc), exc.status)
            except Exception as exc:
                # Nothing else is expected from the client; should it come, this stream must
                # not end with it. It is logged in full and retried like any failure.
                log.exception("watch failed unexpectedly", **where)
                self._failed(served, namespace, backoff, f"{type(exc).__name__}: {exc}", None)

    def _failed(
        self,
        served: ServedKind,
        namespace: str | None,
        backoff: Backoff,
        error: str,
        status: int | None,
    ) -> None:
        if self._stop.is_set():
            return
        with self._lock:
            self.failures += 1
        delay = backoff.next()
        log.warning(
            "watch failed",
            error=error,
            retry_in=round(delay, 2),
            kind=served.kind.kind,
            namespace=namespace or "*",
        )
        self._emit(StreamFailed(served.kind, namespace, error, status, delay))
        self._stop.wait(delay)
