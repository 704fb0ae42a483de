"""Environment diff: what each environment is meant to run and what its clusters run, side by
side, with the reason for each difference and the config keys that differ.

The reasons are Python's (hub/envdiff/compare.py), so the panels read the diff the job keeps
for every environment in promotion order (migration 0027), versions run included.
"""

from grafana_foundation_sdk.models.dashboard import Dashboard, DataTransformerConfig

from dashboards.common import chosen, dashboard, latest_first, stat, table
from hub.envdiff.compare import CellState
from hub.palette import Colour, colour

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

SHOWN = 1000
# A cell's state by the palette's colour of it: failing, then those that need a look (drifted,
# not reporting), then the others.
_SEVERITY: dict[Colour, int] = {"bad": 0, "warn": 1, "progress": 2, "idle": 3, "ok": 4}
_BY_STATE = " ".join(f"WHEN '{state}' THEN {_SEVERITY[colour(state)]}" for state in CellState)

# Most severe first, then the latest environment first: a cut keeps prod's failures.
DIFFERENCES = f"""
SELECT workload AS "Workload", cluster_type AS "Cluster type", environment AS "Environment",
       state AS "State", COALESCE('pinned to ' || pinned_ref, desired_version) AS "Desired",
       deployed_versions AS "Deployed", clusters AS "Clusters", failing AS "Failing",
       drifted AS "Drifted", not_reporting AS "Not reporting", reasons AS "Reasons",
       details AS "Why", evaluated_at AS "Evaluated"
FROM grafana.environment_diff x
WHERE reasons <> '' AND {_CHOSEN}
ORDER BY CASE state {_BY_STATE} END, {latest_first("x")}, workload, cluster_type,
         paired_target
LIMIT {SHOWN}
"""

DIFFERENCE_COUNT = f"""
SELECT count(*) AS "Differences"
FROM grafana.environment_diff
WHERE reasons <> '' AND {_CHOSEN}
"""

# Per workload and version, the clusters running it in each environment (of each cell of the
# kept diff, summed over its cluster types), the environments in promotion order.
VERSIONS = f"""
SELECT workload || ' ' || version AS "Version", environment AS "Environment",
       sum(clusters) AS "Clusters"
FROM grafana.environment_diff_version
WHERE {_CHOSEN}
GROUP BY workload, version, environment, environment_order
ORDER BY environment_order, workload, version
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
            stat(
                "Differing cells",
                DIFFERENCE_COUNT,
                counts={"Differences": "drifted"},
                description=f"All the rows of the table beside, which shows {SHOWN:,} at most.",
                height=10,
                span=4,
            )
        )
        .with_panel(
            table(
                "Differences and why",
                DIFFERENCES,
                description="Each environment that differs: awaiting_promotion, pinned, "
                "diverged (against the environment before it), not_assigned, failed, drifted. "
                "Failing first, then drifted or not reporting, then the others, each the latest "
                f"environment first; {SHOWN:,} at most.",
                height=10,
                span=20,
            )
        )
        .with_panel(
            table(
                "Versions by environment and workload",
                VERSIONS,
                description="How many clusters run each version (else commit) of each workload "
                "in each environment, as the environment diff job last found them. A cluster "
                "that carries two of a workload's deployment targets counts for each.",
                height=10,
            ).with_transformation(_matrix("Version", "Clusters"))
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
