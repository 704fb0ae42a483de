"""Deployment history: a state timeline per cluster and one per workload (its rollouts in each
environment, as the rollouts job keeps them), and what changed when: per workload and
environment, from which version to which, on how many clusters; marked with the fleet's
timeline (grafana.timeline, migration 0050)."""

from grafana_foundation_sdk.models.dashboard import Dashboard, ValueMap, ValueMappingResult

from dashboards.common import (
    DATASOURCE,
    EVERY_CLUSTER,
    SHOWN_CLUSTERS,
    chosen,
    chosen_subject,
    dashboard,
    per_chosen_cluster,
    placed,
    shown_clusters,
    stat,
    state_timeline,
    table,
)
from dashboards.postgres import Annotation
from hub.palette import HEX, colour

__all__ = ["CLUSTER_STATES", "ROLLOUT_STATES", "TIMELINE_EVENTS", "TITLE", "UID", "build"]

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


SHOWN_CHANGES = 1000
# The changes of the range per environment, cluster type, object name and from → to revision.
# With every cluster chosen, from the hourly rollup (the hours the range touches); with clusters
# chosen, from their history. The branch not taken is pruned when planned.
_CHANGES = f"""
    SELECT x.environment, x.environment_position, x.cluster_type, x.name, x.from_revision,
           x.to_revision, x.changes, x.clusters, x.not_ready, x.first_at, x.last_at
    FROM grafana.deployment_hourly x
    WHERE {EVERY_CLUSTER}
      AND x.hour > CAST($__timeFrom() AS timestamptz) - INTERVAL '1 hour'
      AND x.hour <= $__timeTo()
      AND {chosen("environment", "x.environment")} AND {chosen("cluster_type", "x.cluster_type")}
      AND {placed("x.environment", "x.cluster_type")}
    UNION ALL
    SELECT x.environment, x.environment_position, x.cluster_type, x.name,
           COALESCE(x.previous_version, left(x.previous_sha, 12)),
           COALESCE(x.applied_version, left(x.applied_sha, 12)), count(*),
           count(DISTINCT x.cluster_id), count(*) FILTER (WHERE x.ready IS FALSE),
           min(x.deployed_at), max(x.deployed_at)
    FROM {per_chosen_cluster("grafana.deployment", "$__timeFilter(x.deployed_at)")}
    WHERE NOT {EVERY_CLUSTER}
    GROUP BY 1, 2, 3, 4, 5, 6
"""

# Those changes per workload, environment and from → to revision, over the workload's clusters
# of every cluster type. An object's workload is the assignment its name (its deployment target)
# stands for in its environment and cluster type, else its own name; a cluster that carries two
# of a workload's deployment targets counts for each. The deployment targets are read once, not
# per change.
_GROUPED = f"""
WITH changed AS MATERIALIZED (
    SELECT environment, environment_position, cluster_type, name, from_revision, to_revision,
           sum(changes) AS changes, sum(clusters) AS clusters, sum(not_ready) AS not_ready,
           min(first_at) AS first_at, max(last_at) AS last_at
    FROM ({_CHANGES}) AS x (environment, environment_position, cluster_type, name,
                           from_revision, to_revision, changes, clusters, not_ready, first_at,
                           last_at)
    GROUP BY 1, 2, 3, 4, 5, 6
),
target AS MATERIALIZED (
    SELECT environment, cluster_type, deployment_target, min(workload) AS workload
    FROM grafana.placement
    GROUP BY 1, 2, 3
),
grouped AS (
    SELECT c.environment, c.environment_position, COALESCE(w.workload, c.name) AS workload,
           c.from_revision, c.to_revision, sum(c.changes) AS changes,
           sum(c.clusters) AS clusters, sum(c.not_ready) AS not_ready,
           min(c.first_at) AS first_at, max(c.last_at) AS last_at
    FROM changed c
    LEFT JOIN target w
      ON w.environment = c.environment AND w.cluster_type = c.cluster_type
     AND w.deployment_target = c.name
    GROUP BY 1, 2, 3, 4, 5
)"""

# The newest first, the latest environment first among changes of one time.
CHANGED = f"""{_GROUPED}
SELECT last_at AS "Last change", first_at AS "First change", environment AS "Environment",
       workload AS "Workload", from_revision AS "From", to_revision AS "To",
       clusters AS "Clusters", changes AS "Changes", not_ready AS "Not ready"
FROM grouped
ORDER BY last_at DESC, environment_position DESC NULLS LAST, environment, workload,
         from_revision, to_revision
LIMIT {SHOWN_CHANGES}
"""

CHANGED_COUNT = f"""{_GROUPED}
SELECT count(*) AS "Rows", COALESCE(sum(changes), 0) AS "Changes"
FROM grouped
"""


def _mapping(states: dict[int, tuple[str, str]]) -> ValueMap:
    return ValueMap(
        options={
            str(value): ValueMappingResult(text=text, color=color, index=value)
            for value, (text, color) in states.items()
        }
    )


# The timeline of the range as annotations: what happened in a line, tagged with the
# environment and the kind; of the chosen environments, and of the chosen workloads (rows of no
# workload when every one is chosen), as the rollouts' annotation.
TIMELINE_EVENTS = f"""
SELECT t.at AS time, t.summary AS text,
       COALESCE(t.environment || ',', '') || t.kind AS tags
FROM grafana.timeline($__timeFrom(), $__timeTo()) t
WHERE {chosen("environment", "t.environment")}
  AND (t.workload IS NULL AND {chosen("workload", "NULL")} OR {chosen("workload", "t.workload")})
ORDER BY t.at, t.key
"""


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
        .with_panel(
            stat(
                "Changed",
                CHANGED_COUNT,
                description="The rows of the table beside (which shows the newest "
                f"{SHOWN_CHANGES:,} at most) and the changes they sum up.",
                height=12,
                span=4,
            )
        )
        .with_panel(
            table(
                "What changed when",
                CHANGED,
                description="Per workload and environment, each move from one version (or "
                "commit) to another: on how many clusters, how many changes of its objects, how "
                "many not Ready when they changed, and when the first and the last was. The "
                "newest first; with every cluster chosen, from hourly sums, so of the hours the "
                "range touches.",
                height=12,
                span=20,
            )
        )
        .annotation(
            Annotation("Timeline", TIMELINE_EVENTS).datasource(DATASOURCE).icon_color(HEX["idle"])
        )
        .build()
    )
