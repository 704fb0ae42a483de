"""Deployment history: a state timeline per cluster and one per workload (its rollouts in each
environment), and every change of an applied revision (what changed when, from which version
to which)."""

from grafana_foundation_sdk.models.dashboard import Dashboard, ValueMap, ValueMappingResult

from dashboards.common import (
    SHOWN_CLUSTERS,
    chosen,
    dashboard,
    scope,
    shown_clusters,
    state_timeline,
    table,
)

__all__ = ["CLUSTER_STATES", "ROLLOUT_STATES", "TITLE", "UID", "build"]

UID = "fleetmark-history"
TITLE = "fleetmark: Deployment history"

# The state timelines' values. Per cluster, the worst that happened to it in a bucket:
# reconciled, a revision applied, drifted, failing. Per workload: done, rolling out, failed.
CLUSTER_STATES = {
    0: ("reconciled", "blue"),
    1: ("applied", "green"),
    2: ("drifted", "orange"),
    3: ("failing", "red"),
}
ROLLOUT_STATES = {0: ("done", "green"), 1: ("rolling out", "blue"), 2: ("failed", "red")}

PER_CLUSTER = f"""
SELECT $__timeGroupAlias(x.hour, $__interval, NULL), s.cluster AS metric,
       max(CASE WHEN x.not_ready > 0 THEN 3 WHEN x.drifted > 0 THEN 2 WHEN x.applied > 0 THEN 1
                ELSE 0 END) AS value
FROM ({shown_clusters()}) s
CROSS JOIN LATERAL (
    SELECT x.hour, x.not_ready, x.drifted, x.applied FROM grafana.transition_hourly x
    WHERE x.cluster_id = s.cluster_id AND $__timeFilter(x.hour)
    OFFSET 0  -- not flattened into a join: read per shown cluster, by index
) x
GROUP BY 1, 2
ORDER BY 1, 2
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

# A rollout's events as states of its workload in its environment: rolling out from its
# start; failed from its first failure until restored; done once complete and, had it failed,
# restored. The platform commits are the workload `platform`. Events at one time in the order
# they happen.
PER_WORKLOAD = f"""
SELECT e.time, COALESCE(x.workload, 'platform') || ' on ' || x.environment AS metric, e.value
FROM grafana.dora_rollout x
CROSS JOIN LATERAL (VALUES
    (x.started_at, 1, 1),
    (x.failed_at, 2, 2),
    (x.restored_at, CASE WHEN x.completed_at <= x.restored_at THEN 0 ELSE 1 END, 3),
    (x.completed_at, CASE WHEN x.restored_at IS NULL AND x.failed_at IS NOT NULL
                            OR x.restored_at > x.completed_at THEN 2 ELSE 0 END, 4)
) AS e (time, value, step)
WHERE e.time IS NOT NULL AND $__timeFilter(e.time)
  AND {chosen("environment", "x.environment")} AND {chosen("workload", "x.workload")}
ORDER BY e.time, metric, x.committed_at, e.step
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
ORDER BY d.deployed_at DESC, d.cluster, d.kind, d.namespace, d.name
LIMIT 1000
"""


def _mapping(states: dict[int, tuple[str, str]]) -> ValueMap:
    return ValueMap(
        options={
            str(value): ValueMappingResult(text=text, color=color, index=value)
            for value, (text, color) in states.items()
        }
    )


def build() -> Dashboard:
    return (
        dashboard(UID, TITLE, "What changed where and when, per cluster and per workload.")
        .with_panel(
            state_timeline(
                "State per cluster",
                PER_CLUSTER,
                description="Per bucket, the worst state change a cluster reported: failing, "
                f"drifted, a revision applied, or reconciled. {SHOWN_CLUSTERS} of the chosen "
                "clusters at most: those failing now first, then those drifted.",
            ).mappings([_mapping(CLUSTER_STATES)])
        )
        .with_panel(
            state_timeline(
                "Rollouts per workload",
                PER_WORKLOAD,
                description="Each workload (and the platform commits) per environment: rolling "
                "out a revision, failed, or done (every expected cluster Ready with it), as the "
                "DORA job judges the rollouts.",
                height=8,
            ).mappings([_mapping(ROLLOUT_STATES)])
        )
        .with_panel(table("What changed when", CHANGED, height=12))
        .build()
    )
