"""Drift: which clusters and objects are drifted, since when and why (every reason with its
evidence: commits and time behind, applied against desired commit, the reconciler's message,
config keys that differ), drift minutes over time per environment, and the drift periods."""

from grafana_foundation_sdk.models.dashboard import Dashboard, DynamicConfigValue

from dashboards.common import (
    dashboard,
    link_clusters,
    scope,
    stale,
    stat,
    table,
    timeseries,
)

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

# A stale agent makes every row of its cluster drifted for that reason too (as the API
# says it); the drift job's reasons are the others. Read from the clusters drifted or stale,
# each one's objects by index: those with reasons, and the others only if it is stale.
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
LEFT JOIN grafana.drift_period p ON p.object_id = d.object_id AND p.ended_at IS NULL
WHERE {scope("c")}
  AND (c.drifted_objects > 0 OR {_STALE.replace("last_seen_at", "c.last_seen_at")})
ORDER BY d.environment_position NULLS LAST, d.environment, d.cluster_type, d.cluster, d.kind,
         d.namespace, d.name
LIMIT 1000
"""

MINUTES = f"""
SELECT $__timeGroupAlias(hour, $__interval), environment AS metric, sum(minutes) AS value
FROM grafana.drift_hourly x
WHERE (x.ended_at IS NULL OR x.ended_at >= $__timeFrom()) AND x.started_at <= $__timeTo()
  AND $__timeFilter(hour)
  AND {scope("x")}
GROUP BY 1, 2
ORDER BY 1, 2
"""

PERIODS = f"""
SELECT cluster AS "Cluster", environment AS "Environment", cluster_type AS "Cluster type",
       COALESCE(kind || '/' || name, '(cluster)') AS "Object",
       started_at AS "Started", ended_at AS "Ended",
       round(extract(epoch FROM COALESCE(ended_at, now()) - started_at) / 60) AS "Minutes",
       array_to_string(reasons, ', ') AS "Reasons"
FROM grafana.drift_period x
WHERE (ended_at IS NULL OR ended_at >= $__timeFrom()) AND started_at <= $__timeTo()
  AND {scope("x")}
ORDER BY started_at DESC, cluster, kind NULLS FIRST, namespace, name
LIMIT 1000
"""


def build() -> Dashboard:
    return (
        dashboard(UID, TITLE, "Who is drifted, since when and why; drift over time.")
        .with_panel(stat("Drift now", TOTALS))
        .with_panel(
            link_clusters(
                table(
                    "Drifted",
                    DRIFTED,
                    description="Every drifted object (or stale cluster) with the reasons and "
                    "their evidence.",
                    height=12,
                ).override_by_name("Time behind", [DynamicConfigValue(id_val="unit", value="s")])
            )
        )
        .with_panel(
            timeseries(
                "Drift minutes per environment",
                MINUTES,
                description="Minutes clusters were drifted, summed per environment.",
            )
        )
        .with_panel(table("Drift periods", PERIODS, height=10))
        .build()
    )
