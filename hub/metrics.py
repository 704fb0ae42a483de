"""Prometheus metrics of one hub process, in a registry of its own: what this process served
(requests, reports by outcome), published and delivered (events), and the fleet gauges, which
every replica exports alike from a snapshot of the store (hub/runs)."""

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from datetime import timedelta
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError
from starlette.responses import JSONResponse

from hub.client.schemas.rollouts import RolloutHealth
from hub.database import STORE_BUSY_ERRORS, STORE_UNAVAILABLE_ERRORS, StoreGate
from hub.errors import FleetmarkError
from hub.events.service import METRICS as EVENT_METRICS
from hub.ingest.schemas import ReportReply
from hub.runs.service import FleetSnapshot
from hub.types import Clock

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = structlog.get_logger("fleetmark.metrics")

# A refused report's outcome, by the status it was answered with.
_REFUSALS = {
    400: "invalid",
    401: "unauthorized",
    403: "forbidden",
    413: "too_large",
    422: "invalid",
    503: "unavailable",
}
REPORT_OUTCOMES = ("accepted", "duplicate", *dict.fromkeys(_REFUSALS.values()), "failed")
_OBJECT_STATES = ("ready", "failing", "progressing", "suspended")
# Request methods labelled by name; any other (PROPFIND, PURGE, made-up ones) is `other`, so
# that anonymous requests cannot add label sets at will.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_AGENT_STATES = ("reporting", "stale", "never_reported")
_COMMIT_STATUS_STATES = ("pending", "success", "failure")


def _label(value: str | None) -> str:
    """A label's value; empty for clusters placed in no environment or cluster type."""
    return "" if value is None else value


def rollout_families(rollouts: Iterable[RolloutHealth]) -> Iterator[Metric]:
    """The current rollout per workload (empty: the platform commits) and environment:
    a series each, the version in the info metric only."""
    labels = ["workload", "environment"]
    ratio = GaugeMetricFamily(
        "fleetmark_rollout_converged_ratio",
        "Share of the current rollout's expected clusters that run it Ready.",
        labels=labels,
    )
    # A summary of its quantiles alone: the clusters' times are figures of the store, not
    # observations of this process, so there is no _sum or _count.
    seconds = Metric(
        "fleetmark_rollout_time_to_converge_seconds",
        "Per cluster, from the target's commit time to when it ran it Ready, across the "
        "clusters that did: quantile 0.5, 0.95 and 1 (the max; below a converged ratio of "
        "1, the time so far).",
        "summary",
    )
    failed = GaugeMetricFamily(
        "fleetmark_rollout_failed_clusters",
        "Expected clusters that failed to reconcile the current rollout.",
        labels=labels,
    )
    info = InfoMetricFamily(
        "fleetmark_rollout",
        "The current rollout's version: a workload's version, or the platform commit's sha.",
        labels=labels,
    )
    for rollout in rollouts:
        values = [_label(rollout.workload), rollout.environment]
        if rollout.converged_ratio is not None:
            ratio.add_metric(values, rollout.converged_ratio)
        spread = rollout.time_to_converge
        for quantile, value in (
            ("0.5", spread.p50_seconds),
            ("0.95", spread.p95_seconds),
            ("1", spread.max_seconds),
        ):
            if value is not None:
                seconds.add_sample(
                    seconds.name, dict(zip(labels, values, strict=True), quantile=quantile), value
                )
        failed.add_metric(values, rollout.failed_clusters)
        info.add_metric(values, {"version": rollout.revision})
    yield from (ratio, seconds, failed, info)


