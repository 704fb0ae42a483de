"""Fleet overview: how many clusters each environment and cluster type has, which report,
which are stale or never reported, drifted or failing, and how many of each were over time;
the reconcilers suspended across the fleet; how far behind each repository's harvest is."""

from grafana_foundation_sdk.models.dashboard import Dashboard, DynamicConfigValue

from dashboards.common import (
    chosen,
    dashboard,
    latest_first,
    link_clusters,
    placed,
    scope,
    severity,
    stale,
    stat,
    table,
    timeseries,
)

__all__ = ["TITLE", "UID", "build"]

UID = "fleetmark-fleet"
TITLE = "fleetmark: Fleet overview"

COUNTS = """
    count(*) AS "Clusters",
    count(*) FILTER (WHERE last_seen_at IS NOT NULL AND NOT ({stale})) AS "Reporting",
    count(*) FILTER (WHERE {stale}) AS "Stale",
    count(*) FILTER (WHERE last_seen_at IS NULL) AS "Never reported",
    count(*) FILTER (WHERE drifted_objects > 0) AS "Drifted",
    count(*) FILTER (WHERE failing > 0) AS "Failing"
""".format(stale=stale("last_seen_at"))

TOTALS = f"""
SELECT {COUNTS},
       CAST(count(*) FILTER (WHERE last_seen_at IS NOT NULL AND NOT ({stale("last_seen_at")}))
            AS double precision) / NULLIF(count(*), 0) AS "Reporting share"
FROM grafana.cluster x
WHERE {scope("x")}
"""

PER_CLUSTER_TYPE = f"""
SELECT environment AS "Environment", cluster_type AS "Cluster type", {COUNTS}
FROM grafana.cluster x
WHERE {scope("x")}
GROUP BY environment, cluster_type
ORDER BY min(environment_position) NULLS LAST, environment, cluster_type
"""

# The clusters that need attention: those of a severity below 4.
_NEEDS_ATTENTION = f"{severity('x')} < 4"
SHOWN = 500

ATTENTION = f"""
SELECT cluster AS "Cluster", environment AS "Environment", cluster_type AS "Cluster type",
       CASE {severity("x")} WHEN 0 THEN 'failing' WHEN 1 THEN 'stale'
                            WHEN 2 THEN 'never reported' ELSE 'drifted' END AS "State",
       last_seen_at AS "Last report", failing AS "Failing objects",
       drifted_objects AS "Drifted objects", drifted_since AS "Drifted since"
FROM grafana.cluster x
WHERE {scope("x")} AND {_NEEDS_ATTENTION}
-- Most severe first, then the latest environment first: a cut keeps prod's failures.
ORDER BY {severity("x")}, {latest_first("x")}, cluster_type, cluster
LIMIT {SHOWN}
"""

NEED_ATTENTION = f"""
SELECT count(*) AS "Need attention"
FROM grafana.cluster x
WHERE {scope("x")} AND {_NEEDS_ATTENTION}
"""


def _health(state: str) -> str:
    """SQL: the clusters in `state` per environment, the average of each hour's samples (of a
    bucket of several hours, the average of its hours sampled). Kept per environment and
    cluster type: the cluster variable does not narrow them."""
    return f"""
SELECT $__timeGroupAlias(x.hour, $__interval, NULL), x.environment AS metric,
       sum(x.{state}) / count(DISTINCT x.hour) AS value
FROM grafana.fleet_health_hourly x
WHERE $__timeFilter(x.hour)
  AND {chosen("environment", "x.environment")} AND {chosen("cluster_type", "x.cluster_type")}
  AND {placed("x.environment", "x.cluster_type")}
GROUP BY 1, 2
ORDER BY 1, 2
"""


HEALTH = {state: _health(state) for state in ("failing", "drifted", "stale")}

_SUSPENDED_OF = f"""
FROM grafana.cluster c
CROSS JOIN LATERAL (
    SELECT * FROM grafana.object x WHERE x.cluster_id = c.cluster_id AND x.suspended
    OFFSET 0  -- not flattened into a join: read per cluster with one suspended, by index
) x
WHERE c.suspended > 0 AND {scope("c")}
"""

