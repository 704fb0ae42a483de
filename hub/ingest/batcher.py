"""Batches of the ingest path: each request hands its report to the app's batcher and waits;
what has queued up meanwhile goes out as one ingest statement (hub/ingest/repository.py), so
per-statement costs are paid once per batch.
"""

import asyncio
import math
from collections import deque
from dataclasses import dataclass

import psycopg
from psycopg_pool import PoolTimeout

from hub.database import Statements
from hub.ingest import repository
from hub.ingest.repository import AppliedReport, ReportRow, SnapshotPartRow

# Statements one process keeps running on one source at a time; reports arriving meanwhile
# wait and go out together. Two keeps the store busy while the hub reads the previous
# results, without handing it more concurrent work than its cores take.
CONCURRENT_BATCHES = 2
# Seconds from the start of one statement of a source to the next while reports keep coming
# (unless a full batch is waiting). A statement costs PostgreSQL as much CPU as several
# 20-object reports in it (its plan's start, its commit): at a thousand reports a second over
# two processes, a 5 ms pace made batches of 3 at 0.67 ms of PostgreSQL's CPU a report, 25 ms
# batches of 12 at 0.33 ms, 50 ms batches of 23 at 0.28 ms. This pause, small next to what an
# agent waits anyway, lets a batch collect.
BATCH_PACE = 0.025
# A batch's bounds: its reports are answered together, so one batch must not grow so large
# that the first of them waits long for the last.
MAX_BATCH_REPORTS = 64
MAX_BATCH_BYTES = 1024 * 1024


@dataclass(eq=False, slots=True)
class _Pending:
    """A report waiting for its batch, and the caller's answer."""

    cluster_name: str
    statement: bytes  # APPLY_REPORTS, or APPLY_SNAPSHOT_PARTS for a part of a snapshot
    document: bytes  # the report as the statement takes it (repository.encode)
    result: asyncio.Future[AppliedReport]
    taken: bool = False


async def _apply_batch(statements: Statements, batch: list[_Pending]) -> None:
    """Run one batch and answer each of its callers; never raises but for cancellation."""
    try:
        results = await repository.apply_reports(
            statements, batch[0].statement, [pending.document for pending in batch]
        )
    except psycopg.Error as error:
        if error.sqlstate is None or len(batch) == 1:
            # Not the store refusing the reports (no connection, a broken one): it would
            # refuse each of them alone just the same.
            _fail(batch, error)
            return
        # The store refused the batch, maybe for one report in it: apply each on its own, so
        # that one fails alone.
        for pending in batch:
            if not pending.result.done():
                await _apply_batch(statements, [pending])
    except Exception as error:
        _fail(batch, error)
    except BaseException:
        for pending in batch:
            pending.result.cancel()
        raise
    else:
        for pending, result in zip(batch, results, strict=True):
            if not pending.result.done():  # its caller may have been cancelled meanwhile
                pending.result.set_result(result)


def _fail(batch: list[_Pending], error: Exception) -> None:
    for pending in batch:
        if not pending.result.done():
            pending.result.set_exception(error)


class ReportBatcher:
    """The reports waiting on one Statements source, and the batches running on it. The app
    builds one on its statement pool at start-up."""

    def __init__(self, statements: Statements, *, busy_timeout: float) -> None:
        self._statements = statements
        # A report no statement has taken after busy_timeout seconds gets the answer a request
        # gets when every connection stays busy that long: 503, retry later.
        self._busy_timeout = busy_timeout
        self._queue: deque[_Pending] = deque()
        self._running = 0  # batches running, counted down by each as it ends (not later)
        self._started = -math.inf  # loop time the newest statement went out
        self._pausing = False  # a flush waits for BATCH_PACE to pass (one at a time)
        self._flushes: set[asyncio.Task[None]] = set()  # the loop keeps only weak references

    async def apply(self, report: ReportRow, part: SnapshotPartRow | None) -> AppliedReport:
        """Apply one report, with `part` one of a snapshot's parts, in the next batch.

        Raises PoolTimeout when no batch takes the report within busy_timeout seconds.
        """
        statement, document = repository.encode(report, part)
        loop = asyncio.get_running_loop()
        pending = _Pending(report.cluster_name, statement, document, loop.create_future())
        self._queue.append(pending)
        if self._running < CONCURRENT_BATCHES:
            # A task of its own, so that cancelling the caller that started it cannot cut
            # short a statement that carries other callers' reports.
            self._running += 1
            flush = asyncio.create_task(self._flush())
            self._flushes.add(flush)
            flush.add_done_callback(self._flushes.discard)
        expiry = loop.call_later(self._busy_timeout, self._expire, pending)
        try:
            # Cancelling the caller cancels its result: a batch not yet built leaves the report
            # out; one already sent applies it all the same.
            return await pending.result
        finally:
            expiry.cancel()

    def _expire(self, pending: _Pending) -> None:
        if not pending.taken and not pending.result.done():
            pending.result.set_exception(
                PoolTimeout("no database connection was free for the report in time")
            )

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                started = self._started
                pause = started + BATCH_PACE - loop.time()
                if pause > 0 and len(self._queue) < MAX_BATCH_REPORTS:
                    if self._pausing:
                        break  # the flush already pausing sends the next batch
                    self._pausing = True
                    try:
                        await asyncio.sleep(pause)
                    finally:
                        self._pausing = False
                    if self._started != started:
                        continue  # another flush sent a batch meanwhile: pause after it
                batch = self._take()
                if not batch:
                    break
                self._started = loop.time()
                await _apply_batch(self._statements, batch)
        finally:
            self._running -= 1

    def _take(self) -> list[_Pending]:
        """The next batch: queued reports in arrival order, one per cluster, within bounds,
        all for the same statement (a part of a snapshot ends a batch of other reports).

        A later report of a cluster already in the batch stays queued, ahead of any report
        that arrives after it, so no report of a cluster goes out before an earlier one.
        """
        batch: list[_Pending] = []
        clusters: set[str] = set()
        size = 0
        deferred: list[_Pending] = []
        while self._queue and len(batch) < MAX_BATCH_REPORTS:
            pending = self._queue.popleft()
            if pending.result.done():  # its caller gave up waiting
                continue
            if pending.cluster_name in clusters:
                deferred.append(pending)
                continue
            size += len(pending.document)
            if batch and (size > MAX_BATCH_BYTES or pending.statement is not batch[0].statement):
                self._queue.appendleft(pending)
                break
            pending.taken = True
            clusters.add(pending.cluster_name)
            batch.append(pending)
        self._queue.extendleft(reversed(deferred))
        return batch
