"""DORA: deployment frequency, lead time (median, p90), change failure rate and time to
restore, per environment (of its platform commits) and per workload (of its versions) over
the time picker's range, with their trends per day, and the failing reconciler states per
hour behind the failure rate.

Read from the DORA job's rollup (migration 0020, grafana.dora_rollout) and the hourly rollup
of transitions (0018), never the raw history. A range is counted as GET /api/v1/dora counts
it (hub/dora/calculation.py): deployments are the rollouts completed in the range; the change
failure rate and time to restore are of the rollouts started in it; rollouts of revisions
committed more than 7 days before the range are not looked for; and facts at or after the
earlier of the range's end and the rollup's last refresh are not yet seen. Percentiles
interpolate between ranks as the API's do (percentile_cont).
"""

from grafana_foundation_sdk.builders.table import Panel as TablePanel
from grafana_foundation_sdk.models.common import GraphDrawStyle
from grafana_foundation_sdk.models.dashboard import Dashboard, DynamicConfigValue

from dashboards.common import (
    EVERY_CLUSTER,
    PER_HOUR,
    chosen,
    dashboard,
    placed,
    scope,
    table,
    timeseries,
)

__all__ = ["TITLE", "UID", "build"]

UID = "fleetmark-dora"
TITLE = "fleetmark: DORA"

_SINCE = "CAST($__timeFrom() AS timestamptz)"
_UNTIL = "CAST($__timeTo() AS timestamptz)"
# What is seen: before the range's end and before the rollup's last refresh.
_CUT = f"LEAST({_UNTIL}, refreshed_at)"
# hub/dora/service.py LOOKBACK.
_LOOKBACK = "INTERVAL '7 days'"
_COMPLETED = f"completed_at >= {_SINCE} AND completed_at < {_CUT}"
_STARTED = f"started_at >= {_SINCE} AND started_at < {_CUT}"
_FAILED = f"{_STARTED} AND failed_at < {_CUT}"
_RESTORED = f"{_FAILED} AND restored_at < {_CUT}"
_SEEN = f"committed_at >= {_SINCE} - {_LOOKBACK} AND committed_at < {_CUT} AND started_at < {_CUT}"
_ENVIRONMENT = chosen("environment", "environment")
_WORKLOAD = f"{chosen('workload', 'workload')} AND {chosen('workspace', 'workspace')}"


def _spread(column: str, where: str, name: str) -> str:
    return ",\n       ".join(
        f"percentile_cont({fraction}) WITHIN GROUP (ORDER BY {column}) FILTER (WHERE {where}) "
        f'AS "{name} {label}"'
        for fraction, label in ((0.5, "median"), (0.9, "p90"))
    )


FIGURES = f"""
count(*) FILTER (WHERE {_COMPLETED}) AS "Deployments",
       count(*) FILTER (WHERE {_COMPLETED})
           / (extract(epoch FROM {_UNTIL} - {_SINCE}) / 86400) AS "Deployments per day",
       {_spread("lead_time_seconds", _COMPLETED, "Lead time")},
       count(*) FILTER (WHERE {_STARTED}) AS "Rollouts started",
       CAST(count(*) FILTER (WHERE {_FAILED}) AS double precision)
           / NULLIF(count(*) FILTER (WHERE {_STARTED}), 0) AS "Change failure rate",
       {_spread("restore_seconds", _RESTORED, "Time to restore")},
       count(*) FILTER (WHERE {_FAILED} AND NOT COALESCE(restored_at < {_CUT}, false))
           AS "Unrestored"
"""

PER_ENVIRONMENT = f"""
SELECT environment AS "Environment",
       {FIGURES}
FROM grafana.dora_rollout
WHERE workload IS NULL AND {_SEEN} AND {_ENVIRONMENT}
GROUP BY environment, environment_position
ORDER BY environment_position NULLS LAST, environment
"""

PER_WORKLOAD = f"""
SELECT workload AS "Workload", environment AS "Environment",
       {FIGURES}
FROM grafana.dora_rollout
WHERE workload IS NOT NULL AND {_SEEN} AND {_ENVIRONMENT} AND {_WORKLOAD}
GROUP BY workload, environment, environment_position
ORDER BY workload, environment_position NULLS LAST, environment
"""


