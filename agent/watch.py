"""The watch loop: reconciler objects in, reports out.

`WatchLoop` reads the streams `agent.kube` opens into a `WatchState`, which decides without
I/O what to send when (docs/contributing.md, "Inside the agent"). `infer_placement` reads a
cluster's environment and cluster type from the root reconciler (Kalypso's layout).
"""

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog

from agent.kube import (
    Backoff,
    ClusterReader,
    Discovery,
    KubeError,
    Listed,
    StreamFailed,
    StreamItem,
    WatchEvent,
)
from agent.report import ObjectRecord
from agent.sources import WatchedKind
from agent.sources.flux import link_sources

__all__ = [
    "Emission",
    "Placement",
    "WatchLoop",
    "WatchState",
    "branch_of",
    "cluster_type_of",
    "infer_placement",
    "stream_name",
]

log = structlog.get_logger("agent.watch")

Key = tuple[str, str, str, str]
Clock = Callable[[], datetime]

DEFAULT_SYNC_TIMEOUT = timedelta(seconds=60)
# How often kinds the cluster did not serve at the start are looked for again.
DEFAULT_REDISCOVER_INTERVAL = timedelta(minutes=5)


# --- placement -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    environment: str | None = None
    cluster_type: str | None = None


_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# Characters of version constraints (`>=1.2`, `6.5.*`, `^1`), never of an environment branch.
_CONSTRAINT = re.compile(r"[\s*^~<>=|,]")
_MAX_NAME = 63


def branch_of(ref: str | None) -> str | None:
    """The branch a source ref names, or None for a tag, commit, version range or HEAD."""
    if not ref:
        return None
    ref = ref.strip()
    if ref.startswith("refs/heads/"):
        ref = ref.removeprefix("refs/heads/")
    elif ref.startswith("refs/") or ref.startswith("semver:") or ref.startswith("sha256:"):
        return None
    if (
        not ref
        or ref == "HEAD"
        or _COMMIT.fullmatch(ref)
        or _CONSTRAINT.search(ref)
        or len(ref) > _MAX_NAME
        or "\x00" in ref
    ):
        return None
    return ref


def cluster_type_of(path: str | None) -> str | None:
    """The top folder of a path in the platform GitOps repository (`./drone/apps` → drone)."""
    if not path:
        return None
    parts = [part for part in path.strip().split("/") if part not in ("", ".")]
    if not parts or parts[0] == ".." or len(parts[0]) > _MAX_NAME or "\x00" in parts[0]:
        return None
    return parts[0]


def infer_placement(records: Iterable[ObjectRecord], root: tuple[str, str, str]) -> Placement:
    """Environment and cluster type from the root reconciler `root` (kind, namespace, name).

    A Flux Kustomization root gives its `spec.path` and, through the GitRepository its
    `sourceRef` names, that repository's branch; an Argo CD Application root its source's
    `path` and `targetRevision`. Whatever cannot be read (no root, a tag or commit instead of a
    branch, a path at the repository's top) stays None.
    """
    kind, namespace, name = root
    by_key: dict[tuple[str, str, str], ObjectRecord] = {
        (record.kind.lower(), record.namespace, record.name): record for record in records
    }
    found = by_key.get((kind.lower(), namespace, name))
    if found is None or found.source is None:
        return Placement()
    source = found.source
    if found.reconciler == "argocd":
        branch = branch_of(source.ref)
    else:
        branch = None
        ref_kind, _, rest = (source.ref or "").partition("/")
        ref_namespace, _, ref_name = rest.partition("/")
        followed = by_key.get((ref_kind.lower(), ref_namespace, ref_name))
        if ref_kind == "GitRepository" and followed is not None and followed.source is not None:
            branch = branch_of(followed.source.ref)
    return Placement(environment=branch, cluster_type=cluster_type_of(source.path))


# --- state ---------------------------------------------------------------------------------


def stream_name(kind: WatchedKind, namespace: str | None = None) -> str:
    """What `WatchState` calls one list+watch stream: a kind, in one namespace or all."""
    name = f"{kind.plural}.{kind.group}"
    return f"{name}@{namespace}" if namespace else name


@dataclass(frozen=True, slots=True)
class Emission:
    """A report to send: its records, whether they are all there are, and the placement."""

    objects: tuple[ObjectRecord, ...]
    full_snapshot: bool
    placement: Placement


