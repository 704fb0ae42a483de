"""Hub health: what the hub's own Prometheus metrics (hub/metrics.py) say about it.

It reads no SQL: its data source is a `prometheus` variable (`PROMETHEUS`) and its `job`
variable the hub's scrape job (docs/grafana.md). `$__rate_interval` is at least four scrape
intervals, from the data source's `timeInterval` (provisioning/datasources/prometheus.yaml).
"""

from collections.abc import Sequence
from typing import TypeVar

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.builders import stat as stat_builders
from grafana_foundation_sdk.builders import table as table_builders
from grafana_foundation_sdk.builders import timeseries as timeseries_builders
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import common as common_models
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from dashboards.common import dashboard
from hub.palette import HEX, Colour

__all__ = ["DATASOURCE", "EXPRESSIONS", "PROMETHEUS", "SCRAPE_JOB", "TITLE", "UID", "build"]

UID = "fleetmark-hub-health"
TITLE = "fleetmark: Hub health"

# The data source variable and the scrape job variable.
PROMETHEUS = "prometheus"
SCRAPE_JOB = "job"
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid=f"${{{PROMETHEUS}}}")
# Every scrape job of the hub: a regular expression, so "All" matches them all.
_JOB = f'job=~"${SCRAPE_JOB}"'
_RATE = "[$__rate_interval]"


def _metric(name: str, *matchers: str) -> str:
    return f"{name}{{{', '.join((_JOB, *matchers))}}}"


def _quantile(fraction: float, by: str) -> str:
    buckets = _metric("fleetmark_http_request_duration_seconds_bucket")
    return f"histogram_quantile({fraction}, sum by ({by}) (rate({buckets}{_RATE})))"


_SINCE_SUCCESS = (
    f"time() - max by (job_name) ({_metric('fleetmark_job_last_success_timestamp_seconds')})"
)
_LAST_DURATION = f"max by (job_name) ({_metric('fleetmark_job_last_success_duration_seconds')})"
_FAILED = 'outcome="failed"'
_SINCE_FAILURE = (
    f"time() - max by (job_name) ({_metric('fleetmark_job_last_run_timestamp_seconds', _FAILED)})"
)

# Each panel's expressions, by title, with the legend of each (or the column it makes).
EXPRESSIONS: dict[str, dict[str, str]] = {
    "Store reachable": {
        f"min({_metric('fleetmark_store_reachable')})": "Reachable",
    },
    "Replicas scraped": {
        f"sum(up{{{_JOB}}})": "Replicas",
    },
    "Fleet gauges age": {
        f"time() - max({_metric('fleetmark_fleet_snapshot_timestamp_seconds')})": "Age",
    },
    "Repositories whose fetch fails": {
        f"sum(max by (repository) ({_metric('fleetmark_harvest_fetch_failing')}))": "Failing",
    },
    "Reports per second by outcome": {
        f"sum by (outcome) (rate({_metric('fleetmark_reports_total')}{_RATE}))": "{{outcome}}",
    },
    "Requests per second by status": {
        "sum by (status) "
        f"(rate({_metric('fleetmark_http_request_duration_seconds_count')}{_RATE}))": "{{status}}",
    },
    "Request latency": {
        _quantile(0.5, "le"): "p50",
        _quantile(0.95, "le"): "p95",
        _quantile(0.99, "le"): "p99",
    },
    "Request latency p95 by route": {
        _quantile(0.95, "le, method, route"): "{{method}} {{route}}",
    },
    "Jobs": {
        _SINCE_SUCCESS: "Since last success",
        _LAST_DURATION: "Last success took",
        _SINCE_FAILURE: "Since last failure",
    },
    "Time since each job's last success": {
        _SINCE_SUCCESS: "{{job_name}}",
    },
    "Duration of each job's last success": {
        _LAST_DURATION: "{{job_name}}",
    },
    "Harvest lag per repository": {
        "max by (repository, role) "
        f"({_metric('fleetmark_harvest_lag_seconds')})": "{{repository}} ({{role}})",
    },
    "Failing fetches": {
        f"max by (repository, role) ({_metric('fleetmark_harvest_fetch_failing')}) == 1": "Failing",
    },
}


