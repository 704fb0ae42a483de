"""Promotion: per environment, the newest platform commits and workload versions with their
gate state (passed / pending / failed), the clusters that block each, and what is promotable.

The gate's policy is Python, so the panels read the answers the promotion job keeps for the
newest commits and versions of each environment (hub/promotion, migration 0027): the answers
GET /api/v1/gates/promotion gives, judged with the job's soak, as of `Evaluated`.
"""

from grafana_foundation_sdk.models.dashboard import (
    Dashboard,
    DynamicConfigValue,
    ValueMap,
    ValueMappingResult,
)

from dashboards.common import chosen, dashboard, dashboard_url, latest_first, stat, table
from hub.gate.policy import ClusterState

__all__ = ["TITLE", "UID", "build"]

UID = "fleetmark-promotion"
TITLE = "fleetmark: Promotion"

# Platform commits belong to no workload: they are shown unless workloads are chosen.
_SUBJECT = (
    f"{chosen('environment', 'environment')} AND "
    f"(workload IS NULL AND {chosen('workload', 'NULL')} AND {chosen('workspace', 'NULL')} "
    f"OR {chosen('workload', 'workload')} AND {chosen('workspace', 'workspace')})"
)
_REVISION = "CASE WHEN workload IS NULL THEN left({0}, 12) ELSE {0} END"
_ORDER = "environment_position NULLS LAST, environment, workload NULLS FIRST"

VERDICTS = f"""
SELECT count(*) FILTER (WHERE verdict = 'passed') AS "Passed",
       count(*) FILTER (WHERE verdict = 'pending') AS "Pending",
       count(*) FILTER (WHERE verdict = 'failed') AS "Failed"
FROM grafana.gate_answer
WHERE newest = 1 AND {_SUBJECT}
"""

PROMOTABLE = f"""
SELECT environment AS "Environment", COALESCE(workload, 'platform commits') AS "Subject",
       {_REVISION.format("newest_revision")} AS "Newest",
       newest_verdict AS "Verdict",
       {_REVISION.format("promotable_revision")} AS "Promotable",
       promotable_newest - 1 AS "Newer than it",
       evaluated_at AS "Evaluated"
FROM grafana.promotable
WHERE {_SUBJECT}
ORDER BY {_ORDER}
"""

ANSWERS = f"""
SELECT environment AS "Environment", COALESCE(workload, 'platform commits') AS "Subject",
       {_REVISION.format("revision")} AS "Revision", newest AS "Newest",
       verdict AS "Verdict", compliant || ' of ' || expected AS "Compliant",
       blocking_count AS "Blocking", blocking_clusters AS "Blocking clusters",
       reasons AS "Why", earliest_pass_at AS "Earliest pass", evaluated_at AS "Evaluated"
FROM grafana.gate_answer
WHERE {_SUBJECT}
ORDER BY {_ORDER}, newest
"""

SHOWN = 1000
_BLOCKING_OF = f"""
FROM grafana.gate_blocking x
WHERE {_SUBJECT} AND {chosen("cluster_type", "cluster_type")} AND {chosen("cluster", "cluster")}
"""
# The gate's cluster states, furthest from compliance first (hub/gate/policy.py).
_STATES = ", ".join(f"'{state}'" for state in ClusterState)

# Furthest from compliance first (the gate's own order of states), then the latest environment
# first: a cut keeps prod's failures.
BLOCKING = f"""
SELECT environment AS "Environment", COALESCE(workload, 'platform commits') AS "Subject",
       {_REVISION.format("revision")} AS "Revision", verdict AS "Verdict",
       cluster AS "Cluster", cluster_type AS "Cluster type", state AS "State",
       explanation AS "Why"
{_BLOCKING_OF}
ORDER BY array_position(ARRAY[{_STATES}], state), {latest_first("x")},
         workload NULLS FIRST, newest, place
LIMIT {SHOWN}
"""

BLOCKING_COUNT = f"""
SELECT count(*) AS "Blocking"
{_BLOCKING_OF}
"""

_COLOURS = {"passed": "green", "pending": "yellow", "failed": "red", "compliant": "green"}
_STATE_COLOURS = ValueMap(
    options={
        value: ValueMappingResult(color=colour, index=index)
        for index, (value, colour) in enumerate(_COLOURS.items())
    }
)
_COLOURED = [DynamicConfigValue(id_val="custom.cellOptions", value={"type": "color-text"})]


def build() -> Dashboard:
    cluster_link = dashboard_url("fleetmark-cluster", cluster="${__data.fields.Cluster}")
    return (
        dashboard(
            UID,
            TITLE,
            "Per environment, the gate for its newest platform commits and workload versions, "
            "what blocks them, and what may be promoted.",
        )
        .with_panel(
            stat(
                "Gates of the newest commits and versions",
                VERDICTS,
                counts={"Pending": "pending", "Failed": "failed"},
                description="The gate of each environment's newest platform commit and of each "
                "workload's newest version there, by verdict.",
            )
        )
        .with_panel(
            table(
                "Promotable",
                PROMOTABLE,
                description="Per environment (and workload): the newest commit or version and "
                "its gate, and the newest of those kept whose gate passes: what may move on "
                "to the next environment.",
            )
            .mappings([_STATE_COLOURS])
            .override_by_name("Verdict", _COLOURED)
        )
        .with_panel(
            table(
                "Gate answers",
                ANSWERS,
                description="The gate for each of the newest platform commits and workload "
                "versions of each environment (Newest 1: the head), as the promotion job "
                "judged it last.",
                height=10,
            )
            .mappings([_STATE_COLOURS])
            .override_by_name("Verdict", _COLOURED)
        )
        .with_panel(
            stat(
                "Blocking",
                BLOCKING_COUNT,
                counts={"Blocking": "pending"},
                description=f"All the rows of the table beside, which shows {SHOWN:,} at most.",
                height=10,
                span=4,
            )
        )
        .with_panel(
            table(
                "Blocking clusters",
                BLOCKING,
                description="The clusters that keep each gate from passing, furthest from "
                "compliance first (failed, never reported, stale, …), each the latest "
                f"environment first, with why; {SHOWN:,} at most.",
                height=10,
                span=20,
            )
            .mappings([_STATE_COLOURS])
            .override_by_name("Verdict", _COLOURED)
            .override_by_name(
                "Cluster",
                [
                    DynamicConfigValue(
                        id_val="links",
                        value=[{"title": "Cluster detail", "url": cluster_link}],
                    )
                ],
            )
        )
        .build()
    )
