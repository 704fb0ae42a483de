"""DORA: the four figures per environment and per workload over the time picker's range, their
trends per day, the failing states per hour, and a headline of bands (hub/dora/bands.py).

Read from the DORA job's rollup (migration 0020) and the hourly rollup of transitions (0018),
never the raw history; a range counts as GET /api/v1/dora counts it, percentile_cont included.
"""

from grafana_foundation_sdk.builders.common import ReduceDataOptions
from grafana_foundation_sdk.builders.table import Panel as TablePanel
from grafana_foundation_sdk.models.common import GraphDrawStyle
from grafana_foundation_sdk.models.dashboard import (
    Dashboard,
    DashboardRegexMapOptions,
    DynamicConfigValue,
    RegexMap,
    ValueMapping,
    ValueMappingResult,
)

from dashboards.common import (
    EVERY_CLUSTER,
    PER_HOUR,
    chosen,
    dashboard,
    per_chosen_cluster,
    placed,
    stat,
    table,
    timeseries,
)
from hub.dora.bands import BANDS, COLOURS, Band
from hub.palette import HEX

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


def _banded(figure: str, value: str, shown: str) -> str:
    """SQL: `value`'s band by BANDS[figure] and the value as `shown`, as text ("elite: 2.5 a
    day"); "no rollouts" for no value."""
    bounds = BANDS[figure]
    better = ">=" if bounds.higher_is_better else "<="
    cases = " ".join(
        f"WHEN {value} {better} {bound} THEN '{band}'" for bound, band in bounds.bands()
    )
    return (
        f"CASE WHEN {value} IS NULL THEN 'no rollouts' "
        f"ELSE CASE {cases} ELSE '{Band.LOW}' END || ': ' || {shown} END"
    )


def _duration(seconds: str) -> str:
    """SQL: seconds as text in minutes, hours or days."""
    value = f"CAST({seconds} AS numeric)"
    return (
        f"CASE WHEN {seconds} < 3600 THEN round({value} / 60) || ' min' "
        f"WHEN {seconds} < 172800 THEN round({value} / 3600, 1) || ' h' "
        f"ELSE round({value} / 86400, 1) || ' d' END"
    )


_PER_DAY = 'f."Deployments per day"'
_LEAD_TIME = 'f."Lead time median"'
_FAILURE_RATE = 'f."Change failure rate"'
_RESTORE = 'f."Time to restore median"'
_BANDED = {
    "Deployment frequency": _banded(
        "deployments_per_day", _PER_DAY, f"to_char({_PER_DAY}, 'FM999990.00') || ' a day'"
    ),
    "Lead time": _banded("lead_time", _LEAD_TIME, _duration(_LEAD_TIME)),
    "Change failure rate": _banded(
        "change_failure_rate",
        _FAILURE_RATE,
        f"round(CAST({_FAILURE_RATE} AS numeric) * 100) || ' %'",
    ),
    "Time to restore": _banded("time_to_restore", _RESTORE, _duration(_RESTORE)),
}
_HEADLINE_COLUMNS = ",\n       ".join(f'{sql} AS "{title}"' for title, sql in _BANDED.items())

# The latest environment in the promotion order (those with no place in it after the others)
# and the four figures of its platform commits over the range, each with its band.
HEADLINE = f"""
SELECT e.name AS "Environment",
       {_HEADLINE_COLUMNS}
FROM (SELECT name FROM grafana.environment ORDER BY position DESC NULLS LAST, name LIMIT 1) e
CROSS JOIN LATERAL (
    SELECT {FIGURES}
    FROM grafana.dora_rollout
    WHERE workload IS NULL AND environment = e.name AND {_SEEN}
) f
"""
# Each band's text in its colour; anything else (the environment, "no rollouts") neutral.
_BANDS: list[ValueMapping] = [
    RegexMap(
        options=DashboardRegexMapOptions(
            pattern=f"^{band}:", result=ValueMappingResult(color=HEX[COLOURS[band]], index=index)
        )
    )
    for index, band in enumerate(Band)
]
_TEXT = [
    DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": HEX["idle"]}),
]


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
    SELECT x.hour, x.environment, x.not_ready
    FROM {per_chosen_cluster("grafana.transition_hourly", "$__timeFilter(x.hour)")}
    WHERE NOT {EVERY_CLUSTER}
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
            stat(
                "Latest environment",
                HEADLINE,
                description="The latest environment of the promotion chain, its platform "
                "commits over the range: deployment frequency, lead time (median), change "
                "failure rate and time to restore (median), each with its performance band "
                "(elite, high, medium, low) after the DORA report of 2023: elite deploys daily "
                "or more, in at most a day from commit, fails 5 % at most and restores within "
                "an hour.",
            )
            .reduce_options(ReduceDataOptions().values(False).calcs(["lastNotNull"]).fields("/.*/"))
            .override_by_field_type("string", _TEXT)
            .mappings(_BANDS)
        )
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
