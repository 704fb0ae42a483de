"""Alert rules as code: Grafana unified alerting rules, written by `python -m dashboards build`
as the provisioning file dashboards/provisioning/alerting/fleetmark.yaml.

Each rule is one SQL query on the `grafana` views: a row per firing instance, its text columns
the labels, its one number the value. docs/grafana.md ("Alert rules") gives the rules.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import yaml
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel

from dashboards.postgres import DATASOURCE_TYPE
from hub.dora.tasks import DORA_JOB
from hub.drift.tasks import DRIFT_JOB
from hub.envdiff.tasks import ENV_DIFF_JOB
from hub.gate.tasks import GATE_ANSWERS_JOB
from hub.harvest.tasks import HARVEST_JOB
from hub.rollouts.tasks import ROLLOUTS_INTERVAL, ROLLOUTS_JOB
from hub.scheduling.tasks import SCHEDULE_JOB
from hub.settings import HubSettings
from hub.tasks import RETENTION_INTERVAL, RETENTION_JOB, ROLLUP_INTERVAL, ROLLUP_JOB

__all__ = [
    "DRIFTED_FOR",
    "FOLDER",
    "GRACE",
    "JOB_INTERVALS",
    "MISSED",
    "RULES",
    "STALE_AFTER",
    "STALE_SHARE",
    "STALE_SHARE_RECOVERED",
    "Rule",
    "overdue",
    "render",
]

FOLDER = "fleetmark"
GROUP = "fleetmark"
INTERVAL = "1m"
DRIFTED_FOR = timedelta(minutes=30)
STALE_AFTER = timedelta(seconds=600)
# Of an environment's clusters that ever reported, the share stale above which the environment
# fires (and its clusters do not, each), and below which it stops firing.
STALE_SHARE = 0.5
STALE_SHARE_RECOVERED = 0.25
# A job, or the answers it keeps, is overdue after this many of its intervals, never sooner
# than GRACE after its last success (a round of a one-minute job may take a few).
MISSED = 3
GRACE = timedelta(minutes=10)
_EXPRESSION = {"type": "__expr__", "uid": "__expr__"}


def _default(setting: str) -> timedelta:
    default = HubSettings.model_fields[setting].default
    assert isinstance(default, timedelta), setting
    return default


# Each job's interval: the hub's default (FLEETMARK_<JOB>_INTERVAL), or its fixed one.
JOB_INTERVALS = {
    HARVEST_JOB: _default("harvest_interval"),
    DRIFT_JOB: _default("drift_interval"),
    ENV_DIFF_JOB: _default("env_diff_interval"),
    DORA_JOB: _default("dora_interval"),
    GATE_ANSWERS_JOB: _default("gate_answers_interval"),
    SCHEDULE_JOB: _default("schedule_interval"),
    RETENTION_JOB: RETENTION_INTERVAL,
    ROLLOUTS_JOB: ROLLOUTS_INTERVAL,
    ROLLUP_JOB: ROLLUP_INTERVAL,
}


def overdue(job: str) -> timedelta:
    """How long after a job's last success it, and what it keeps, is overdue."""
    return max(MISSED * JOB_INTERVALS[job], GRACE)


@dataclass(frozen=True)
class Rule:
    uid: str
    title: str
    # One row per firing instance: text columns (labels) and one number.
    sql: str
    summary: str
    # The panel that shows what the rule watches: its dashboard's uid and its title.
    dashboard: str
    panel: str
    # An instance fires while its number is above `above`; with `recovers_below`, once firing
    # it stays so until its number falls below that.
    above: float = 0
    recovers_below: float | None = None


def _seconds(delta: timedelta) -> int:
    return int(delta.total_seconds())


def _stale(last_seen_at: str) -> str:
    return f"{last_seen_at} < now() - make_interval(secs => {_seconds(STALE_AFTER)})"


# Per environment (the empty name for clusters placed in none), the share of the clusters that
# ever reported which are stale now.
_STALE_SHARE = f"""
SELECT COALESCE(environment, '') AS environment,
       avg(CASE WHEN {_stale("last_seen_at")} THEN 1.0 ELSE 0.0 END) AS stale_share
FROM grafana.cluster
WHERE last_seen_at IS NOT NULL
GROUP BY environment
"""


def _old_answers(what: str, newest: str, view: str, job: str) -> str:
    """SQL: one row when the newest of the answers `view` keeps is overdue for `job`."""
    return f"""
SELECT '{what}' AS answers, round(extract(epoch FROM now() - max({newest})) / 60) AS minutes_old
FROM grafana.{view}
HAVING max({newest}) < now() - make_interval(secs => {_seconds(overdue(job))})
"""


