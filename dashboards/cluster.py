"""Cluster detail: the chosen clusters, each object with its applied and desired revision,
readiness and drift, the reports per hour, and the history of what it applied."""

from grafana_foundation_sdk.models.dashboard import Dashboard

from dashboards.common import (
    PER_HOUR,
    SHOWN_CLUSTERS,
    dashboard,
    scope,
    shown_clusters,
    stale,
    table,
    timeseries,
)

__all__ = ["TITLE", "UID", "build"]

UID = "fleetmark-cluster"
TITLE = "fleetmark: Cluster detail"

CLUSTERS = f"""
SELECT cluster AS "Cluster", environment AS "Environment", cluster_type AS "Cluster type",
       CASE WHEN last_seen_at IS NULL THEN 'never reported'
            WHEN {stale("last_seen_at")} THEN 'stale' ELSE 'reporting' END AS "Agent",
       last_seen_at AS "Last report", registered_at AS "Registered", objects AS "Objects",
       ready AS "Ready", failing AS "Failing", progressing AS "Progressing",
       suspended AS "Suspended", drifted_objects AS "Drifted objects",
       drifted_since AS "Drifted since"
FROM grafana.cluster x
WHERE {scope("x")}
ORDER BY environment_position NULLS LAST, environment, cluster_type, cluster
LIMIT 500
"""

# In the order of the objects' unique index: the first rows of a fleet are found, not sorted.
OBJECTS = f"""
SELECT cluster AS "Cluster", kind || '/' || namespace || '/' || name AS "Object",
       concat_ws(' ', source_url, source_ref, source_path) AS "Source",
       applied_revision AS "Applied revision", applied_version AS "Version",
       left(head_sha, 12) AS "Desired", commits_behind AS "Commits behind", state AS "State",
       ready AS "Ready", reason AS "Reason", message AS "Message",
       array_to_string(drift_reasons, ', ') AS "Drift", changed_at AS "Changed"
FROM grafana.object x
WHERE {scope("x")}
ORDER BY cluster_id, reconciler, kind, namespace, name
LIMIT 2000
"""

REPORTS = f"""
SELECT $__timeGroupAlias(x.hour, $__interval, 0), s.cluster AS metric,
       sum(x.reports) {PER_HOUR} AS value
FROM ({shown_clusters()}) s
CROSS JOIN LATERAL (
    SELECT x.hour, x.reports FROM grafana.heartbeat_hourly x
    WHERE x.cluster_id = s.cluster_id AND $__timeFilter(x.hour)
    OFFSET 0  -- not flattened into a join: read per shown cluster, by index
) x
GROUP BY 1, 2
ORDER BY 1, 2
"""

HISTORY = f"""
SELECT deployed_at AS "Time", cluster AS "Cluster", kind || '/' || name AS "Object",
       COALESCE(previous_version, left(previous_sha, 12)) AS "From",
       COALESCE(applied_version, left(applied_sha, 12)) AS "To",
       applied_revision AS "Revision", ready AS "Ready", reason AS "Reason"
FROM grafana.deployment x
WHERE $__timeFilter(deployed_at) AND {scope("x")}
ORDER BY deployed_at DESC, cluster, kind, namespace, name
LIMIT 500
"""


def build() -> Dashboard:
    return (
        dashboard(UID, TITLE, "One cluster (or the chosen ones): objects, revisions, history.")
        .with_panel(table("Cluster", CLUSTERS, height=5))
        .with_panel(table("Objects", OBJECTS, height=12))
        .with_panel(
            timeseries(
                "Reports per hour",
                REPORTS,
                description=f"{SHOWN_CLUSTERS} of the chosen clusters at most: those failing "
                "now first, then those drifted.",
            )
        )
        .with_panel(table("History", HISTORY, height=10))
        .build()
    )