class FleetCollector(Collector):
    """The fleet gauges, from the last snapshot taken: collecting never reads the store (so a
    scrape costs no query unless the snapshot is due, see `refresh`). Before the first
    snapshot there are none."""

    def __init__(self, *, max_age: timedelta, clock: Clock) -> None:
        self.max_age = max_age.total_seconds()
        self.clock = clock
        self.snapshot: FleetSnapshot | None = None
        self._taken: float | None = None
        self._lock = asyncio.Lock()

    async def refresh(self, take: Callable[[], Awaitable[FleetSnapshot]]) -> None:
        """Take a new snapshot when the last one is over `max_age` old. Scrapes that come
        while one is taken wait for it. A store that cannot be read keeps the last snapshot
        (its age shows in fleetmark_fleet_snapshot_timestamp_seconds) and is tried again
        once `max_age` has passed."""
        async with self._lock:
            if self._taken is not None and time.monotonic() - self._taken < self.max_age:
                return
            self._taken = time.monotonic()
            try:
                self.snapshot = await take()
            except (SQLAlchemyError, OSError) as exc:
                log.warning("fleet metrics not refreshed", error=type(exc).__name__)

    def collect(self) -> Iterator[Metric]:
        snapshot = self.snapshot
        if snapshot is None:
            return
        yield GaugeMetricFamily(
            "fleetmark_fleet_snapshot_timestamp_seconds",
            "When the fleet gauges were read from the store.",
            value=snapshot.taken_at.timestamp(),
        )
        yield from self._fleet(snapshot)
        yield from self._drift(snapshot)
        yield from self._harvest(snapshot)
        yield from self._jobs(snapshot)
        yield from self._events(snapshot)
        yield from self._statuses(snapshot)
        yield from rollout_families(snapshot.rollouts)
        if snapshot.clusters:
            yield from self._clusters(snapshot)

    @staticmethod
    def _fleet(snapshot: FleetSnapshot) -> Iterator[Metric]:
        group = ["environment", "cluster_type"]
        clusters = GaugeMetricFamily(
            "fleetmark_clusters",
            "Registered clusters by environment, cluster type and agent state: reporting "
            "(reported within the stale threshold), stale, never_reported.",
            labels=[*group, "state"],
        )
        objects = GaugeMetricFamily(
            "fleetmark_objects",
            "Live reconciler objects by environment, cluster type and state (ready, failing, "
            "progressing, suspended: they add up to every object).",
            labels=[*group, "state"],
        )
        live_drift = GaugeMetricFamily(
            "fleetmark_objects_live_drift",
            "Live reconciler objects whose reconciler reports drift (Argo CD OutOfSync, Flux "
            "Drifted), by environment and cluster type.",
            labels=group,
        )
        for environment in snapshot.fleet.environments:
            for cluster_type in environment.cluster_types:
                labels = [_label(environment.name), _label(cluster_type.name)]
                for state in _AGENT_STATES:
                    clusters.add_metric([*labels, state], getattr(cluster_type, state))
                for state in _OBJECT_STATES:
                    objects.add_metric([*labels, state], getattr(cluster_type.objects, state))
                live_drift.add_metric(labels, cluster_type.objects.drifted)
        yield from (clusters, objects, live_drift)

    @staticmethod
    def _drift(snapshot: FleetSnapshot) -> Iterator[Metric]:
        clusters = GaugeMetricFamily(
            "fleetmark_drifted_clusters",
            "Clusters with a drifted object or a stale agent, by environment.",
            labels=["environment"],
        )
        objects = GaugeMetricFamily(
            "fleetmark_drifted_objects",
            "Drifted objects by environment (a stale cluster's every object; a stale cluster "
            "without objects counts as one), as of the last drift evaluation.",
            labels=["environment"],
        )
        reasons = GaugeMetricFamily(
            "fleetmark_drifted_objects_by_reason",
            "Drifted objects by environment and reason; an object counts under each of its "
            "reasons, so these do not add up to fleetmark_drifted_objects.",
            labels=["environment", "reason"],
        )
        for environment in snapshot.drift.environments:
            name = _label(environment.environment)
            clusters.add_metric([name], environment.clusters)
            objects.add_metric([name], environment.objects)
            for reason, count in environment.reasons.items():
                reasons.add_metric([name, reason.value], count)
        yield from (clusters, objects, reasons)

    def _harvest(self, snapshot: FleetSnapshot) -> Iterator[Metric]:
        labels = ["repository", "role"]
        lag = GaugeMetricFamily(
            "fleetmark_harvest_lag_seconds",
            "Seconds since the repository's least recently harvested branch was harvested "
            "(none before its first harvest).",
            labels=labels,
        )
        errors = GaugeMetricFamily(
            "fleetmark_harvest_errors",
            "Distinct harvest errors recorded for the repository (bad files in its commits).",
            labels=labels,
        )
        failing = GaugeMetricFamily(
            "fleetmark_harvest_fetch_failing",
            "1 when the repository's last fetch failed, else 0.",
            labels=labels,
        )
        now = self.clock()
        for repository in snapshot.repositories:
            values = [repository.url, repository.role]
            harvested = [
                branch.harvested_at
                for branch in repository.branches
                if branch.deleted_at is None and branch.harvested_at is not None
            ]
            if harvested:
                lag.add_metric(values, max(0.0, (now - min(harvested)).total_seconds()))
            errors.add_metric(values, repository.error_count)
            failing.add_metric(values, 0 if repository.fetch_error is None else 1)
        yield from (lag, errors, failing)

    @staticmethod
    def _jobs(snapshot: FleetSnapshot) -> Iterator[Metric]:
        # `job_name`, not `job`: Prometheus sets `job` (and `instance`) on every series it
        # scrapes and would rename an exported `job` to `exported_job`.
        success = GaugeMetricFamily(
            "fleetmark_job_last_success_timestamp_seconds",
            "When the job's last successful run (on any replica) finished.",
            labels=["job_name"],
        )
        duration = GaugeMetricFamily(
            "fleetmark_job_last_success_duration_seconds",
            "How long the job's last successful run took.",
            labels=["job_name"],
        )
        last = GaugeMetricFamily(
            "fleetmark_job_last_run_timestamp_seconds",
            "When the job's newest round of each outcome finished: succeeded, failed, or "
            "skipped (another replica held the job's lock and ran that round).",
            labels=["job_name", "outcome"],
        )
        for runs in snapshot.jobs:
            for outcome, (_, finished_at) in runs.newest.items():
                last.add_metric([runs.job, outcome], finished_at.timestamp())
            if "succeeded" in runs.newest:
                started_at, finished_at = runs.newest["succeeded"]
                success.add_metric([runs.job], finished_at.timestamp())
                duration.add_metric([runs.job], (finished_at - started_at).total_seconds())
        yield from (success, duration, last)

    def _events(self, snapshot: FleetSnapshot) -> Iterator[Metric]:
        oldest = GaugeMetricFamily(
            "fleetmark_event_outbox_oldest_pending_age_seconds",
            "How long the oldest delivery still waiting to be sent has been in the outbox; 0 "
            "when none waits.",
        )
        age = 0.0
        if snapshot.events.oldest_pending is not None:
            age = max(0.0, (self.clock() - snapshot.events.oldest_pending).total_seconds())
        oldest.add_metric([], age)
        yield oldest

    @staticmethod
    def _statuses(snapshot: FleetSnapshot) -> Iterator[Metric]:
        counts = snapshot.statuses
        statuses = GaugeMetricFamily(
            "fleetmark_commit_statuses",
            "Commit statuses set on control-plane commits, by the state last posted.",
            labels=["state"],
        )
        for state in _COMMIT_STATUS_STATES:
            statuses.add_metric([state], counts.by_state.get(state, 0))
        waiting = GaugeMetricFamily(
            "fleetmark_commit_statuses_waiting",
            "Commit status changes not yet posted: the forge failed, refused or rate-limited them.",
            value=counts.waiting,
        )
        yield from (statuses, waiting)

    @staticmethod
    def _clusters(snapshot: FleetSnapshot) -> Iterator[Metric]:
        labels = ["environment", "cluster_type", "cluster"]
        agent = GaugeMetricFamily(
            "fleetmark_cluster_agent",
            "1 for the cluster's agent state: reporting, stale or never_reported.",
            labels=[*labels, "state"],
        )
        reported = GaugeMetricFamily(
            "fleetmark_cluster_last_report_timestamp_seconds",
            "When the cluster's agent last reported (none if it never did).",
            labels=labels,
        )
        objects = GaugeMetricFamily(
            "fleetmark_cluster_objects",
            "The cluster's live reconciler objects by state.",
            labels=[*labels, "state"],
        )
        for cluster in snapshot.clusters:
            values = [_label(cluster.environment), _label(cluster.cluster_type), cluster.name]
            agent.add_metric([*values, cluster.agent], 1)
            if cluster.last_seen_at is not None:
                reported.add_metric(values, cluster.last_seen_at.timestamp())
            for state in _OBJECT_STATES:
                objects.add_metric([*values, state], getattr(cluster.objects, state))
        yield from (agent, reported, objects)


