"""Prometheus metrics of one hub process, in a registry of its own."""

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from hub.ingest.schemas import ReportReply

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class HubMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reports = Counter(
            "fleetmark_reports_total",
            "Agent reports received, by outcome.",
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
            "HTTP request latency by route and status.",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )

        # A label lookup takes a lock and builds tuples: each series is looked up once, on
        # first use (as before, a series appears only once it has been counted).
        self._outcomes: dict[str, Counter] = {}
        self._timers: dict[tuple[str, str, int], Histogram] = {}

    def record_report(self, reply: ReportReply) -> None:
        outcome = "duplicate" if reply.duplicate else "accepted"
        counter = self._outcomes.get(outcome)
        if counter is None:
            counter = self._outcomes[outcome] = self.reports.labels(outcome)
        counter.inc()
        self.objects_changed.inc(reply.changed)

    def time_request(self, method: str, route: str, status: int, seconds: float) -> None:
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
