"""Cluster detail: one cluster (it opens on the one most in need of attention), each object
with its applied and desired revision, readiness and drift, the reports per hour, and the
history of what it applied."""

from grafana_foundation_sdk.models.dashboard import Dashboard

from dashboards.common import (
    PER_HOUR,
    dashboard,
    per_chosen_cluster,
    scope,
    shown_clusters,
    stale,
    stat,
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
"""

SHOWN_OBJECTS = 2000
# The cluster's objects most severe first: failing, drifted, progressing, suspended, ready.
OBJECTS = f"""
SELECT kind || '/' || namespace || '/' || name AS "Object",
       concat_ws(' ', source_url, source_ref, source_path) AS "Source",
       applied_revision AS "Applied revision", applied_version AS "Version",
       left(head_sha, 12) AS "Desired", commits_behind AS "Commits behind", state AS "State",
       ready AS "Ready", reason AS "Reason", message AS "Message",
       array_to_string(drift_reasons, ', ') AS "Drift", changed_at AS "Changed"
FROM grafana.object x
WHERE {scope("x")}
ORDER BY CASE WHEN state = 'failing' THEN 0 WHEN cardinality(drift_reasons) > 0 THEN 1
              WHEN state = 'progressing' THEN 2 WHEN state = 'suspended' THEN 3 ELSE 4 END,
         reconciler, kind, namespace, name
LIMIT {SHOWN_OBJECTS}
"""

OBJECT_COUNT = f"""
SELECT COALESCE(sum(objects), 0) AS "Objects"
FROM grafana.cluster x
WHERE {scope("x")}
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

SHOWN_CHANGES = 500
# A log: the newest changes of the range first.
HISTORY = f"""
SELECT deployed_at AS "Time", kind || '/' || name AS "Object",
       COALESCE(previous_version, left(previous_sha, 12)) AS "From",
       COALESCE(applied_version, left(applied_sha, 12)) AS "To",
       applied_revision AS "Revision", ready AS "Ready", reason AS "Reason"
FROM {per_chosen_cluster("grafana.deployment", "$__timeFilter(x.deployed_at)")}
ORDER BY deployed_at DESC, kind, namespace, name
LIMIT {SHOWN_CHANGES}
"""

CHANGE_COUNT = f"""
SELECT count(*) AS "Changes"
FROM {per_chosen_cluster("grafana.deployment", "$__timeFilter(x.deployed_at)")}
"""


def build() -> Dashboard:
    return (
        dashboard(
            UID,
            TITLE,
            "One cluster, the one most in need of attention first: objects, revisions, history.",
            one_cluster=True,
        )
        .with_panel(table("Cluster", CLUSTERS, height=5))
        .with_panel(
            stat(
                "All objects",
                OBJECT_COUNT,
                description=f"All the cluster's objects, of which the table beside shows "
                f"{SHOWN_OBJECTS:,} at most.",
                height=12,
                span=4,
            )
        )
        .with_panel(
            table(
                "Objects",
                OBJECTS,
                description="Failing first, then drifted, progressing, suspended and ready; "
                f"{SHOWN_OBJECTS:,} at most.",
                height=12,
                span=20,
            )
        )
        .with_panel(timeseries("Reports per hour", REPORTS))
        .with_panel(
            stat(
                "Changes",
                CHANGE_COUNT,
                description="The changes of applied revision in the range, of which the table "
                f"beside shows the newest {SHOWN_CHANGES} at most.",
                height=10,
                span=4,
            )
        )
        .with_panel(
            table(
                "History",
                HISTORY,
                description=f"What the cluster applied, newest first; {SHOWN_CHANGES} at most.",
                height=10,
                span=20,
            )
        )
        .build()
    )
