"""What Grafana draws from the generated dashboards, read back from their JSON: stat colours
from the pages' palette, buckets without rows drawn as 0 or spanned, per-hour panels per hour
at every range, daily counts as bars of UTC days, panel ids, refresh intervals, and alert rules
that point at the panel showing what they watch."""

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards import alerts, build, hubhealth
from hub.palette import HEX, STATES
from tests.dashboards.conftest import ReadOnly, Seeded
from tests.dashboards.panels import dashboard_files, panel_queries

CSS = Path(__file__).resolve().parents[2] / "hub" / "pages" / "static" / "fleetmark.css"
DASHBOARDS = {
    dashboard["uid"]: dashboard
    for dashboard in (json.loads(text) for text in dashboard_files().values())
}
GROUP = re.compile(r"\$__timeGroupAlias\(([^)]*)\)")


def panels(kind: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    return [
        (uid, panel)
        for uid, dashboard in DASHBOARDS.items()
        for panel in dashboard["panels"]
        if kind is None or panel["type"] == kind
    ]


def panel(uid: str, title: str) -> dict[str, Any]:
    [found] = [p for p in DASHBOARDS[uid]["panels"] if p["title"] == title]
    return found


def sql(found: dict[str, Any]) -> str:
    [target] = found["targets"]
    return str(target["rawSql"])


def overrides(found: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each override's properties by its matcher (id, options)."""
    return {
        (o["matcher"]["id"], o["matcher"]["options"]): {
            p["id"]: p["value"] for p in o["properties"]
        }
        for o in found["fieldConfig"]["overrides"]
    }


def steps(properties: dict[str, Any]) -> list[tuple[float | None, str]]:
    return [(step["value"], step["color"]) for step in properties["thresholds"]["steps"]]


def test_the_palette_is_the_pages_colours() -> None:
    css = dict(re.findall(r"--(\w+):\s*(#[0-9a-f]{6})", CSS.read_text(encoding="utf-8")))

    assert {name: css[name] for name in HEX} == HEX


def test_stat_panels_draw_totals_neutral_and_counts_in_their_states_colour() -> None:
    ok, bad, warn, idle = HEX["ok"], HEX["bad"], HEX["warn"], HEX["idle"]
    # Hub health's stats, over Prometheus, draw their own (tests/dashboards/test_hub_health.py).
    stats = [(uid, found) for uid, found in panels("stat") if uid != hubhealth.UID]
    assert stats
    for uid, found in stats:
        assert found["options"]["colorMode"] == "background_solid", (uid, found["title"])
        # Every number gets a colour of its own: none is left to Grafana's default
        # thresholds (green, red from 80).
        neutral = overrides(found)[("byType", "number")]
        assert neutral["color"] == {"mode": "fixed", "fixedColor": idle}
        assert steps(neutral) == [(None, idle)]

    fleet = overrides(panel("fleetmark-fleet", "Clusters"))
    assert ("byName", "Clusters") not in fleet
    assert ("byName", "Reporting") not in fleet
    for name, colour in (("Failing", bad), ("Stale", warn), ("Never reported", warn)):
        assert fleet[("byName", name)]["color"] == {"mode": "thresholds"}
        assert steps(fleet[("byName", name)]) == [(None, ok), (1, colour)]
    share = fleet[("byName", "Reporting share")]
    assert steps(share) == [(None, bad), (0.9, warn), (0.99, ok)]
    assert share["unit"] == "percentunit"
    gates = overrides(panel("fleetmark-promotion", "Gates of the newest commits and versions"))
    assert ("byName", "Passed") not in gates
    assert steps(gates[("byName", "Failed")]) == [(None, ok), (1, bad)]
    assert steps(gates[("byName", "Pending")]) == [(None, ok), (1, HEX[STATES["pending"]])]
    drift = overrides(panel("fleetmark-drift", "Drift now"))
    assert {name for kind, name in drift if kind == "byName"} == {
        "Drifted clusters",
        "Drifted objects",
        "Stale clusters",
    }
    differences = overrides(panel("fleetmark-envdiff", "Differences"))
    assert steps(differences[("byName", "Failing cells")]) == [(None, ok), (1, bad)]


def test_in_flight_rollouts_are_a_gauge_each_of_the_share_of_clusters_reached() -> None:
    found = panel("fleetmark-promotion", "In-flight rollouts")
    defaults = found["fieldConfig"]["defaults"]

    assert found["type"] == "gauge"
    # A gauge per row (rollout), not one of all rows reduced.
    assert found["options"]["reduceOptions"]["values"] is True
    assert (defaults["unit"], defaults["min"], defaults["max"]) == ("percentunit", 0, 1)
    assert defaults["color"] == {"mode": "fixed", "fixedColor": HEX[STATES["in_progress"]]}
    assert defaults["noValue"] == "No rollout in flight"
    # It says how old what it draws may be.
    assert "up to FLEETMARK_DORA_INTERVAL" in found["description"]


FILLED = {
    ("fleetmark-drift", "Drift minutes per environment"): "0",
    ("fleetmark-cluster", "Reports per hour"): "0",
    ("fleetmark-dora", "Reconcilers turning not ready per hour"): "0",
    ("fleetmark-dora", "Deployments per day"): "0",
    ("fleetmark-history", "State per cluster"): "NULL",
}


def test_buckets_without_rows_are_filled_with_zero_or_null() -> None:
    for (uid, title), fill in FILLED.items():
        [arguments] = GROUP.findall(sql(panel(uid, title)))
        assert arguments.split(",")[-1].strip() == fill, (uid, title)
    # A day without rollouts has no lead time or failure rate: not 0.
    for title in ("Lead time per day (median)", "Change failure rate per day"):
        [arguments] = GROUP.findall(sql(panel("fleetmark-dora", title)))
        assert len(arguments.split(",")) == 2, title


def test_state_timelines_span_nulls() -> None:
    timelines = panels("state-timeline")
    assert {found["title"] for _, found in timelines} == {
        "State per cluster",
        "Rollouts per workload",
    }
    for uid, found in timelines:
        assert overrides(found)[("byType", "number")]["custom.spanNulls"] is True, uid


def test_daily_panels_are_of_utc_days_and_counts_drawn_as_bars() -> None:
    daily = [(uid, found) for uid, found in panels() if "per day" in found["title"]]
    assert len(daily) == 3
    for uid, found in daily:
        assert "UTC day" in found["description"], (uid, found["title"])
        assert "'1d'" in sql(found)
    bars = panel("fleetmark-dora", "Deployments per day")
    assert bars["fieldConfig"]["defaults"]["custom"]["drawStyle"] == "bars"


def test_every_dashboard_opens_with_how_fresh_its_data_is() -> None:
    for uid, dashboard in DASHBOARDS.items():
        if uid == hubhealth.UID:  # its jobs' panels, over Prometheus, say it
            continue
        [line] = [found for found in dashboard["panels"] if found["title"] == "Data as of"]
        height = line["gridPos"]["h"]
        assert line["gridPos"] == {"h": height, "w": 24, "x": 0, "y": 0}, uid
        # Numbered after the dashboard's own panels, so that theirs stay; drawn above them.
        assert line["id"] == len(dashboard["panels"]), uid
        assert all(found["gridPos"]["y"] >= height for found in dashboard["panels"][:-1]), uid
        assert "grafana.job_run" in sql(line)
        assert line["fieldConfig"]["defaults"]["unit"] == "s"


# A table that shows so many rows at most: cut at a LIMIT of a hundred rows or more.
CUT = re.compile(r"\bLIMIT (\d{3,})\b")


def test_a_table_that_can_be_cut_has_the_count_of_its_rows_beside_it() -> None:
    cut = [
        (uid, found)
        for uid, found in panels("table")
        if uid != hubhealth.UID and CUT.search(sql(found))
    ]
    assert len(cut) >= 8
    for uid, table in cut:
        position = table["gridPos"]
        [count] = [
            found
            for found in DASHBOARDS[uid]["panels"]
            if found["type"] == "stat"
            and found["gridPos"]["y"] == position["y"]
            and found["gridPos"]["h"] == position["h"]
            and found["gridPos"]["x"] + found["gridPos"]["w"] == position["x"]
        ]
        [shown] = {int(limit) for limit in CUT.findall(sql(table))}
        assert f"{shown:,}" in count["description"] or str(shown) in count["description"], (
            uid,
            table["title"],
        )
        # Counted further than the table goes (the drift periods, as far as is cheap).
        assert all(int(limit) > shown for limit in CUT.findall(sql(count))), (uid, count["title"])


def test_cluster_detail_opens_on_one_cluster_the_most_severe() -> None:
    for uid, dashboard in DASHBOARDS.items():
        variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
        if uid == hubhealth.UID:  # none of the five variables
            continue
        cluster = variables["cluster"]
        if uid != "fleetmark-cluster":
            assert (cluster["multi"], cluster["includeAll"]) == (True, True), uid
            continue
        assert (cluster["multi"], cluster["includeAll"], cluster["allowCustomValue"]) == (
            False,
            False,
            False,
        )
        assert "current" not in cluster or not cluster["current"]
        assert "ORDER BY CASE WHEN c.failing > 0 THEN 0" in cluster["query"]


def test_every_panel_has_an_id_unique_in_its_dashboard() -> None:
    for uid, dashboard in DASHBOARDS.items():
        ids = [found.get("id") for found in dashboard["panels"]]
        assert all(isinstance(number, int) for number in ids), uid
        assert ids == list(range(1, len(ids) + 1)), uid


def test_dora_refreshes_as_often_as_its_rollup_the_others_every_minute() -> None:
    assert {uid: dashboard["refresh"] for uid, dashboard in DASHBOARDS.items()} == {
        module.UID: "5m" if module.UID == "fleetmark-dora" else "1m" for module in build.DASHBOARDS
    }


def test_every_alert_rule_points_at_the_panel_it_watches() -> None:
    document = yaml.safe_load(build.render()[build.ALERT_RULES])
    [group] = document["groups"]
    expected = {rule.uid: rule for rule in alerts.RULES}

    for rule in group["rules"]:
        shown = next(
            found
            for found in DASHBOARDS[rule["dashboardUid"]]["panels"]
            if found["id"] == rule["panelId"]
        )
        assert (rule["dashboardUid"], shown["title"]) == (
            expected[rule["uid"]].dashboard,
            expected[rule["uid"]].panel,
        )
        # Grafana links the panel by its own URL; a relative one no notification can open.
        assert "dashboard" not in rule["annotations"]


def test_a_rule_naming_no_panel_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = alerts.Rule(
        uid="x", title="x", sql="SELECT 1", summary="x", dashboard="fleetmark-fleet", panel="Gone"
    )
    monkeypatch.setattr(alerts, "RULES", (gone,))

    with pytest.raises(ValueError, match=r"alert rule x: .* no one panel titled 'Gone'"):
        build.render()


@pytest.mark.parametrize(
    ("key", "chosen", "series", "total"),
    [
        # Three dev clusters drifted for three hours.
        ("fleetmark-drift: Drift minutes per environment", {}, "dev", 540),
        # drone-02 reported three hours ago and now.
        ("fleetmark-cluster: Reports per hour", {"cluster": ["drone-02"]}, "drone-02", 2),
    ],
)
async def test_per_hour_panels_are_per_hour_at_every_range(
    readonly: ReadOnly,
    seeded: Seeded,
    key: str,
    chosen: dict[str, list[str]],
    series: str,
    total: float,
) -> None:
    """The last day (hourly buckets) and the last year (6-hour buckets at 1,000 points): the
    same hours counted, each bucket's value a rate per hour."""
    query = {q.key: q for q in panel_queries()}[key]
    variables = await readonly.variables(query.dashboard, chosen)
    end = seeded.now + timedelta(hours=1)
    for span, hours in ((timedelta(days=1), 1), (timedelta(days=365), 6)):
        for timescaledb in {False, readonly.timescaledb}:
            rows = await readonly.panel(query, variables, end - span, end, timescaledb)
            values = [float(row["value"]) for row in rows if row["metric"] == series]
            assert sum(values) * hours == pytest.approx(total), (span, timescaledb)
