"""Prometheus metrics of one agent process, for `GET /metrics` on the health port.

`AgentMetrics` reads the counts where they are made (the reporter's `DeliveryCounters`, the
spool, the runner's watch restarts, the elector's Lease) at each scrape, instead of counting
twice. Labels take fixed values only (the delivery outcomes).
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent.delivery import DeliveryCounters

__all__ = ["AgentMetrics", "Readings"]

# DeliveryCounters fields that count reports, as the `outcome` label of the reports counter.
_REPORT_OUTCOMES = ("sent", "replayed", "spooled", "compacted", "rejected", "split", "refused")


@dataclass(frozen=True, slots=True)
class Readings:
    delivery: DeliveryCounters
    spool_bytes: int
    spool_reports: int
    watch_restarts: int
    leader: bool  # this process reports: it holds the Lease, or there is no leader election


class _Collector(Collector):
    def __init__(self, read: Callable[[], Readings]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        now = self._read()
        reports = CounterMetricFamily(
            "fleetmark_agent_reports",
            "Reports by what became of them: sent directly, replayed from the spool, put in "
            "the spool, compacted out of it, rejected by the hub, refused by the hub as too "
            "large and sent again in pieces, refused by a full spool.",
            labels=["outcome"],
        )
        for outcome in _REPORT_OUTCOMES:
            reports.add_metric([outcome], getattr(now.delivery, outcome))
        yield reports
        yield CounterMetricFamily(
            "fleetmark_agent_duplicate_replies",
            "Replies saying the hub already had the report (a reply lost earlier).",
            value=now.delivery.duplicates,
        )
        yield CounterMetricFamily(
            "fleetmark_agent_spool_corrupt_files",
            "Spool files moved aside as unreadable.",
            value=now.delivery.corrupt,
        )
        yield GaugeMetricFamily(
            "fleetmark_agent_spool_bytes",
            "Bytes the spool holds against its bound: reports waiting and reports rejected.",
            now.spool_bytes,
        )
        yield GaugeMetricFamily(
            "fleetmark_agent_spool_reports", "Reports waiting in the spool.", now.spool_reports
        )
        yield CounterMetricFamily(
            "fleetmark_agent_watch_restarts",
            "Watch streams that failed and are tried again, and watch loops started again.",
            value=now.watch_restarts,
        )
        yield GaugeMetricFamily(
            "fleetmark_agent_leader",
            "1 while this agent reports (it holds the Lease, or leader election is off), "
            "0 while it stands by.",
            value=int(now.leader),
        )


class AgentMetrics:
    """One agent process's metrics, in a registry of its own."""

    def __init__(self, read: Callable[[], Readings]) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_Collector(read))

    def render(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