class WatchState:
    """The current records of every stream, and what has been sent of them."""

    def __init__(
        self,
        streams: Iterable[str],
        *,
        now: datetime,
        min_interval: timedelta,
        snapshot_interval: timedelta,
        sync_timeout: timedelta = DEFAULT_SYNC_TIMEOUT,
        root: tuple[str, str, str] | None = None,
    ) -> None:
        self._records: dict[str, dict[Key, ObjectRecord]] = {}
        self._pending: dict[str, dict[Key, ObjectRecord]] = {}  # lists still coming in
        self._waiting = set(streams)
        self._started_at = now
        self._min_interval = min_interval
        self._snapshot_interval = snapshot_interval
        self._sync_timeout = sync_timeout
        self._root = root
        self._sent: dict[Key, ObjectRecord] = {}
        self._dirty = False
        self._last_emission_at: datetime | None = None
        self._last_snapshot_at: datetime | None = None
        self.mapping_errors = 0

    @property
    def complete(self) -> bool:
        """Every stream has listed at least once, so the records are all there are."""
        return not self._waiting

    @property
    def waiting(self) -> frozenset[str]:
        return frozenset(self._waiting)

    def __len__(self) -> int:
        return sum(len(records) for records in self._records.values())

    # --- input ---------------------------------------------------------------------------

    def listed(
        self,
        kind: WatchedKind,
        namespace: str | None,
        items: Iterable[Mapping[str, object]],
        now: datetime,
        *,
        first: bool = True,
        last: bool = True,
    ) -> None:
        """A page of a stream's list. The pages from `first` to `last` are its complete set of
        objects, and replace everything it held before once the last has come."""
        stream = stream_name(kind, namespace)
        if first:
            self._pending[stream] = {}
        pending = self._pending.get(stream)
        if pending is None:
            return  # the rest of a list whose start was never seen; its next list will do
        for item in items:
            record = self._map(kind, item, now)
            if record is not None:
                pending[record.key] = record
        if last:
            self.replace(stream, self._pending.pop(stream).values())

    def changed(
        self,
        kind: WatchedKind,
        namespace: str | None,
        event_type: str,
        obj: Mapping[str, object],
        now: datetime,
    ) -> None:
        """One watch event: ADDED or MODIFIED puts the object's record, DELETED removes it."""
        record = self._map(kind, obj, now)
        if record is None:
            return
        records = self._records.setdefault(stream_name(kind, namespace), {})
        if event_type == "DELETED":
            if records.pop(record.key, None) is not None:
                self._dirty = True
        elif records.get(record.key) != record:
            records[record.key] = record
            self._dirty = True

    def replace(self, stream: str, records: Iterable[ObjectRecord]) -> None:
        """Set a stream's records (the state-file source uses this directly)."""
        fresh = {record.key: record for record in records}
        if self._records.get(stream) != fresh:
            self._dirty = True
        self._records[stream] = fresh
        self._waiting.discard(stream)

    def _map(
        self, kind: WatchedKind, obj: Mapping[str, object], now: datetime
    ) -> ObjectRecord | None:
        try:
            return kind.mapper(obj, now)
        except Exception:
            # Mappers are written never to raise; should one still do so, that one object
            # goes unreported and the stream carries on.
            self.mapping_errors += 1
            metadata = obj.get("metadata")
            name = metadata.get("name") if isinstance(metadata, Mapping) else None
            log.exception("mapping failed", kind=kind.kind, name=name)
            return None

    # --- output --------------------------------------------------------------------------

    def records(self) -> list[ObjectRecord]:
        """Every current record, Flux sources linked in, in a stable order."""
        merged = [record for records in self._records.values() for record in records.values()]
        merged.sort(key=lambda record: record.key)
        return link_sources(merged)

    def placement(self, records: Sequence[ObjectRecord] | None = None) -> Placement:
        if self._root is None:
            return Placement()
        return infer_placement(self.records() if records is None else records, self._root)

    def next_poll_at(self) -> datetime | None:
        """When `poll` may next have something to send without new input; None: never."""
        candidates: list[datetime] = []
        if self._waiting and self._last_emission_at is None:
            candidates.append(self._started_at + self._sync_timeout)
        if not self._waiting:
            if self._last_snapshot_at is None:
                candidates.append(self._started_at)
            else:
                candidates.append(self._last_snapshot_at + self._snapshot_interval)
        if self._dirty and (not self._waiting or self._last_emission_at is not None):
            candidates.append(self._started_at)
        if not candidates:
            return None
        earliest = min(candidates)
        if self._last_emission_at is not None:
            earliest = max(earliest, self._last_emission_at + self._min_interval)
        return earliest

    def poll(self, now: datetime) -> Emission | None:
        """The report due at `now`, if any; what it carries counts as sent from then on."""
        due = self.next_poll_at()
        if due is None or now < due:
            return None
        complete = self.complete
        snapshot_due = complete and (
            self._last_snapshot_at is None
            or now >= self._last_snapshot_at + self._snapshot_interval
        )
        current = self.records()
        keys = {record.key for record in current}
        removed = complete and any(key not in keys for key in self._sent)
        if snapshot_due or removed:
            self._sent = {record.key: record for record in current}
            self._last_snapshot_at = now
            emission = Emission(tuple(current), True, self.placement(current))
        else:
            changed = [record for record in current if self._sent.get(record.key) != record]
            self._dirty = False
            if not changed and self._last_emission_at is not None:
                return None
            self._sent.update((record.key, record) for record in changed)
            emission = Emission(tuple(changed), False, self.placement(current))
        self._dirty = False
        self._last_emission_at = now
        return emission


