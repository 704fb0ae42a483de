"""Drift: which clusters and objects are drifted, since when and why (every reason with its
evidence: commits and time behind, applied against desired commit, the reconciler's message,
config keys that differ), how many for each reason, drift minutes over time per environment,
and the drift periods."""

from grafana_foundation_sdk.models.dashboard import (
    Dashboard,
    DynamicConfigValue,
)

from dashboards.common import (
    EVERY_CLUSTER,
    PER_HOUR,
    chosen,
    dashboard,
    latest_first,
    link_clusters,
    placed,
    scope,
    stale,
    stat,
    table,
    timeseries,
)
from hub.drift.schemas import Reason
from hub.palette import colour

__all__ = ["TITLE", "UID", "build"]

UID = "fleetmark-drift"
TITLE = "fleetmark: Drift"

_STALE = f"(last_seen_at IS NULL OR {stale('last_seen_at')})"

TOTALS = f"""
SELECT count(*) FILTER (WHERE drifted_objects > 0 OR {_STALE}) AS "Drifted clusters",
       COALESCE(sum(drifted_objects), 0) AS "Drifted objects",
       count(*) FILTER (WHERE {_STALE}) AS "Stale clusters"
FROM grafana.cluster x
WHERE {scope("x")}
"""

SHOWN = 1000
# The reasons drawn in the palette's colour of failure.
_FAILED = ", ".join(f"'{reason}'" for reason in Reason if colour(reason) == "bad")

# A stale agent makes every row of its cluster drifted for that reason too (as the API
# says it); the drift job's reasons are the others. Read from the clusters drifted or stale,
# each one's objects by index: those with reasons, and the others only if it is stale. Most
# severe first (a reason of failure, then silence, then the others), then the latest
# environment first: a cut keeps prod's failures.
DRIFTED = f"""
SELECT d.cluster AS "Cluster", d.environment AS "Environment", d.cluster_type AS "Cluster type",
       d.kind || '/' || d.name AS "Object",
       array_to_string(
           d.reasons || CASE WHEN {_STALE.replace("last_seen_at", "d.last_seen_at")}
                             THEN ARRAY['stale'] ELSE '{{}}' END, ', ') AS "Reasons",
       COALESCE(p.started_at, c.drifted_since) AS "Drifted since",
       d.commits_behind AS "Commits behind",
       extract(epoch FROM now() - d.behind_since) AS "Time behind",
       left(d.applied_sha, 12) AS "Applied", left(d.head_sha, 12) AS "Desired",
       d.repository || ' ' || d.branch AS "Follows",
       d.last_seen_at AS "Last report", d.reason AS "Condition", d.message AS "Message",
       d.config_mismatches::text AS "Config differences"
FROM grafana.cluster c
CROSS JOIN LATERAL (
    SELECT * FROM grafana.drift d WHERE d.cluster_id = c.cluster_id AND cardinality(d.reasons) > 0
    UNION ALL
    SELECT * FROM grafana.drift d WHERE d.cluster_id = c.cluster_id AND cardinality(d.reasons) = 0
      AND {_STALE.replace("last_seen_at", "c.last_seen_at")}
) d
-- Each object's open period by index, however few the planner takes the open periods to be.
LEFT JOIN LATERAL (
    SELECT p.started_at FROM grafana.drift_period p
    WHERE p.object_id = d.object_id AND p.ended_at IS NULL
    LIMIT 1
) p ON true
WHERE {scope("c")}
  AND (c.drifted_objects > 0 OR {_STALE.replace("last_seen_at", "c.last_seen_at")})
ORDER BY CASE WHEN d.reasons && CAST(ARRAY[{_FAILED}] AS varchar[]) THEN 0
              WHEN {_STALE.replace("last_seen_at", "d.last_seen_at")} THEN 1 ELSE 2 END,
         {latest_first("d")}, d.cluster_type, d.cluster, d.kind, d.namespace, d.name
LIMIT {SHOWN}
"""

