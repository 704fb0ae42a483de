"""The reporter: turns the watch loop's records into numbered reports and delivers them.

`Reporter.submit` takes the records of a change (or of a periodic full snapshot) with the time
they were observed, and posts them through the `HubClient` or spools them; docs/contributing.md
("The agent's delivery") gives the rules. Nothing here sleeps: time comes in as `now`.
"""

import asyncio
import contextlib
import random
import uuid
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version

import structlog

from agent.client import (
    Gate,
    HubClient,
    HubUnavailable,
    NotAuthorised,
    Reply,
    ReportRejected,
    ReportTooLarge,
    Withheld,
)
from agent.report import (
    AgentIdentity,
    ClusterIdentity,
    ObjectRecord,
    Report,
    SkippedKind,
    split,
)
from agent.spool import Spool, SpooledReport, SpoolFull

__all__ = ["DeliveryCounters", "Outcome", "Reporter"]

log = structlog.get_logger(__name__)


def _agent_version() -> str:
    try:
        return installed_version("fleetmark")
    except PackageNotFoundError:
        return "unknown"


class Outcome(StrEnum):
    """What became of a submitted report."""

    SENT = "sent"
    SPOOLED = "spooled"
    REJECTED = "rejected"


# A submission sent as several reports (a snapshot in parts) has the outcome of the least
# delivered of them.
_SEVERITY = (Outcome.SENT, Outcome.SPOOLED, Outcome.REJECTED)
# Of the hub's limit, what a report is split to stay under, for safety.
SPLIT_SHARE = 0.9


@dataclass(frozen=True, slots=True)
class DeliveryCounters:
    """Totals since the reporter started, for metrics."""

    sent: int = 0  # delivered directly
    spooled: int = 0  # put in the spool
    replayed: int = 0  # delivered from the spool (duplicates included)
    duplicates: int = 0  # replies saying the hub already had the report
    compacted: int = 0  # dropped from the spool as superseded by a newer full snapshot
    rejected: int = 0  # refused by the hub for good, kept in rejected/
    split: int = 0  # refused by the hub as too large, and sent again in pieces
    refused: int = 0  # not kept: the spool was full (SpoolFull raised)
    corrupt: int = 0  # spool files moved aside as unreadable


