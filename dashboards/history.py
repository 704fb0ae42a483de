"""Deployment history: a state timeline per cluster, changes per workload over time, and
every change of an applied revision (what changed when, from which version to which)."""

from grafana_foundation_sdk.models.dashboard import Dashboard, ValueMap, ValueMappingResult

from dashboards.common import dashboard, scope, state_timeline, table, timeseries

__all__ = ["STATES", "TITLE", "UID", "build"]

UID = "fleetmark-history"
TITLE = "fleetmark: Deployment history"

# The state timeline's values: the worst that happened to a cluster in a bucket.
STATES = {
    0: ("reconciled", "blue"),
    1: ("applied", "green"),
    2: ("drifted", "orange"),
    3: ("failing", "red"),
}

PER_CLUSTER = f"""
SELECT $__timeGroupAlias(hour, $__interval), cluster AS metric,
       max(CASE WHEN not_ready > 0 THEN 3 WHEN drifted > 0 THEN 2 WHEN applied > 0 THEN 1
                ELSE 0 END) AS value
FROM grafana.transition_hourly
WHERE $__timeFilter(hour) AND {scope()}
GROUP BY 1, 2
ORDER BY 1
"""

CHANGES = f"""
SELECT $__timeGroupAlias(hour, $__interval), environment AS metric, sum(applied) AS value
FROM grafana.transition_hourly
WHERE $__timeFilter(hour) AND {scope()}
GROUP BY 1, 2
ORDER BY 1
"""

# An object's workload: the assignment its name (the deployment target) stands for in its
# cluster's environment and cluster type; else the object's own name.
_WORKLOAD = """
LEFT JOIN LATERAL (
    SELECT min(p.workload) AS workload FROM grafana.placement p
    WHERE p.environment = d.environment AND p.cluster_type = d.cluster_type
      AND p.deployment_target = d.name
) w ON true
"""

PER_WORKLOAD = f"""
SELECT $__timeGroupAlias(d.deployed_at, $__interval), COALESCE(w.workload, d.name) AS metric,
       count(*) AS value
FROM grafana.deployment d
{_WORKLOAD}
WHERE $__timeFilter(d.deployed_at) AND {scope("d")}
GROUP BY 1, 2
ORDER BY 1
"""

CHANGED = f"""
SELECT d.deployed_at AS "Time", d.environment AS "Environment",
       d.cluster_type AS "Cluster type", d.cluster AS "Cluster",
       COALESCE(w.workload, d.name) AS "Workload", d.kind || '/' || d.name AS "Object",
       COALESCE(d.previous_version, left(d.previous_sha, 12)) AS "From",
       COALESCE(d.applied_version, left(d.applied_sha, 12)) AS "To",
       d.ready AS "Ready", d.reason AS "Reason"
FROM grafana.deployment d
{_WORKLOAD}
WHERE $__timeFilter(d.deployed_at) AND {scope("d")}
ORDER BY d.deployed_at DESC
LIMIT 1000
"""


def build() -> Dashboard:
    mapping = ValueMap(
        options={
            str(value): ValueMappingResult(text=text, color=color, index=value)
            for value, (text, color) in STATES.items()
        }
    )
    return (
        dashboard(UID, TITLE, "What changed where and when, per cluster and per workload.")
        .with_panel(
            state_timeline(
                "State per cluster",
                PER_CLUSTER,
                description="Per bucket, the worst state change a cluster reported: failing, "
                "drifted, a revision applied, or reconciled.",
            ).mappings([mapping])
        )
        .with_panel(
            timeseries(
                "Changes per workload",
                PER_WORKLOAD,
                description="Objects that applied a new revision, per workload.",
                span=12,
            )
        )
        .with_panel(
            timeseries(
                "Reports with an applied revision per environment",
                CHANGES,
                span=12,
            )
        )
        .with_panel(table("What changed when", CHANGED, height=12))
        .build()
    )