# The rows of DRIFTED, counted from each cluster's objects as the drift job counted them: a
# stale cluster's every object (one row if it has none), another's drifted ones.
_STALE_CLUSTER = _STALE.replace("last_seen_at", "c.last_seen_at")
DRIFTED_ROWS = f"""
SELECT COALESCE(sum(CASE WHEN {_STALE_CLUSTER} THEN GREATEST(COALESCE(r.objects, 0), 1)
                         ELSE c.drifted_objects END), 0) AS "Rows"
FROM grafana.cluster c
LEFT JOIN grafana.cluster_drift r ON r.cluster_id = c.cluster_id
WHERE {scope("c")} AND (c.drifted_objects > 0 OR {_STALE_CLUSTER})
"""


# The rows of DRIFTED with each reason: the drift job's counts per cluster, and for stale, the
# rows of the stale clusters.
def _rows_with(reason: Reason) -> str:
    if reason is Reason.STALE:
        rows = f"CASE WHEN {_STALE_CLUSTER} THEN GREATEST(COALESCE(r.objects, 0), 1) END"
    else:
        rows = f"r.{reason}"
    return f'COALESCE(sum({rows}), 0) AS "{reason}"'


_COLUMNS = ",\n       ".join(_rows_with(reason) for reason in Reason)
BY_REASON = f"""
SELECT {_COLUMNS}
FROM grafana.cluster c
LEFT JOIN grafana.cluster_drift r ON r.cluster_id = c.cluster_id
WHERE {scope("c")}
"""

# Minutes drifted per hour: a bucket's sum divided by its hours. With every cluster chosen,
# from the minutes per environment and cluster type (a few rows an
# hour); with clusters chosen, their periods spread over the hours. The branch not taken is
# pruned when planned.
MINUTES = f"""
SELECT $__timeGroupAlias(hour, $__interval, 0), environment AS metric,
       sum(minutes) {PER_HOUR} AS value
FROM (
    SELECT x.hour, x.environment, x.minutes FROM grafana.placement_drift_hourly x
    WHERE {EVERY_CLUSTER} AND $__timeFilter(x.hour)
      AND {chosen("environment", "x.environment")} AND {chosen("cluster_type", "x.cluster_type")}
      AND {placed("x.environment", "x.cluster_type")}
    UNION ALL
    SELECT x.hour, x.environment, x.minutes FROM grafana.drift_hourly x
    WHERE NOT {EVERY_CLUSTER}
      AND (x.ended_at IS NULL OR x.ended_at >= $__timeFrom()) AND x.started_at <= $__timeTo()
      AND $__timeFilter(x.hour) AND {scope("x")}
) x
GROUP BY 1, 2
ORDER BY 1, 2
"""

# The newest 1,000 periods of the range, ties (the periods an evaluation opens together) broken
# by cluster and object. Those started in it are walked newest first by the index on
# (started_at, cluster_id, object_id). Only when they are fewer are those started before it and
# open or ended in it added, found by the open-period and ended_at indexes: walked from the
# range's start back, they would be looked for through the whole history. The objects' names
# read for those 1,000 alone, shown in name order.
_PERIODS_OF = f"""
    SELECT x.cluster_id, x.cluster, x.environment, x.cluster_type, x.object_id, x.started_at,
           x.ended_at, x.reasons
    FROM grafana.drift_period x
    WHERE {scope("x")} AND"""
_NEWEST = "ORDER BY x.started_at DESC, x.cluster_id DESC, x.object_id DESC LIMIT 1000"
PERIODS = f"""
WITH started AS MATERIALIZED (
    {_PERIODS_OF} x.started_at BETWEEN $__timeFrom() AND $__timeTo()
    {_NEWEST}
)
SELECT p.cluster AS "Cluster", p.environment AS "Environment", p.cluster_type AS "Cluster type",
       COALESCE(o.kind || '/' || o.name, '(cluster)') AS "Object",
       p.started_at AS "Started", p.ended_at AS "Ended",
       round(extract(epoch FROM COALESCE(p.ended_at, now()) - p.started_at) / 60) AS "Minutes",
       array_to_string(p.reasons, ', ') AS "Reasons"
FROM (
    SELECT * FROM (
        SELECT * FROM started
        UNION ALL
        (SELECT * FROM (
             {_PERIODS_OF} x.started_at < $__timeFrom()
               AND (x.ended_at IS NULL OR x.ended_at >= $__timeFrom())
             OFFSET 0
         ) x
         WHERE (SELECT count(*) FROM started) < 1000
         {_NEWEST})
    ) x
    {_NEWEST}
) p
LEFT JOIN LATERAL (
    SELECT n.kind, n.namespace, n.name FROM grafana.drift_period n
    WHERE n.object_id = p.object_id AND n.started_at = p.started_at
    LIMIT 1
) o ON true
ORDER BY p.started_at DESC, p.cluster, o.kind NULLS FIRST, o.namespace, o.name
"""