def _per_day(column: str, value: str, fill: str = "") -> str:
    """A trend per (UTC) day and environment of the platform commits' rollouts, by `column`'s
    day, of those the range's figures look for and the rollup's last refresh has seen; a day
    without them is `fill` (Grafana's fill argument) if given, else left out."""
    fill = f", {fill}" if fill else ""
    return f"""
SELECT $__timeGroupAlias({column}, '1d'{fill}), environment AS metric, {value} AS value
FROM grafana.dora_rollout
WHERE workload IS NULL AND $__timeFilter({column}) AND {column} < refreshed_at
  AND committed_at >= {_SINCE} - {_LOOKBACK} AND {_ENVIRONMENT}
GROUP BY 1, 2
ORDER BY 1
"""


DEPLOYMENTS_PER_DAY = _per_day("completed_at", "count(*)", fill="0")
LEAD_TIME_PER_DAY = _per_day(
    "completed_at", "percentile_cont(0.5) WITHIN GROUP (ORDER BY lead_time_seconds)"
)
FAILURE_RATE_PER_DAY = _per_day(
    "started_at", "avg(CASE WHEN failed_at < refreshed_at THEN 1.0 ELSE 0.0 END)"
)

# Per hour: a bucket's sum divided by its hours. With every cluster chosen, from the sums per
# environment and cluster type (a few rows an hour); with clusters chosen, from theirs. The
# branch not taken is pruned when planned.
FAILING_PER_HOUR = f"""
SELECT $__timeGroupAlias(hour, $__interval, 0), environment AS metric,
       sum(not_ready) {PER_HOUR} AS value
FROM (
    SELECT x.hour, x.environment, x.not_ready FROM grafana.placement_hourly x
    WHERE {EVERY_CLUSTER} AND $__timeFilter(x.hour)
      AND {chosen("environment", "x.environment")} AND {chosen("cluster_type", "x.cluster_type")}
      AND {placed("x.environment", "x.cluster_type")}
    UNION ALL
    SELECT x.hour, x.environment, x.not_ready FROM grafana.transition_hourly x
    WHERE NOT {EVERY_CLUSTER} AND $__timeFilter(x.hour) AND {scope("x")}
) x
GROUP BY 1, 2
ORDER BY 1, 2
"""

_SECONDS = [DynamicConfigValue(id_val="unit", value="s")]
_SHARE = [DynamicConfigValue(id_val="unit", value="percentunit")]
_DURATIONS = ("Lead time median", "Lead time p90", "Time to restore median", "Time to restore p90")


def _figures(title: str, sql: str, description: str) -> TablePanel:
    panel = table(title, sql, description=description, height=8)
    for name in _DURATIONS:
        panel = panel.override_by_name(name, _SECONDS)
    return panel.override_by_name("Change failure rate", _SHARE)


def build() -> Dashboard:
    return (
        dashboard(
            UID,
            TITLE,
            "Deployment frequency, lead time, change failure rate and time to restore per "
            "environment and workload, with their trends.",
            # The rollup the panels read changes as often as the DORA job runs (every
            # FLEETMARK_DORA_INTERVAL, 5 minutes by default).
            refresh="5m",
        )
        .time("now-30d", "now")
        .with_panel(
            _figures(
                "Per environment (platform commits)",
                PER_ENVIRONMENT,
                "The four DORA figures of each environment's platform commits over the range.",
            )
        )
        .with_panel(
            _figures(
                "Per workload and environment (versions)",
                PER_WORKLOAD,
                "The four DORA figures of each workload's versions in each environment.",
            )
        )
        .with_panel(
            timeseries(
                "Deployments per day",
                DEPLOYMENTS_PER_DAY,
                description="Platform commit rollouts completed, per UTC day and environment.",
                span=8,
            ).draw_style(GraphDrawStyle.BARS)
        )
        .with_panel(
            timeseries(
                "Lead time per day (median)",
                LEAD_TIME_PER_DAY,
                description="From commit to healthy on every expected cluster, of the "
                "rollouts completed that UTC day.",
                span=8,
            ).unit("s")
        )
        .with_panel(
            timeseries(
                "Change failure rate per day",
                FAILURE_RATE_PER_DAY,
                description="The share of the rollouts started that UTC day that failed.",
                span=8,
            ).unit("percentunit")
        )
        .with_panel(
            timeseries(
                "Reconcilers turning not ready per hour",
                FAILING_PER_HOUR,
                description="State changes to Ready false, per environment: the failures "
                "behind the change failure rate and what time to restore ends.",
            )
        )
        .build()
    )