# --- the loop ------------------------------------------------------------------------------

Send = Callable[[Emission], Awaitable[None]]


class WatchLoop:
    """Discovers the watched kinds, follows their streams and sends what `WatchState` emits.

    `run` goes on until cancelled, or returns when a kind that was missing at the start has
    come to be served: the caller starts a new loop, which lists everything afresh.
    `on_stream_failure` is called for every failure a stream reports (it retries on its own).
    """

    def __init__(
        self,
        reader: ClusterReader,
        kinds: Sequence[WatchedKind],
        *,
        send: Send,
        clock: Clock,
        min_interval: timedelta,
        snapshot_interval: timedelta,
        namespaces: Sequence[str] = (),
        root: tuple[str, str, str] | None = None,
        sync_timeout: timedelta = DEFAULT_SYNC_TIMEOUT,
        backoff: Callable[[], Backoff] = Backoff,
        max_batch: int = 1000,
        rediscover_interval: timedelta = DEFAULT_REDISCOVER_INTERVAL,
        on_stream_failure: Callable[[], None] = lambda: None,
    ) -> None:
        self._reader = reader
        self._kinds = kinds
        self._send = send
        self._clock = clock
        self._min_interval = min_interval
        self._snapshot_interval = snapshot_interval
        self._namespaces = namespaces
        self._root = root
        self._sync_timeout = sync_timeout
        self._backoff = backoff
        self._max_batch = max_batch
        self._rediscover_interval = rediscover_interval
        self._on_stream_failure = on_stream_failure
        self.discovery: Discovery | None = None
        self.state: WatchState | None = None
        self.failing: dict[str, str] = {}  # stream → its last error, until it recovers
        self.sent = 0

    async def discover(self) -> Discovery:
        """Which kinds the API server serves, retried with backoff until it answers."""
        backoff = self._backoff()
        while True:
            try:
                discovery = await self._reader.discover(self._kinds)
            except KubeError as exc:
                delay = backoff.next()
                log.warning("discovery failed", error=str(exc), retry_in=round(delay, 2))
                await asyncio.sleep(delay)
                continue
            if discovery.missing:
                log.warning(
                    "kinds not served by this cluster, skipped",
                    kinds=discovery.describe_missing(),
                )
            return discovery

    async def run(self) -> None:
        discovery = self.discovery = await self.discover()
        scopes: list[str | None] = list(self._namespaces) or [None]
        streams = [stream_name(s.kind, scope) for s in discovery.served for scope in scopes]
        state = self.state = WatchState(
            streams,
            now=self._clock(),
            min_interval=self._min_interval,
            snapshot_interval=self._snapshot_interval,
            sync_timeout=self._sync_timeout,
            root=self._root,
        )
        log.info(
            "watching",
            kinds=[f"{s.kind.kind} {s.kind.group}/{s.version}" for s in discovery.served],
            namespaces=list(self._namespaces) or "all",
        )
        rediscover_at = self._clock() + self._rediscover_interval if discovery.missing else None
        async with self._reader.watch(discovery.served, self._namespaces) as watcher:
            while True:
                due = state.next_poll_at()
                if rediscover_at is not None:
                    due = rediscover_at if due is None else min(due, rediscover_at)
                timeout = None if due is None else max(0.0, (due - self._clock()).total_seconds())
                item: StreamItem | None = None
                try:
                    async with asyncio.timeout(timeout):
                        item = await watcher.get()
                except TimeoutError:
                    pass  # time for the next report, with or without news
                taken = 0
                while item is not None:
                    self._apply(state, item)
                    taken += 1
                    item = watcher.get_nowait() if taken < self._max_batch else None
                emission = state.poll(self._clock())
                if emission is not None:
                    await self._send(emission)
                    self.sent += 1
                if rediscover_at is not None and self._clock() >= rediscover_at:
                    if await self._newly_served(discovery):
                        return
                    rediscover_at = self._clock() + self._rediscover_interval

    async def _newly_served(self, discovery: Discovery) -> bool:
        """Whether a kind missing at the start is served now (its CRD was installed since)."""
        try:
            again = await self._reader.discover(discovery.missing)
        except KubeError as exc:
            log.info("discovery failed; trying again later", error=str(exc))
            return False
        if again.served:
            log.info(
                "kinds now served; starting over to watch them too",
                kinds=[served.kind.kind for served in again.served],
            )
        return bool(again.served)

    def _apply(self, state: WatchState, item: StreamItem) -> None:
        now = self._clock()
        stream = stream_name(item.kind, item.namespace)
        if isinstance(item, Listed):
            state.listed(
                item.kind, item.namespace, item.items, now, first=item.first, last=item.last
            )
            self.failing.pop(stream, None)
        elif isinstance(item, WatchEvent):
            state.changed(item.kind, item.namespace, item.type, item.object, now)
            self.failing.pop(stream, None)
        elif isinstance(item, StreamFailed):
            self.failing[stream] = item.error
            self._on_stream_failure()
