"""Alert rules as code: Grafana unified alerting rules, written by `python -m dashboards build`
as the provisioning file dashboards/provisioning/alerting/fleetmark.yaml.

Each rule is one SQL query on the `grafana` views (datasource `fleetmark`, so it runs as
Grafana's read-only role) that returns one row per firing instance: the row's text columns
become the alert's labels (a cluster, a repository, a gate), its one number the value. A
reduce (last) and a threshold (above 0) expression make the condition, so the rule fires
exactly for the rows the query returns, and returns to normal when there are none (no data is
OK). The file follows Grafana's alerting file provisioning format (apiVersion 1, `groups` of
rules with `data` queries and expressions). Each rule names the panel that shows what it
watches (`dashboardUid` and `panelId`): Grafana then marks the rule's state on that panel and
links it, by Grafana's own URL, in notifications.

The thresholds are in the SQL: a cluster drifted for longer than `DRIFTED_FOR`, a cluster
whose newest report is older than `STALE_AFTER` (the hub's default
FLEETMARK_STALE_AFTER_SECONDS), a repository whose last fetch failed, the gate of an
environment's newest platform commit or of a workload's newest version that failed (the
answers the promotion job keeps), and a rollout that no expected cluster reached for
FLEETMARK_ROLLOUT_STALL_AFTER (the hub judges it: the rollouts job keeps the state).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import yaml
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel

from dashboards.postgres import DATASOURCE_TYPE

__all__ = ["DRIFTED_FOR", "FOLDER", "RULES", "STALE_AFTER", "Rule", "render"]

FOLDER = "fleetmark"
GROUP = "fleetmark"
INTERVAL = "1m"
DRIFTED_FOR = timedelta(minutes=30)
STALE_AFTER = timedelta(seconds=600)
_EXPRESSION = {"type": "__expr__", "uid": "__expr__"}


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


def _seconds(delta: timedelta) -> int:
    return int(delta.total_seconds())


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
SELECT environment, COALESCE(cluster_type, '') AS cluster_type, cluster,
       round(extract(epoch FROM now() - last_seen_at) / 60) AS minutes_silent
FROM grafana.cluster
WHERE last_seen_at < now() - make_interval(secs => {_seconds(STALE_AFTER)})
""",
        summary="{{ $labels.cluster }} ({{ $labels.environment }}) has not reported for more "
        f"than {_seconds(STALE_AFTER) // 60} minutes",
        dashboard="fleetmark-fleet",
        panel="Clusters that need attention",
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


def _rule(rule: Rule, panel_id: int) -> dict[str, Any]:
    """One rule in the provisioning format: query A, B its last value per row, C above 0."""
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
                    "conditions": [{"evaluator": {"type": "gt", "params": [0]}}],
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
