"""Deployment history: a state timeline per cluster and one per workload (its rollouts in each
environment, as the rollouts job keeps them), and every change of an applied revision (what
changed when, from which version to which)."""

from grafana_foundation_sdk.models.dashboard import Dashboard, ValueMap, ValueMappingResult

from dashboards.common import (
    SHOWN_CLUSTERS,
    chosen_subject,
    dashboard,
    scope,
    shown_clusters,
    state_timeline,
    table,
)
from hub.palette import HEX, colour

__all__ = ["CLUSTER_STATES", "ROLLOUT_STATES", "TITLE", "UID", "build"]

UID = "fleetmark-history"
TITLE = "fleetmark: Deployment history"

# The state timelines' values. Per cluster, the worst that happened to it in a bucket:
# reconciled, a revision applied, drifted, failing. Per workload, its rollout's state, in the
# palette's colours (hub/palette.py).
CLUSTER_STATES = {
    0: ("reconciled", "blue"),
    1: ("applied", "green"),
    2: ("drifted", "orange"),
    3: ("failing", "red"),
}
_ROLLOUT_STATES = ("converged", "in_progress", "stalled", "failed")
ROLLOUT_STATES = {
    value: (state.replace("_", " "), HEX[colour(state)])
    for value, state in enumerate(_ROLLOUT_STATES)
}

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

# Each workload (the platform commits: `platform`) in each environment takes the state its
# rollouts last entered (grafana.rollout_period): from the range's start, the state in effect
# then, which it may have entered long before; then each state entered in the range. States
# entered at one time are taken in the order of their rollouts' starts and commits: the
# newest rollout's last.
_VALUES = "CASE p.state {} END".format(
    " ".join(f"WHEN '{state}' THEN {value}" for value, state in enumerate(_ROLLOUT_STATES))
)
PER_WORKLOAD = f"""
WITH period AS (
    SELECT COALESCE(p.workload, 'platform') || ' on ' || p.environment AS metric,
           p.since, p.started_at, p.committed_at, p.revision, {_VALUES} AS value
    FROM grafana.rollout_period p
    WHERE p.since < $__timeTo() AND (p.until IS NULL OR p.until > $__timeFrom())
      AND {chosen_subject("p")}
)
SELECT time, metric, value FROM (
    (SELECT DISTINCT ON (metric) $__timeFrom() AS time, metric, value, started_at,
            committed_at, revision
     FROM period
     WHERE since <= $__timeFrom()
     ORDER BY metric, since DESC, started_at DESC, committed_at DESC, revision DESC)
    UNION ALL
    SELECT since, metric, value, started_at, committed_at, revision
    FROM period WHERE since > $__timeFrom()
) entered
ORDER BY time, metric, started_at, committed_at, revision
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
                description="Each workload (and the platform commits) per environment: the "
                "state its rollouts last entered, in progress, stalled (no expected cluster "
                "reached it for FLEETMARK_ROLLOUT_STALL_AFTER), failed, or converged (every "
                "expected cluster runs it Ready); from the range's start, the state then.",
                height=8,
            ).mappings([_mapping(ROLLOUT_STATES)])
        )
        .with_panel(table("What changed when", CHANGED, height=12))
        .build()
    )