def _queries(title: str) -> list[tuple[str, str, str]]:
    """The panel's queries: (refId A, B, …, expression, legend)."""
    return [
        (chr(ord("A") + number), expr, legend)
        for number, (expr, legend) in enumerate(EXPRESSIONS[title].items())
    ]


def _targets(title: str, *, instant: bool, table: bool = False) -> list[prometheus.Dataquery]:
    targets = []
    for ref, expr, legend in _queries(title):
        query = prometheus.Dataquery().expr(expr).ref_id(ref).legend_format(legend)
        query = query.instant() if instant else query.range()
        if table:
            query = query.format(PromQueryFormat.TABLE)
        targets.append(query)
    return targets


P = TypeVar("P", stat_builders.Panel, table_builders.Panel, timeseries_builders.Panel)
Step = tuple[float | None, Colour]


def _panel(panel: P, title: str, description: str, height: int, span: int) -> P:
    return (
        panel.title(title).description(description).datasource(DATASOURCE).height(height).span(span)
    )


def _steps(*steps: Step) -> dashboard_builders.ThresholdsConfig:
    return (
        dashboard_builders.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(value=value, color=HEX[colour]) for value, colour in steps])
    )


def _stat(
    title: str,
    description: str,
    steps: Sequence[Step],
    *,
    unit: str = "none",
    mappings: Sequence[model.ValueMap] = (),
) -> stat_builders.Panel:
    """A stat of one instant expression, on its colour: the thresholds' steps of the palette."""
    panel = _panel(stat_builders.Panel(), title, description, height=4, span=6)
    for target in _targets(title, instant=True):
        panel = panel.with_target(target)
    return (
        panel.unit(unit)
        .thresholds(_steps(*steps))
        .color_scheme(dashboard_builders.FieldColor().mode(model.FieldColorModeId.THRESHOLDS))
        .mappings(list(mappings))
        .color_mode(common_models.BigValueColorMode.BACKGROUND_SOLID)
        .graph_mode(common_models.BigValueGraphMode.NONE)
        .reduce_options(common_builders.ReduceDataOptions().values(False).calcs(["lastNotNull"]))
    )


def _timeseries(
    title: str, description: str, *, unit: str = "short", span: int = 12
) -> timeseries_builders.Panel:
    panel = _panel(timeseries_builders.Panel(), title, description, height=8, span=span)
    for target in _targets(title, instant=False):
        panel = panel.with_target(target)
    return panel.unit(unit).min(0)


def _jobs() -> table_builders.Panel:
    """One row per job: the three instant expressions side by side, joined on `job_name`."""
    title = "Jobs"
    panel = _panel(
        table_builders.Panel(),
        title,
        "Per hub job: how long ago its last successful run (on any replica) finished, how "
        "long that run took, and how long ago a run last failed (empty: none of the newest "
        "kept). A job that has not succeeded for several of its intervals fires the alert "
        "rule Hub job not succeeding.",
        height=8,
        span=24,
    )
    for target in _targets(title, instant=True, table=True):
        panel = panel.with_target(target)
    names = {f"Value #{ref}": legend for ref, _, legend in _queries(title)}
    return (
        panel.with_transformation(model.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            model.DataTransformerConfig(
                id_val="organize",
                options={
                    "excludeByName": {"Time": True},
                    "renameByName": {"job_name": "Job", **names},
                    "indexByName": {"job_name": 0, **{name: i for i, name in enumerate(names, 1)}},
                },
            )
        )
        .unit("s")
    )


