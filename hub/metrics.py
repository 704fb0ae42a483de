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

    def record_report(self, reply: ReportReply) -> None:
        self.reports.labels("duplicate" if reply.duplicate else "accepted").inc()
        self.objects_changed.inc(reply.changed)

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
            self.metrics.requests.labels(scope["method"], path, str(status)).observe(
                time.perf_counter() - started
            )
