"""Runs the agent: settings in, reports out, until stopped.

`main` builds `AgentSettings` once; `AgentRunner` wires the cluster reader or the state file,
the leader elector, the watch loop, the reporter and the health server. docs/contributing.md
("Inside the agent") says how they fit.
"""

import asyncio
import contextlib
import logging
import signal
import sys
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import structlog
from pydantic import ValidationError

from agent.client import HubClient
from agent.delivery import DeliveryCounters, Reporter
from agent.health import HealthServer
from agent.kube import Backoff, ClusterReader, KubeError
from agent.leader import LeaderElector
from agent.metrics import AgentMetrics, Readings
from agent.report import ClusterIdentity
from agent.settings import AgentSettings
from agent.sources.generic import StateFileError, read_state_file
from agent.spool import Spool, SpoolFull
from agent.watch import Clock, Emission, Placement, WatchLoop, WatchState

__all__ = ["AgentRunner", "configure_logging", "main"]

log = structlog.get_logger("agent.runner")

STATE_FILE_STREAM = "state-file"
FLUSH_INTERVAL = timedelta(seconds=5)
# Liveness fails when the agent's own loops have not come round for this long.
STALL_LIMIT = timedelta(seconds=60)


def utc_now() -> datetime:
    return datetime.now(UTC)


def configure_logging(log_format: str, level: str) -> None:
    """structlog to stdout, JSON or console; the libraries' own logging at warnings only."""
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if log_format == "json":
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:  # the console renderer lays exceptions out itself
        processors.append(structlog.dev.ConsoleRenderer())
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