def _failing() -> table_builders.Panel:
    title = "Failing fetches"
    panel = _panel(
        table_builders.Panel(),
        title,
        "The repositories whose last fetch failed (the alert rule Harvest failing fires for "
        "each); the Fleet overview's harvest table shows the error.",
        height=8,
        span=12,
    )
    for target in _targets(title, instant=True, table=True):
        panel = panel.with_target(target)
    return panel.with_transformation(
        model.DataTransformerConfig(
            id_val="organize",
            options={
                "excludeByName": {"Time": True, "Value": True},
                "renameByName": {"repository": "Repository", "role": "Role"},
            },
        )
    )


def _variables() -> list[cogbuilder.Builder[model.VariableModel]]:
    return [
        dashboard_builders.DatasourceVariable(PROMETHEUS).label("Prometheus").type("prometheus"),
        dashboard_builders.QueryVariable(SCRAPE_JOB)
        .label("Scrape job")
        .datasource(DATASOURCE)
        .query("label_values(fleetmark_store_reachable, job)")
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(model.VariableOption(selected=True, text=["All"], value=["$__all"]))
        .refresh(model.VariableRefresh.ON_DASHBOARD_LOAD)
        .sort(model.VariableSort.ALPHABETICAL_ASC),
    ]


def build() -> model.Dashboard:
    reachable = [
        model.ValueMap(
            options={
                "0": model.ValueMappingResult(text="unreachable", index=0),
                "1": model.ValueMappingResult(text="reachable", index=1),
            }
        )
    ]
    return (
        dashboard(
            UID,
            TITLE,
            "The hub's own metrics, from Prometheus: reports and requests, their latency, the "
            "background jobs, the store and the harvest.",
            own_variables=_variables(),
        )
        .with_panel(
            _stat(
                "Store reachable",
                "Whether every scraped replica reaches the store: unreachable while one answers "
                "503 at once to what needs the database.",
                [(None, "bad"), (1, "ok")],
                mappings=reachable,
            )
        )
        .with_panel(
            _stat(
                "Replicas scraped",
                "Replicas of the hub Prometheus scrapes successfully now.",
                [(None, "bad"), (1, "idle")],
            )
        )
        .with_panel(
            _stat(
                "Fleet gauges age",
                "How old the fleet gauges are: the newest snapshot of the store any replica "
                "took (every FLEETMARK_METRICS_REFRESH_INTERVAL while scraped).",
                [(None, "idle"), (300, "warn")],
                unit="s",
            )
        )
        .with_panel(
            _stat(
                "Repositories whose fetch fails",
                "GitOps repositories whose last fetch failed.",
                [(None, "ok"), (1, "bad")],
            )
        )
        .with_panel(
            _timeseries(
                "Reports per second by outcome",
                "Agent reports the replicas received, by outcome: accepted, duplicate, or "
                "refused (unauthorized, forbidden, too_large, invalid, unavailable, failed).",
                unit="reqps",
            )
        )
        .with_panel(
            _timeseries(
                "Requests per second by status",
                "HTTP requests the replicas answered, by status.",
                unit="reqps",
            )
        )
        .with_panel(
            _timeseries(
                "Request latency",
                "Of every request the replicas answered: the median, p95 and p99.",
                unit="s",
            )
        )
        .with_panel(
            _timeseries(
                "Request latency p95 by route",
                "The p95 of each route (its template, `unmatched` for an unknown path).",
                unit="s",
            )
        )
        .with_panel(_jobs())
        .with_panel(
            _timeseries(
                "Time since each job's last success",
                "Grows by the second between two successful runs; a job that stops "
                "succeeding keeps climbing.",
                unit="s",
            )
        )
        .with_panel(
            _timeseries(
                "Duration of each job's last success",
                "How long each job's last successful run took.",
                unit="s",
            )
        )
        .with_panel(
            _timeseries(
                "Harvest lag per repository",
                "Time since each repository's least recently harvested branch was harvested.",
                unit="s",
            )
        )
        .with_panel(_failing())
        .build()
    )
