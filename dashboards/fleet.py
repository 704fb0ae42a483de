"""Fleet overview: how many clusters each environment and cluster type has, which report,
which are stale or never reported, drifted or failing; how far behind each repository's
harvest is."""

from grafana_foundation_sdk.models.dashboard import Dashboard, DynamicConfigValue

from dashboards.common import dashboard, link_clusters, scope, stale, stat, table

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

ATTENTION = f"""
SELECT cluster AS "Cluster", environment AS "Environment", cluster_type AS "Cluster type",
       CASE WHEN last_seen_at IS NULL THEN 'never reported'
            WHEN {stale("last_seen_at")} THEN 'stale'
            WHEN failing > 0 THEN 'failing'
            ELSE 'drifted' END AS "State",
       last_seen_at AS "Last report", failing AS "Failing objects",
       drifted_objects AS "Drifted objects", drifted_since AS "Drifted since"
FROM grafana.cluster x
WHERE {scope("x")}
  AND (last_seen_at IS NULL OR {stale("last_seen_at")} OR failing > 0 OR drifted_objects > 0)
-- Most severe first, then the latest environment first: a cut keeps prod's failures.
ORDER BY CASE WHEN failing > 0 THEN 0 WHEN {stale("last_seen_at")} THEN 1
              WHEN last_seen_at IS NULL THEN 2 ELSE 3 END,
         environment_position DESC NULLS LAST, environment, cluster_type, cluster
LIMIT 500
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
            link_clusters(
                table(
                    "Clusters that need attention",
                    ATTENTION,
                    description="Failing, stale, never reported or drifted clusters, in that "
                    "order, the latest environment first; 500 at most.",
                    height=10,
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
