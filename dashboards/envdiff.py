"""Environment diff: workloads by environments, what each environment is meant to run and what
its clusters run side by side, the reason for each difference, and the config keys that
differ; any number of environments, in their declared order.

The reasons are the environment diff's own (hub/envdiff/compare.py): the diff job keeps the
diff of every environment in promotion order (migration 0027), and the panels read it. So a
version difference is judged against the environment before it in the whole chain, also when
the environment variable shows only some of them.
"""

from grafana_foundation_sdk.models.dashboard import Dashboard, DataTransformerConfig

from dashboards.common import chosen, dashboard, stat, table

__all__ = ["TITLE", "UID", "build"]

UID = "fleetmark-envdiff"
TITLE = "fleetmark: Environment diff"

_CHOSEN = " AND ".join(
    chosen(variable, variable)
    for variable in ("environment", "workload", "workspace", "cluster_type")
)
_ROW = "workload || ' on ' || cluster_type || COALESCE(' (' || paired_target || ')', '')"

DIFFERING = f"""
SELECT count(DISTINCT ({_ROW})) FILTER (WHERE reasons <> '') AS "Rows that differ",
       count(*) FILTER (WHERE state = 'failing') AS "Failing cells",
       count(*) FILTER (WHERE state = 'drifted') AS "Drifted cells"
FROM grafana.environment_diff
WHERE {_CHOSEN}
"""

# One cell per row and environment, the environments in promotion order: the matrix
# transformation makes a column of each, in the order they come.
MATRIX = f"""
SELECT {_ROW} AS "Workload", environment AS "Environment",
       CASE WHEN NOT assigned THEN 'not assigned'
            ELSE COALESCE('pinned to ' || pinned_ref, desired_version, 'unknown version')
                 || ' → ' || COALESCE(deployed_versions, 'nothing reported')
       END || CASE WHEN reasons <> '' THEN ' (' || reasons || ')' ELSE '' END AS "Cell"
FROM grafana.environment_diff
WHERE {_CHOSEN}
ORDER BY environment_order, workload, cluster_type, paired_target
"""

DIFFERENCES = f"""
SELECT workload AS "Workload", cluster_type AS "Cluster type", environment AS "Environment",
       state AS "State", COALESCE('pinned to ' || pinned_ref, desired_version) AS "Desired",
       deployed_versions AS "Deployed", clusters AS "Clusters", failing AS "Failing",
       drifted AS "Drifted", not_reporting AS "Not reporting", reasons AS "Reasons",
       details AS "Why", evaluated_at AS "Evaluated"
FROM grafana.environment_diff
WHERE reasons <> '' AND {_CHOSEN}
ORDER BY workload, cluster_type, paired_target, environment_order
LIMIT 1000
"""

CONFIG = f"""
SELECT {_ROW} || ': ' || key AS "Config key", environment AS "Environment",
       COALESCE(value, '(missing)') AS "Value"
FROM grafana.environment_diff_config
WHERE {_CHOSEN}
ORDER BY environment_order, workload, cluster_type, paired_target, key
"""


def _matrix(row: str, value: str) -> DataTransformerConfig:
    """Rows by `row`, a column per environment (in the order the rows come), cells `value`."""
    return DataTransformerConfig(
        id_val="groupingToMatrix",
        options={"columnField": "Environment", "rowField": row, "valueField": value},
    )


def build() -> Dashboard:
    return (
        dashboard(
            UID,
            TITLE,
            "How environments differ: desired and deployed versions side by side, why they "
            "differ, and the config keys that differ.",
        )
        .with_panel(
            stat(
                "Differences",
                DIFFERING,
                counts={
                    "Rows that differ": "drifted",
                    "Failing cells": "failing",
                    "Drifted cells": "drifted",
                },
            )
        )
        .with_panel(
            table(
                "Versions by environment",
                MATRIX,
                description="Per workload and cluster type, in each environment: the desired "
                "version → the versions its clusters run (on how many), and the reason for a "
                "difference. Environments in their declared order.",
                height=12,
            ).with_transformation(_matrix("Workload", "Cell"))
        )
        .with_panel(
            table(
                "Differences and why",
                DIFFERENCES,
                description="Each environment that differs: awaiting_promotion, pinned, "
                "diverged (against the environment before it), not_assigned, failed, drifted.",
                height=10,
            )
        )
        .with_panel(
            table(
                "Config keys that differ",
                CONFIG,
                description="Platform config values per environment, for the keys that "
                "differ between the environments that have the assignment.",
                height=10,
            ).with_transformation(_matrix("Config key", "Value"))
        )
        .build()
    )