# Every suspended reconciler, read from the clusters that have one (counted as objects
# change): the latest environment first, then those suspended longest.
SUSPENDED = f"""
SELECT x.cluster AS "Cluster", x.environment AS "Environment", x.cluster_type AS "Cluster type",
       x.kind || '/' || x.namespace || '/' || x.name AS "Object",
       concat_ws(' ', x.source_url, x.source_ref, x.source_path) AS "Source",
       x.changed_at AS "Last change", x.message AS "Message"
{_SUSPENDED_OF}
ORDER BY {latest_first("x")}, x.changed_at, x.cluster, x.kind, x.namespace, x.name
LIMIT {SHOWN}
"""

SUSPENDED_COUNT = f"""
SELECT count(*) AS "Suspended"
{_SUSPENDED_OF}
"""

HARVEST = """
SELECT url AS "Repository", role AS "Role",
       extract(epoch FROM now() - harvested_at) AS "Lag",
       harvested_at AS "Last harvest", newest_commit_at AS "Newest commit",
       fetch_error AS "Fetch error", errors AS "Errors recorded"
FROM grafana.repository
WHERE enabled
ORDER BY harvested_at NULLS FIRST, url
"""


def build() -> Dashboard:
    return (
        dashboard(
            UID,
            TITLE,
            "Clusters per environment and cluster type, their reports, "
            "drift and failures, and the harvest of the GitOps repositories.",
        )
        .with_panel(
            stat(
                "Clusters",
                TOTALS,
                counts={
                    "Stale": "stale",
                    "Never reported": "never_reported",
                    "Drifted": "drifted",
                    "Failing": "failing",
                },
                shares=["Reporting share"],
                description="Reporting share: of the clusters, those that reported within the "
                "staleness threshold (below 90 % red, below 99 % amber).",
                height=4,
            )
        )
        .with_panel(table("Clusters per environment and cluster type", PER_CLUSTER_TYPE))
        .with_panel(
            stat(
                "Need attention",
                NEED_ATTENTION,
                counts={"Need attention": "drifted"},
                description="Clusters failing, stale, never reported or drifted: all of them, "
                f"of which the table beside shows {SHOWN} at most.",
                height=10,
                span=4,
            )
        )
        .with_panel(
            link_clusters(
                table(
                    "Clusters that need attention",
                    ATTENTION,
                    description="Failing, stale, never reported or drifted clusters, in that "
                    f"order, the latest environment first; {SHOWN} at most.",
                    height=10,
                    span=20,
                )
            )
        )
        .with_panel(
            timeseries(
                "Failing clusters",
                HEALTH["failing"],
                description="Per environment, the clusters with an object failing, on average "
                "over the hour (the hub samples the fleet every 10 minutes).",
                span=8,
            )
        )
        .with_panel(
            timeseries(
                "Drifted clusters",
                HEALTH["drifted"],
                description="Per environment, the clusters with a drifted object, on average "
                "over the hour (the hub samples the fleet every 10 minutes).",
                span=8,
            )
        )
        .with_panel(
            timeseries(
                "Stale clusters",
                HEALTH["stale"],
                description="Per environment, the clusters never reported or silent past the "
                "hub's staleness threshold, on average over the hour (the hub samples the fleet "
                "every 10 minutes).",
                span=8,
            )
        )
        .with_panel(
            stat(
                "Suspended",
                SUSPENDED_COUNT,
                counts={"Suspended": "suspended"},
                description="Reconcilers suspended across the chosen clusters: all of them, of "
                f"which the table beside shows {SHOWN} at most.",
                height=8,
                span=4,
            )
        )
        .with_panel(
            link_clusters(
                table(
                    "Suspended reconcilers",
                    SUSPENDED,
                    description="Each suspended reconciler object, the latest environment "
                    "first, then those unchanged longest: a suspend forgotten after an incident "
                    f"stops deployments without failing. {SHOWN} at most.",
                    span=20,
                )
            )
        )
        .with_panel(
            table(
                "Harvest per repository",
                HARVEST,
                description="Lag: time since the repository's branches were last harvested.",
            ).override_by_name("Lag", [DynamicConfigValue(id_val="unit", value="s")])
        )
        .build()
    )