class AgentRunner:
    """The agent's parts, wired from its settings. `reader` and `client` replace the ones
    the settings would build (tests and benchmarks pass their own)."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        clock: Clock = utc_now,
        reader: ClusterReader | None = None,
        client: HubClient | None = None,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._reader = reader
        self._client = client or HubClient(
            str(settings.hub_url),
            token_file=settings.token_file,
            ca_file=settings.hub_ca_file,
            max_report_bytes=settings.max_report_bytes,
            timeout=settings.hub_timeout.total_seconds(),
        )
        self._retry_period = settings.retry_period
        self._spool: Spool | None = None
        self._reporter: Reporter | None = None
        self._elector: LeaderElector | None = None
        self._loop: WatchLoop | None = None
        self._state: WatchState | None = None
        self._beat_at = clock()
        self._watch_restarts = 0
        self.metrics = AgentMetrics(self._readings)
        self.health = HealthServer(
            settings.health_host,
            settings.health_port,
            live=self._live,
            ready=self._ready,
            metrics=self.metrics.render,
        )

    # --- life cycle ----------------------------------------------------------------------

    async def run(self) -> None:
        """Run until cancelled; the Lease is released and connections closed on the way out."""
        settings = self.settings
        self._spool = Spool(settings.spool_dir, max_bytes=settings.spool_max_bytes)
        await self.health.start()
        flusher = asyncio.create_task(self._flush_forever(), name="flush")
        try:
            if settings.state_file is not None:
                await self._follow_state_file()
            else:
                reader = self._reader or ClusterReader.connect(
                    host=settings.kube_host,
                    kubeconfig=settings.kubeconfig,
                    context=settings.kube_context,
                    lease_timeout=settings.renew_deadline.total_seconds() / 2,
                )
                try:
                    if settings.leader_election:
                        await self._lead(reader)
                    else:
                        await self._watch(reader)
                finally:
                    reader.close()
        finally:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            await self._client.aclose()
            await self.health.close()

    async def _lead(self, reader: ClusterReader) -> None:
        settings = self.settings
        elector = self._elector = LeaderElector(
            reader,
            namespace=settings.effective_lease_namespace(),
            name=settings.lease_name,
            identity=settings.instance,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            clock=self._clock,
        )
        watching: asyncio.Task[None] | None = None
        try:
            while True:
                self._beat()
                leader = await elector.try_acquire_or_renew()
                if leader and watching is None:
                    watching = asyncio.create_task(self._watch(reader), name="watch")
                elif not leader and watching is not None:
                    await _cancel(watching)
                    watching = None
                    self._loop = None
                await asyncio.sleep(self._retry_period.total_seconds())
        finally:
            if watching is not None:
                await _cancel(watching)
            # Shielded: a cancelled shutdown must still hand the Lease over.
            await asyncio.shield(elector.release())

    async def _watch(self, reader: ClusterReader) -> None:
        """The watch loop, started again (after a pause) should it ever fail."""
        settings = self.settings
        backoff = Backoff(base=1.0, cap=60.0)
        while True:
            loop = self._loop = WatchLoop(
                reader,
                settings.watched_kinds,
                send=self._send,
                clock=self._clock,
                min_interval=settings.min_interval,
                snapshot_interval=settings.snapshot_interval,
                namespaces=settings.namespaces,
                root=settings.root,
                on_stream_failure=self._count_watch_restart,
            )
            try:
                await loop.run()
                # Returned: a kind missing before is served now; watch it too, from a new list.
            except (KubeError, OSError) as exc:
                log.error("watch loop failed; starting it again", error=str(exc))
                await asyncio.sleep(backoff.next())
            except Exception:
                log.exception("watch loop failed; starting it again")
                await asyncio.sleep(backoff.next())
            self._count_watch_restart()

    def _count_watch_restart(self) -> None:
        self._watch_restarts += 1

    async def _follow_state_file(self) -> None:
        settings = self.settings
        assert settings.state_file is not None
        state = self._state = WatchState(
            [STATE_FILE_STREAM],
            now=self._clock(),
            min_interval=settings.min_interval,
            snapshot_interval=settings.snapshot_interval,
        )
        period = max(1.0, settings.min_interval.total_seconds())
        last_problem: str | None = None
        while True:
            self._beat()
            now = self._clock()
            try:
                found = await asyncio.to_thread(
                    read_state_file,
                    settings.state_file,
                    now,
                    max_age=settings.state_file_max_age,
                )
            except StateFileError as exc:
                if str(exc) != last_problem:
                    log.warning("state file unusable; reporting what it last held", error=str(exc))
                last_problem = str(exc)
            else:
                problems = "; ".join(found.errors) or None
                if problems and problems != last_problem:
                    log.warning("state file entries skipped", errors=list(found.errors))
                last_problem = problems
                state.replace(STATE_FILE_STREAM, found.records)
            emission = state.poll(self._clock())
            if emission is not None:
                await self._send(emission)
            await asyncio.sleep(period)

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL.total_seconds())
            self._beat()
            if self._reporter is not None and self._reporter.pending:
                try:
                    await self._reporter.flush(self._clock())
                except OSError as exc:
                    log.error("cannot replay the spool", error=str(exc))

    # --- reports -------------------------------------------------------------------------

    def identity(self, placement: Placement) -> ClusterIdentity:
        """The cluster's identity: settings first, then what the root reconciler says."""
        settings = self.settings
        environment = settings.environment or placement.environment
        cluster_type = settings.cluster_type or placement.cluster_type
        try:
            return ClusterIdentity(
                name=settings.cluster_name,
                environment=environment,
                cluster_type=cluster_type,
                labels=settings.labels,
            )
        except ValidationError:
            log.warning(
                "inferred placement is not usable; reporting without it",
                environment=placement.environment,
                cluster_type=placement.cluster_type,
            )
            return ClusterIdentity(
                name=settings.cluster_name,
                environment=settings.environment,
                cluster_type=settings.cluster_type,
                labels=settings.labels,
            )

    async def _send(self, emission: Emission) -> None:
        cluster = self.identity(emission.placement)
        if self._reporter is None:
            assert self._spool is not None
            self._reporter = Reporter(
                self._client,
                self._spool,
                cluster=cluster,
                instance=self.settings.instance,
                gate=self._leads_for,
            )
        elif cluster != self._reporter.cluster:
            # Same boot id and sequence: the hub sees one agent whose placement was filled in.
            log.info(
                "cluster placement changed",
                environment=cluster.environment,
                cluster_type=cluster.cluster_type,
            )
            self._reporter.cluster = cluster
        loop = self._loop
        skipped = loop.discovery.skipped_kinds() if loop and loop.discovery else ()
        try:
            await self._reporter.submit(
                emission.objects,
                full_snapshot=emission.full_snapshot,
                now=self._clock(),
                skipped_kinds=skipped,
            )
        except SpoolFull:
            pass  # logged and counted by the reporter; the next full snapshot makes up for it
        except ValidationError as exc:
            log.error("report not built", error=str(exc))

    def _leads_for(self, seconds: float) -> bool:
        """May a request that lasts at most `seconds` start now? Only if the Lease is held
        until it is over (or there is no leader election)."""
        if self._elector is None:
            return True
        return self._elector.is_leader(self._clock() + timedelta(seconds=seconds))

    # --- probes --------------------------------------------------------------------------

    def _beat(self) -> None:
        self._beat_at = self._clock()

    def status(self) -> dict[str, object]:
        """What the probes (and the logs, on request) say about this agent."""
        document: dict[str, object] = {"instance": self.settings.instance}
        if self._elector is None:
            document["role"] = "sole reporter"
        else:
            leading = self._elector.is_leader()
            document["role"] = "leader" if leading else "standby"
            document["holder"] = self._elector.holder
            if self._elector.last_error:
                document["lease_error"] = self._elector.last_error
        loop = self._loop
        state = loop.state if loop is not None else self._state
        if state is not None:
            document["objects"] = len(state)
            document["synced"] = state.complete
        if loop is not None:
            if loop.discovery is not None and loop.discovery.missing:
                document["missing_kinds"] = loop.discovery.describe_missing()
            if loop.failing:
                document["failing"] = dict(loop.failing)
        if self._reporter is not None:
            document["boot_id"] = self._reporter.boot_id
            document["sequence"] = self._reporter.sequence
            document["pending"] = self._reporter.pending
            document["delivery"] = asdict(self._reporter.counters)
        return document

    def _live(self) -> tuple[bool, dict[str, object]]:
        stalled = self._clock() - self._beat_at
        ok = stalled < max(STALL_LIMIT, 5 * self._retry_period)
        return ok, {"since_last_beat": round(stalled.total_seconds(), 1)}

    def _readings(self) -> Readings:
        reporter, spool, elector = self._reporter, self._spool, self._elector
        return Readings(
            delivery=reporter.counters if reporter is not None else DeliveryCounters(),
            spool_bytes=spool.used_bytes if spool is not None else 0,
            spool_reports=len(spool) if spool is not None else 0,
            watch_restarts=self._watch_restarts,
            leader=elector is None or elector.is_leader(),  # as status() has it
        )

    def _ready(self) -> tuple[bool, dict[str, object]]:
        document = self.status()
        if self._elector is not None and not self._elector.is_leader():
            # A standby is ready once it can read the Lease: it can take over when needed.
            ok = self._elector.holder is not None and not self._elector.last_error
        else:
            ok = self._reporter is not None
        return ok, document


async def _cancel(task: "asyncio.Task[None]") -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _run_until_stopped(settings: AgentSettings) -> int:
    runner = AgentRunner(settings)
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    try:
        await runner.run()
    except asyncio.CancelledError:
        log.info("stopped")
        return 0
    except KubeError as exc:
        log.error("cannot start", error=str(exc))
        return 1
    return 0


def _settings_errors(exc: ValidationError) -> str:
    lines = ["fleetmark agent: the FLEETMARK_AGENT_* settings are not usable:"]
    for error in exc.errors():
        field = "_".join(str(part) for part in error["loc"]).upper()
        name = f"FLEETMARK_AGENT_{field}" if field else "settings"
        lines.append(f"  {name}: {error['msg']}")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Build the settings from the environment and run the agent; the exit status."""
    try:
        settings = AgentSettings()
    except ValidationError as exc:
        sys.stderr.write(_settings_errors(exc))
        return 2
    configure_logging(settings.log_format, settings.log_level)
    log.info(
        "starting",
        cluster=settings.cluster_name,
        instance=settings.instance,
        hub=str(settings.hub_url),
        source="state file" if settings.state_file else "kubernetes",
    )
    return asyncio.run(_run_until_stopped(settings))