_JOB_LIMITS = ", ".join(f"('{job}', {_seconds(overdue(job))})" for job in JOB_INTERVALS)

RULES = (
    Rule(
        uid="fleetmark-cluster-drifted",
        title="Cluster drifted",
        sql=f"""
SELECT environment, COALESCE(cluster_type, '') AS cluster_type, cluster,
       round(extract(epoch FROM now() - drifted_since) / 60) AS minutes_drifted
FROM grafana.cluster
WHERE drifted_since <= now() - make_interval(secs => {_seconds(DRIFTED_FOR)})
""",
        summary="{{ $labels.cluster }} ({{ $labels.environment }}) has been drifted for more "
        f"than {_seconds(DRIFTED_FOR) // 60} minutes",
        dashboard="fleetmark-drift",
        panel="Drifted",
    ),
    Rule(
        uid="fleetmark-cluster-stale",
        title="Cluster stale",
        sql=f"""
WITH shares AS ({_STALE_SHARE.strip()})
SELECT c.environment, COALESCE(c.cluster_type, '') AS cluster_type, c.cluster,
       round(extract(epoch FROM now() - c.last_seen_at) / 60) AS minutes_silent
FROM grafana.cluster c
JOIN shares e ON e.environment = COALESCE(c.environment, '')
WHERE {_stale("c.last_seen_at")}
  AND e.stale_share <= {STALE_SHARE}
""",
        summary="{{ $labels.cluster }} ({{ $labels.environment }}) has not reported for more "
        f"than {_seconds(STALE_AFTER) // 60} minutes",
        dashboard="fleetmark-fleet",
        panel="Clusters that need attention",
    ),
    Rule(
        uid="fleetmark-environment-stale",
        title="Environment stale",
        sql=_STALE_SHARE,
        summary=f"more than {STALE_SHARE:.0%} of the clusters of {{{{ $labels.environment }}}} "
        f"have not reported for {_seconds(STALE_AFTER) // 60} minutes: is ingest down?",
        dashboard="fleetmark-fleet",
        panel="Clusters per environment and cluster type",
        above=STALE_SHARE,
        recovers_below=STALE_SHARE_RECOVERED,
    ),
    Rule(
        uid="fleetmark-harvest-failing",
        title="Harvest failing",
        sql="""
SELECT url AS repository, role, 1 AS failing
FROM grafana.repository
WHERE enabled AND fetch_error IS NOT NULL
""",
        summary="fetching {{ $labels.repository }} ({{ $labels.role }}) fails",
        dashboard="fleetmark-fleet",
        panel="Harvest per repository",
    ),
    Rule(
        uid="fleetmark-gate-failed",
        title="Gate failed",
        sql="""
SELECT environment, subject, COALESCE(workload, '') AS workload, revision,
       blocking_count AS blocking
FROM grafana.gate_answer
WHERE newest = 1 AND verdict = 'failed'
""",
        summary="the gate of the newest {{ $labels.subject }} {{ $labels.workload }} "
        "{{ $labels.revision }} in {{ $labels.environment }} failed",
        dashboard="fleetmark-promotion",
        panel="Gate answers",
    ),
    Rule(
        uid="fleetmark-job-not-succeeding",
        title="Hub job not succeeding",
        sql=f"""
SELECT j.job, round(extract(epoch FROM now() - COALESCE(j.succeeded_at, j.first_at)) / 60)
       AS minutes_since_success
FROM (SELECT job, max(finished_at) FILTER (WHERE outcome = 'succeeded') AS succeeded_at,
             min(started_at) AS first_at
      FROM grafana.job_run GROUP BY job) j
JOIN (VALUES {_JOB_LIMITS}) AS overdue (job, seconds) ON overdue.job = j.job
WHERE COALESCE(j.succeeded_at, j.first_at) < now() - make_interval(secs => overdue.seconds)
""",
        summary="the hub's {{ $labels.job }} job has not succeeded for "
        f"{MISSED} of its intervals (at least {_seconds(GRACE) // 60} minutes)",
        dashboard="fleetmark-hub-health",
        panel="Jobs",
    ),
    Rule(
        uid="fleetmark-gate-answers-old",
        title="Gate answers old",
        sql=_old_answers("gate", "evaluated_at", "gate_answer", GATE_ANSWERS_JOB),
        summary="the gate answers the dashboards and alert rules read are older than "
        f"{_seconds(overdue(GATE_ANSWERS_JOB)) // 60} minutes",
        dashboard="fleetmark-promotion",
        panel="Gate answers",
    ),
    Rule(
        uid="fleetmark-envdiff-old",
        title="Environment diff old",
        sql=_old_answers("environment diff", "evaluated_at", "environment_diff", ENV_DIFF_JOB),
        summary="the environment diff the dashboards read is older than "
        f"{_seconds(overdue(ENV_DIFF_JOB)) // 60} minutes",
        dashboard="fleetmark-envdiff",
        panel="Versions by environment",
    ),
    Rule(
        uid="fleetmark-dora-old",
        title="DORA rollup old",
        sql=_old_answers("DORA", "refreshed_at", "dora_rollout", DORA_JOB),
        summary="the DORA rollup the dashboards read is older than "
        f"{_seconds(overdue(DORA_JOB)) // 60} minutes",
        dashboard="fleetmark-dora",
        panel="Per environment (platform commits)",
    ),
    Rule(
        uid="fleetmark-rollout-stalled",
        title="Rollout stalled",
        sql="""
SELECT environment, subject, COALESCE(workload, '') AS workload, revision,
       expected_clusters - reached_clusters AS clusters_to_reach
FROM grafana.rollout
WHERE state = 'stalled'
""",
        summary="the rollout of {{ $labels.subject }} {{ $labels.workload }} "
        "{{ $labels.revision }} in {{ $labels.environment }} has stalled: no expected cluster "
        "has reached it for the hub's FLEETMARK_ROLLOUT_STALL_AFTER",
        dashboard="fleetmark-promotion",
        panel="In-flight rollouts",
    ),
)