# The periods PERIODS lists from, counted: those that overlap the range (started by its end,
# open or ended at its start or later). A month of a large fleet's periods is millions, too many
# to count each time. With every cluster chosen, the count is the periods open now, plus those
# ended since the range's start (from the hourly counts, less the first hour's part before the
# start), minus those started after its end. With clusters chosen, their periods are counted.
def _hour_of(moment: str) -> str:
    return (
        f"date_bin(INTERVAL '1 hour', CAST({moment} AS timestamptz), TIMESTAMPTZ '2000-01-01 UTC')"
    )


_COUNTS_OF = f"""FROM grafana.drift_period_hourly x
         WHERE {chosen("environment", "x.environment")}
           AND {chosen("cluster_type", "x.cluster_type")}
           AND {placed("x.environment", "x.cluster_type")} AND"""
_FROM = _hour_of("$__timeFrom()")
PERIODS_COUNT = f"""
SELECT CASE WHEN {EVERY_CLUSTER} THEN
    (SELECT count(*) FROM grafana.drift_period x WHERE x.ended_at IS NULL AND {scope("x")})
    + (SELECT COALESCE(sum(x.ended), 0) {_COUNTS_OF} x.hour >= {_FROM})
    - (SELECT count(*) FROM grafana.drift_period x
       WHERE x.ended_at >= {_FROM} AND x.ended_at < $__timeFrom() AND {scope("x")})
    - (SELECT count(*) FROM grafana.drift_period x
       WHERE x.started_at > $__timeTo() AND {scope("x")})
ELSE
    (SELECT count(*) FROM grafana.drift_period x
     WHERE x.started_at <= $__timeTo() AND (x.ended_at IS NULL OR x.ended_at >= $__timeFrom())
       AND {scope("x")})
END AS "Periods"
"""


def build() -> Dashboard:
    return (
        dashboard(UID, TITLE, "Who is drifted, since when and why; drift over time.")
        .with_panel(
            stat(
                "Drift now",
                TOTALS,
                counts={
                    "Drifted clusters": "drifted",
                    "Drifted objects": "drifted",
                    "Stale clusters": "stale",
                },
            )
        )
        .with_panel(
            stat(
                "Drift by reason",
                BY_REASON,
                counts={reason: reason for reason in Reason},
                description="The rows of the table below with each reason: drifted objects "
                "(an object may have several reasons), and for stale the objects of the "
                "clusters not reporting.",
            )
        )
        .with_panel(
            stat(
                "Drifted rows",
                DRIFTED_ROWS,
                counts={"Rows": "drifted"},
                description=f"All the rows of the table beside, which shows {SHOWN:,} at most.",
                height=12,
                span=4,
            )
        )
        .with_panel(
            link_clusters(
                table(
                    "Drifted",
                    DRIFTED,
                    description="Every drifted object (or stale cluster) with the reasons and "
                    "their evidence: failing or diverged first, then stale, then the others, "
                    f"each the latest environment first; {SHOWN:,} at most.",
                    height=12,
                    span=20,
                ).override_by_name("Time behind", [DynamicConfigValue(id_val="unit", value="s")])
            )
        )
        .with_panel(
            timeseries(
                "Drift minutes per environment",
                MINUTES,
                description="Minutes clusters were drifted per hour, summed per environment.",
            )
        )
        .with_panel(
            stat(
                "Periods",
                PERIODS_COUNT,
                description="The drift periods of the range (started in it, or open or ended "
                "in it): the table beside lists the newest 1,000.",
                height=10,
                span=4,
            )
        )
        .with_panel(
            table(
                "Drift periods",
                PERIODS,
                description="The newest 1,000 drift periods of the range, newest first.",
                height=10,
                span=20,
            )
        )
        .build()
    )
