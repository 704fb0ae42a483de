"""Promotion: per environment, the newest platform commits and workload versions with their
gate state, the clusters that block each, what is promotable, the rollouts in flight and the
current rollouts' health as numbers.

The gate's policy is Python, so the panels read the answers the promotion job keeps
(hub/promotion, migration 0027); the rollouts, those the rollouts job keeps (migration 0038),
and their health from its view (migration 0050).
"""

from grafana_foundation_sdk.builders.dashboard import FieldColor
from grafana_foundation_sdk.models.dashboard import (
    Dashboard,
    DynamicConfigValue,
    FieldColorModeId,
    ValueMap,
    ValueMappingResult,
)

from dashboards.common import (
    chosen,
    chosen_subject,
    dashboard,
    dashboard_url,
    gauge,
    latest_first,
    stat,
    table,
)
from hub.gate.policy import ClusterState
from hub.palette import HEX, colour

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

# In flight: not converged. A gauge per rollout, the latest environment first, named by what
# it is, how many clusters reached it and failed on it, how long ago it started and how old
# what it says is.
IN_FLIGHT_SHOWN = 12


def _ago(seconds: str) -> str:
    """SQL: a span of `seconds` in words, to the minute below two hours."""
    return (
        f"CASE WHEN {seconds} < 7200 THEN floor({seconds} / 60) || ' min' "
        f"WHEN {seconds} < 172800 THEN floor({seconds} / 3600) || ' h' "
        f"ELSE floor({seconds} / 86400) || ' d' END"
    )


IN_FLIGHT = f"""
SELECT COALESCE(x.workload, 'platform') || ' ' || {_REVISION.format("x.revision")}
       || ' on ' || x.environment || ': ' || x.reached_clusters || ' of '
       || x.expected_clusters
       || CASE WHEN x.failed_clusters > 0 THEN ', ' || x.failed_clusters || ' failed'
               ELSE '' END
       || CASE WHEN x.state = 'stalled' THEN ', stalled' ELSE '' END
       || ', started ' || {_ago("extract(epoch FROM now() - x.started_at)")} || ' ago'
       || ' (as of ' || {_ago("extract(epoch FROM now() - x.evaluated_at)")} || ' ago)'
       AS "Rollout",
       CAST(x.reached_clusters AS double precision) / x.expected_clusters AS "Reached"
FROM grafana.rollout x
WHERE x.state <> 'converged' AND {chosen_subject("x")}
ORDER BY x.environment_position DESC NULLS LAST, x.environment, x.started_at DESC,
         x.workload NULLS FIRST, x.revision
LIMIT {IN_FLIGHT_SHOWN}
"""

# The current rollout per environment and subject, as numbers (migration 0050): the max of a
# rollout not converged is the time so far.
HEALTH = f"""
SELECT environment AS "Environment", COALESCE(workload, 'platform commits') AS "Subject",
       {_REVISION.format("revision")} AS "Revision", state AS "State",
       converged_clusters || ' of ' || expected_clusters AS "Converged",
       converged_ratio AS "Ratio", failed_clusters AS "Failed",
       time_to_converge_p50_seconds AS "p50", time_to_converge_p95_seconds AS "p95",
       time_to_converge_max_seconds AS "Max",
       CASE WHEN max_open THEN 'so far' ELSE 'final' END AS "Max is",
       evaluated_at AS "Evaluated"
FROM grafana.rollout_health
WHERE {_SUBJECT}
ORDER BY {_ORDER}
"""
_SECONDS = [DynamicConfigValue(id_val="unit", value="s")]

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
            "what blocks them, what may be promoted, and the rollouts in flight.",
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
            gauge(
                "In-flight rollouts",
                IN_FLIGHT,
                description="Each rollout not converged yet (in progress, stalled or failed): "
                "of the clusters it expected, the share that runs it Ready, with how many "
                "failed on it and how long ago it started; the latest environment first, "
                f"{IN_FLIGHT_SHOWN} at most. As of the DORA job's last refresh (each gauge says "
                "how long ago): up to FLEETMARK_DORA_INTERVAL (5 minutes) and a minute old.",
            )
            .unit("percentunit")
            .min(0)
            .max(1)
            .color_scheme(
                FieldColor().mode(FieldColorModeId.FIXED).fixed_color(HEX[colour("in_progress")])
            )
            .show_threshold_markers(False)
            .no_value("No rollout in flight")
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
        .with_panel(
            table(
                "Rollout health",
                HEALTH,
                description="The current rollout (the newest started) of the platform commits "
                "and of each workload per environment: its expected clusters converged, how "
                "many failed, and the time to converge per cluster, from the commit's time to "
                "running it Ready: p50, p95 and max across those that did. Not converged, the "
                "max is the time so far. As of the DORA job's last refresh.",
            )
            .override_by_name("Ratio", [DynamicConfigValue(id_val="unit", value="percentunit")])
            .override_by_name("p50", _SECONDS)
            .override_by_name("p95", _SECONDS)
            .override_by_name("Max", _SECONDS)
        )
        .build()
    )