class HubMetrics:
    def __init__(self, *, fleet_max_age: timedelta, clock: Clock, gate: StoreGate) -> None:
        self.registry = CollectorRegistry()
        Gauge(
            "fleetmark_store_reachable",
            "0 while this process answers 503 at once to requests that need the database, its "
            "last attempt to connect having failed; 1 otherwise.",
            registry=self.registry,
        ).set_function(lambda: 0.0 if gate.unreachable else 1.0)
        self.reports = Counter(
            "fleetmark_reports_total",
            "Agent reports received by this process, by outcome: accepted, duplicate, or "
            "refused (unauthorized, forbidden, too_large, invalid, unavailable, failed).",
            ["outcome"],
            registry=self.registry,
        )
        self.objects_changed = Counter(
            "fleetmark_object_changes_total",
            "Reconciler objects whose state changed on ingest.",
            registry=self.registry,
        )
        self.requests = Histogram(
            "fleetmark_http_request_duration_seconds",
            "HTTP request latency by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or "
            "other), route and status.",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.fleet = FleetCollector(max_age=fleet_max_age, clock=clock)
        self.registry.register(self.fleet)
        # Counted where events are published and delivered, in this process.
        for counter in EVENT_METRICS:
            self.registry.register(counter)

        # A label lookup takes a lock and builds tuples: each series is looked up once. Every
        # outcome is there from the start, so that a rate over it is 0 rather than missing.
        self._outcomes = {outcome: self.reports.labels(outcome) for outcome in REPORT_OUTCOMES}
        self._timers: dict[tuple[str, str, int], Histogram] = {}

    def record_report(self, reply: ReportReply) -> None:
        self._outcomes["duplicate" if reply.duplicate else "accepted"].inc()
        self.objects_changed.inc(reply.changed)

    def record_refused_report(self, error: Exception) -> None:
        """A report answered with an error: counted by the status it was answered with."""
        if isinstance(error, FleetmarkError):
            outcome = _REFUSALS.get(error.status_code, "failed")
        elif isinstance(error, STORE_BUSY_ERRORS + STORE_UNAVAILABLE_ERRORS):
            outcome = "unavailable"
        else:
            outcome = "failed"
        self._outcomes[outcome].inc()

    def time_request(self, method: str, route: str, status: int, seconds: float) -> None:
        if method not in _METHODS:
            method = "other"
        key = (method, route, status)
        timer = self._timers.get(key)
        if timer is None:
            timer = self._timers[key] = self.requests.labels(method, route, str(status))
        timer.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class RequestMetricsMiddleware:
    """Times every HTTP request; the route template keeps label cardinality bounded."""

    def __init__(self, app: ASGIApp, metrics: HubMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            self.metrics.time_request(scope["method"], path, status, time.perf_counter() - started)


class MetricsPortMiddleware:
    """With FLEETMARK_METRICS_PORT, a second listener of the same server: a request that came
    in on it may ask for /metrics alone, and one on the hub's port (the one an Ingress routes)
    never gets /metrics. Both answer anything else 404, as an unknown path is answered."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self.app = app
        self.port = port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            server = scope.get("server")
            on_metrics_port = server is not None and server[1] == self.port
            if on_metrics_port != (scope["path"] == "/metrics"):
                missing = JSONResponse({"error": "not_found", "detail": "Not Found"}, 404)
                await missing(scope, receive, send)
                return
        await self.app(scope, receive, send)