def _panel_id(rule: Rule, dashboards: Mapping[str, Dashboard]) -> int:
    built = dashboards.get(rule.dashboard)
    if built is None:
        raise ValueError(f"alert rule {rule.uid}: no dashboard {rule.dashboard!r}")
    ids = [
        panel.id_val
        for panel in built.panels or []
        if isinstance(panel, Panel) and panel.title == rule.panel
    ]
    if len(ids) != 1 or ids[0] is None:
        raise ValueError(
            f"alert rule {rule.uid}: dashboard {rule.dashboard!r} has no one panel titled "
            f"{rule.panel!r} with an id"
        )
    return ids[0]


def _condition(rule: Rule) -> dict[str, Any]:
    condition: dict[str, Any] = {"evaluator": {"type": "gt", "params": [rule.above]}}
    if rule.recovers_below is not None:
        condition["unloadEvaluator"] = {"type": "lt", "params": [rule.recovers_below]}
    return condition


def _rule(rule: Rule, panel_id: int) -> dict[str, Any]:
    """One rule in the provisioning format: query A, B its last value per row, C above the
    rule's threshold."""
    return {
        "uid": rule.uid,
        "title": rule.title,
        "dashboardUid": rule.dashboard,
        "panelId": panel_id,
        "condition": "C",
        "data": [
            {
                "refId": "A",
                "relativeTimeRange": {"from": 600, "to": 0},
                "datasourceUid": "fleetmark",
                "model": {
                    "refId": "A",
                    "datasource": {"type": DATASOURCE_TYPE, "uid": "fleetmark"},
                    "editorMode": "code",
                    "format": "table",
                    "rawQuery": True,
                    "rawSql": rule.sql.strip(),
                    "intervalMs": 1000,
                    "maxDataPoints": 43200,
                },
            },
            {
                "refId": "B",
                "relativeTimeRange": {"from": 0, "to": 0},
                "datasourceUid": "__expr__",
                "model": {
                    "refId": "B",
                    "datasource": _EXPRESSION,
                    "type": "reduce",
                    "expression": "A",
                    "reducer": "last",
                },
            },
            {
                "refId": "C",
                "relativeTimeRange": {"from": 0, "to": 0},
                "datasourceUid": "__expr__",
                "model": {
                    "refId": "C",
                    "datasource": _EXPRESSION,
                    "type": "threshold",
                    "expression": "B",
                    "conditions": [_condition(rule)],
                },
            },
        ],
        "noDataState": "OK",
        "execErrState": "Error",
        "for": "0s",
        "annotations": {"summary": rule.summary},
        "labels": {"source": "fleetmark"},
        "isPaused": False,
    }


class _Dumper(yaml.SafeDumper):
    """Every value written out where it stands (no YAML aliases); SQL as a block of lines."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    )


_Dumper.add_representer(str, _text)


def render(dashboards: Mapping[str, Dashboard]) -> str:
    """The provisioning file's text; `dashboards` by uid, their panels numbered."""
    document = {
        "apiVersion": 1,
        "groups": [
            {
                "orgId": 1,
                "name": GROUP,
                "folder": FOLDER,
                "interval": INTERVAL,
                "rules": [_rule(rule, _panel_id(rule, dashboards)) for rule in RULES],
            }
        ],
    }
    header = "# Generated by `python -m dashboards build` from dashboards/alerts.py.\n"
    return header + yaml.dump(
        document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100
    )