class Reporter:
    """Numbers, delivers and, when it must, spools this agent's reports.

    `retry_interval` is the first wait (seconds) after the hub was found unavailable; each
    further failure doubles it, up to `max_retry_interval`.
    """

    def __init__(
        self,
        client: HubClient,
        spool: Spool,
        *,
        cluster: ClusterIdentity,
        instance: str,
        version: str | None = None,
        retry_interval: float = 5.0,
        max_retry_interval: float = 300.0,
        gate: Gate | None = None,
    ) -> None:
        self._client = client
        self._gate = gate
        self._spool = spool
        self._cluster = cluster
        self._agent = AgentIdentity(
            version=version or _agent_version(), boot_id=str(uuid.uuid4()), instance=instance
        )
        self._retry_interval = retry_interval
        self._max_retry_interval = max_retry_interval
        self._sequence = 0
        self._failures = 0
        self._retry_at: datetime | None = None
        self._tally: Counter[str] = Counter()
        self._warnings: tuple[str, ...] = ()
        self._lock = asyncio.Lock()

    @property
    def boot_id(self) -> str:
        return self._agent.boot_id

    @property
    def cluster(self) -> ClusterIdentity:
        return self._cluster

    @cluster.setter
    def cluster(self, cluster: ClusterIdentity) -> None:
        """Report under a new identity from the next report on, with the same boot id.

        Reports already spooled keep the identity they were built with.
        """
        self._cluster = cluster

    @property
    def sequence(self) -> int:
        """The sequence number of the latest report built (0 before the first)."""
        return self._sequence

    @property
    def pending(self) -> int:
        """Reports waiting in the spool."""
        return len(self._spool)

    @property
    def counters(self) -> DeliveryCounters:
        return DeliveryCounters(**self._tally, corrupt=self._spool.corrupt)

    async def submit(
        self,
        objects: Iterable[ObjectRecord],
        *,
        full_snapshot: bool,
        now: datetime,
        skipped_kinds: Iterable[SkippedKind] = (),
    ) -> Outcome:
        """Build the next report from `objects` observed at `now` and deliver or spool it; a
        full snapshot over the hub's limit goes in parts, and the outcome is the least
        delivered part's.

        Raises `SpoolFull` when a report had to be spooled and could not be (it is logged
        and counted as refused; the next full snapshot supersedes what it carried), and
        pydantic's `ValidationError` for records no report may hold (no sequence is used).
        """
        async with self._lock:
            report = Report(
                cluster=self._cluster,
                agent=self._agent,
                sequence=self._sequence + 1,
                observed_at=now,
                full_snapshot=full_snapshot,
                objects=tuple(objects),
                skipped_kinds=tuple(skipped_kinds),
            )
            waiting = deque(self._split(report))  # not numbered yet
            outcomes: list[Outcome] = []
            sending: Report | None = None
            try:
                while waiting:
                    if self._due(now) and await self._replay(now):
                        sending = self._numbered(waiting.popleft())
                        outcome = await self._send(sending, now, waiting)
                        sending = None
                        if outcome is not None:
                            outcomes.append(outcome)
                    else:
                        outcomes.append(self._keep(self._numbered(waiting.popleft())))
            except asyncio.CancelledError:
                # Stopped while talking to the hub: keep what is left. Had the hub taken the
                # report in flight already, its replay is a harmless duplicate. (_keep logs
                # a SpoolFull.)
                with contextlib.suppress(SpoolFull):
                    if sending is not None:
                        self._keep(sending)
                    while waiting:
                        self._keep(self._numbered(waiting.popleft()))
                raise
            return max(outcomes, key=_SEVERITY.index)

    async def flush(self, now: datetime) -> int:
        """Replay the spool if the hub is due to be tried again; returns the reports left."""
        async with self._lock:
            if self._due(now):
                await self._replay(now)
            return len(self._spool)

    def _due(self, now: datetime) -> bool:
        return self._retry_at is None or now >= self._retry_at

    def _numbered(self, report: Report) -> Report:
        """`report` with the next sequence number."""
        self._sequence += 1
        return report.model_copy(update={"sequence": self._sequence})

    def _split(self, report: Report) -> list[Report]:
        return split(
            report, int(self._client.max_report_bytes * SPLIT_SHARE), snapshot_id=uuid.uuid4().hex
        )

    def _pieces(self, report: Report, exc: ReportTooLarge) -> list[Report]:
        """`report`, refused as too large, split by the limit the hub gave; empty when it
        cannot be split (it is then rejected)."""
        pieces = self._split(report)
        if len(pieces) < 2:
            return []
        self._count(split=1)
        log.warning(
            "the hub refused a report as too large; it goes again in smaller reports",
            sequence=report.sequence,
            boot_id=report.agent.boot_id,
            pieces=len(pieces),
            max_report_bytes=self._client.max_report_bytes,
            detail=exc.detail,
        )
        return pieces

    async def _send(self, report: Report, now: datetime, waiting: deque[Report]) -> Outcome | None:
        """Deliver `report` directly; None when it was split into reports now at the head of
        `waiting`."""
        try:
            reply = await self._client.send(report, gate=self._gate)
        except Withheld:
            log.info("not sending: this agent is not the leader now", sequence=report.sequence)
            return self._keep(report)
        except (HubUnavailable, NotAuthorised) as exc:
            self._hold_off(exc, now, pending=len(self._spool) + 1)
            return self._keep(report)
        except ReportTooLarge as exc:
            pieces = self._pieces(report, exc)
            if pieces:
                waiting.extendleft(reversed(pieces))
                return None
            self._reject(report, exc)
            return Outcome.REJECTED
        except ReportRejected as exc:
            self._reject(report, exc)
            return Outcome.REJECTED
        self._delivered(reply)
        self._count(sent=1)
        return Outcome.SENT

    async def _replay(self, now: datetime) -> bool:
        """Deliver spooled reports oldest first; True once the spool is empty."""
        while (spooled := self._spool.oldest()) is not None:
            entry, report = spooled
            try:
                reply = await self._client.send(report, gate=self._gate)
            except Withheld:
                return False
            except (HubUnavailable, NotAuthorised) as exc:
                self._hold_off(exc, now, pending=len(self._spool))
                return False
            except ReportTooLarge as exc:
                pieces = self._pieces(report, exc)
                if not pieces:
                    self._reject(report, exc, entry)
                    continue
                self._spool.remove(entry)
                with contextlib.suppress(SpoolFull):  # logged and counted by _keep
                    for piece in pieces:
                        self._keep(self._numbered(piece))
                continue
            except ReportRejected as exc:
                self._reject(report, exc, entry)
                continue
            self._spool.remove(entry)
            self._delivered(reply)
            self._count(replayed=1)
            if not self._spool:
                log.info("spool replayed; reports go to the hub directly again")
        return True

    def _keep(self, report: Report) -> Outcome:
        try:
            dropped = self._spool.put(report)
        except SpoolFull as exc:
            self._count(refused=1)
            log.error(
                "report lost: the spool cannot keep it",
                sequence=report.sequence,
                full_snapshot=report.full_snapshot,
                error=str(exc),
            )
            raise
        self._count(spooled=1, compacted=len(dropped))
        return Outcome.SPOOLED

    def _hold_off(self, exc: HubUnavailable | NotAuthorised, now: datetime, pending: int) -> None:
        self._failures += 1
        ceiling = min(self._max_retry_interval, self._retry_interval * 2.0 ** (self._failures - 1))
        delay = ceiling * (0.5 + 0.5 * random.random())  # noqa: S311 - jitter, not secrecy
        if isinstance(exc, HubUnavailable) and exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        self._retry_at = now + timedelta(seconds=delay)
        if isinstance(exc, NotAuthorised):
            log.error(
                "the hub does not accept this agent's cluster token; reports are kept in the "
                "spool until the token is fixed",
                status=exc.status,
                error=exc.error,
                detail=exc.detail,
                retry_in=round(delay, 1),
                pending=pending,
            )
        else:
            log.warning(
                "hub unavailable; reports are kept in the spool",
                error=str(exc),
                retry_in=round(delay, 1),
                pending=pending,
            )

    def _reject(
        self, report: Report, exc: ReportRejected, entry: SpooledReport | None = None
    ) -> None:
        reason = {
            "status": exc.status,
            "error": exc.error,
            "detail": exc.detail,
            "boot_id": report.agent.boot_id,
            "sequence": report.sequence,
        }
        self._count(rejected=1)
        log.error(
            "the hub rejected a report; it is kept in the spool's rejected/ folder and "
            "not sent again",
            sequence=report.sequence,
            boot_id=report.agent.boot_id,
            status=exc.status,
            error=exc.error,
            detail=exc.detail,
        )
        try:
            if entry is None:
                self._spool.keep_rejected(report, reason)
            else:
                self._spool.reject(entry, reason)
        except OSError as error:
            # The hub will never take it; keeping it must not block the reports behind it.
            log.error("cannot keep the rejected report; dropping it", error=str(error))
            if entry is not None:
                self._spool.remove(entry)

    def _delivered(self, reply: Reply) -> None:
        self._failures = 0
        self._retry_at = None
        if reply.duplicate:
            self._count(duplicates=1)
        if reply.warnings and reply.warnings != self._warnings:
            log.warning("the hub accepted a report with warnings", warnings=list(reply.warnings))
        self._warnings = reply.warnings

    def _count(self, **increments: int) -> None:
        self._tally.update(increments)
