"""Leader election over a coordination.k8s.io/v1 Lease, so one agent pod of a cluster reports.

Every pod of the DaemonSet runs a `LeaderElector`; the runner calls `try_acquire_or_renew`
every retry period and runs the watch loop only while it returns True. The rules are
client-go's (docs/contributing.md, "Inside the agent").
"""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

import structlog

from agent.kube import KubeError, LeaseConflict, LeaseRecord

__all__ = ["LeaderElector", "LeaseStore"]

log = structlog.get_logger("agent.leader")


class LeaseStore(Protocol):
    """Lease reads and writes (`agent.kube.ClusterReader` is one)."""

    async def read_lease(self, namespace: str, name: str) -> LeaseRecord | None: ...

    async def create_lease(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord: ...

    async def update_lease(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord: ...


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: timedelta,
        renew_deadline: timedelta,
        clock: Callable[[], datetime],
    ) -> None:
        if renew_deadline >= lease_duration:
            raise ValueError("renew_deadline must be shorter than lease_duration")
        self._store = store
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self._duration = lease_duration
        self._renew_deadline = renew_deadline
        self._clock = clock
        self._observed: LeaseRecord | None = None
        self._observed_at: datetime | None = None
        self._renewed_at: datetime | None = None
        self._leading = False
        self.last_error: str | None = None

    @property
    def holder(self) -> str | None:
        """The holder of the Lease when it was last read or written."""
        return self._observed.holder if self._observed else None

    def is_leader(self, now: datetime | None = None) -> bool:
        """This pod renewed the Lease within the renew deadline of `now` (default: the clock).

        Asked for a later moment, it says whether the Lease is still held then without a
        further renewal: the runner lets a request start only if it is, until its timeout.
        """
        if self._renewed_at is None:
            return False
        return (now or self._clock()) - self._renewed_at < self._renew_deadline

    async def try_acquire_or_renew(self) -> bool:
        """One round: read the Lease, then take, renew or leave it. Returns `is_leader()`."""
        now = self._clock()
        try:
            current = await self._store.read_lease(self.namespace, self.name)
            if current is None:
                written = await self._store.create_lease(
                    self.namespace, self.name, self._claim(None, now)
                )
            else:
                if current != self._observed:
                    self._observed, self._observed_at = current, now
                if self._held_by_another(current, now):
                    self._renewed_at = None
                    self._changed(now)
                    return False
                written = await self._store.update_lease(
                    self.namespace, self.name, self._claim(current, now)
                )
        except LeaseConflict as exc:
            # Another pod wrote the Lease between our read and our write; it is the leader.
            log.info("lost the race for the lease", lease=self.name, error=str(exc))
            self._renewed_at = None
            self._changed(now)
            return False
        except KubeError as exc:
            self.last_error = str(exc)
            log.warning("cannot read or write the lease", lease=self.name, error=str(exc))
            self._changed(now)
            return self.is_leader(now)
        self.last_error = None
        self._observed, self._observed_at, self._renewed_at = written, now, now
        self._changed(now)
        return True

    async def release(self) -> None:
        """Give the Lease up (on shutdown) so that a standby need not wait for it to expire."""
        if not self.is_leader():
            return
        self._renewed_at = None
        self._leading = False
        try:
            # Read again: a renewal cut short by the shutdown may have moved the Lease on.
            current = await self._store.read_lease(self.namespace, self.name)
            if current is None or current.holder != self.identity:
                return
            record = LeaseRecord(
                holder=None,
                duration_seconds=1,
                acquire_time=current.acquire_time,
                renew_time=self._clock(),
                transitions=current.transitions,
                resource_version=current.resource_version,
            )
            await self._store.update_lease(self.namespace, self.name, record)
        except KubeError as exc:
            log.warning("cannot release the lease", lease=self.name, error=str(exc))
        else:
            log.info("released the lease", lease=self.name)

    def _held_by_another(self, current: LeaseRecord, now: datetime) -> bool:
        if not current.holder or current.holder == self.identity:
            return False
        assert self._observed_at is not None
        return now < self._observed_at + self._duration

    def _claim(self, current: LeaseRecord | None, now: datetime) -> LeaseRecord:
        if current is not None and current.holder == self.identity:
            acquired, transitions = current.acquire_time or now, current.transitions
        elif current is not None:
            acquired, transitions = now, current.transitions + 1
        else:
            acquired, transitions = now, 0
        return LeaseRecord(
            holder=self.identity,
            duration_seconds=max(1, round(self._duration.total_seconds())),
            acquire_time=acquired,
            renew_time=now,
            transitions=transitions,
            resource_version=current.resource_version if current else None,
        )

    def _changed(self, now: datetime) -> None:
        leader = self.is_leader(now)
        if leader and not self._leading:
            log.info("became the leader", lease=self.name, identity=self.identity)
        elif self._leading and not leader:
            log.warning("no longer the leader", lease=self.name, holder=self.holder)
        self._leading = leader
