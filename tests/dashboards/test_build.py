"""The generated dashboards: committed as built, loaded back into the SDK's models with typed
queries, every variable a panel or link uses defined, every link to a dashboard that exists."""

import json
import re
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder

from dashboards import build, history, hubhealth
from dashboards.common import DATASOURCE, ROLLOUT_EVENTS, VARIABLES
from dashboards.postgres import DATASOURCE_TYPE, PostgresQuery
from tests.dashboards.panels import built_dashboards, dashboard_files, panel_queries

# Each annotation's SQL, by its name.
ANNOTATIONS = {"Rollouts": ROLLOUT_EVENTS, "Timeline": history.TIMELINE_EVENTS}

# $name, ${name}, ${name:format}; Grafana's own start with two underscores.
USED = re.compile(r"\$\{?(\w+)")
LINKED = re.compile(r"/d/([\w-]+)")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _within(part: Any, whole: Any) -> bool:
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            key in whole and _within(value, whole[key]) for key, value in part.items()
        )
    if isinstance(part, list):
        return (
            isinstance(whole, list)
            and len(part) == len(whole)
            and all(_within(a, b) for a, b in zip(part, whole, strict=True))
        )
    return bool(part == whole)


def test_the_committed_files_are_a_fresh_build() -> None:
    assert build.check() == []


def test_dashboards_load_back_with_typed_postgres_queries() -> None:
    dashboards = built_dashboards()
    queries = panel_queries()

    assert sorted(d.uid or "" for d in dashboards) == sorted(m.UID for m in build.DASHBOARDS)
    assert queries
    for query in queries:
        assert isinstance(query.query, PostgresQuery)
        assert query.query.datasource is None or query.query.datasource.uid == DATASOURCE.uid
        assert query.panel.datasource is not None
        assert (query.panel.datasource.uid, query.panel.datasource.type_val) == (
            "fleetmark",
            DATASOURCE_TYPE,
        )
        assert query.query.raw_sql.strip()
    for dashboard, content in zip(dashboards, dashboard_files().values(), strict=True):
        # Written back, a dashboard read from its file has all the file has (and the SDK's
        # defaults for what the file leaves out): nothing was lost on the way. But for the SQL
        # of its annotation, which the SDK's model has no room for (dashboards/postgres.py).
        written = json.loads(content)
        for annotation in written["annotations"].get("list", []):
            assert annotation.pop("target")["rawSql"] == ANNOTATIONS[annotation["name"]]
        assert _within(written, json.loads(json.dumps(dashboard, cls=JSONEncoder)))


def test_every_dashboard_marks_its_time_series_with_the_rollouts() -> None:
    for path, content in dashboard_files().items():
        if path.stem == hubhealth.UID:  # no view of the store: no variables to follow
            continue
        [annotation, *timeline] = json.loads(content)["annotations"]["list"]
        # The history dashboard marks its series with the fleet's timeline too.
        assert [marks["name"] for marks in timeline] == (
            ["Timeline"] if path.stem == history.UID else []
        ), path
        assert annotation["datasource"] == {"type": DATASOURCE_TYPE, "uid": DATASOURCE.uid}
        assert (annotation["name"], annotation["enable"], annotation["hide"]) == (
            "Rollouts",
            True,
            False,
        ), path
        # Grafana's SQL data sources read an annotation's query from its target, as a panel's.
        assert annotation["target"] == {
            "refId": "Anno",
            "rawSql": ROLLOUT_EVENTS,
            "format": "table",
            "rawQuery": True,
            "editorMode": "code",
        }, path


def test_every_variable_used_is_defined() -> None:
    for path, content in dashboard_files().items():
        dashboard = json.loads(content)
        defined = {variable["name"] for variable in dashboard["templating"]["list"]}
        if dashboard["uid"] == hubhealth.UID:
            assert defined == {hubhealth.PROMETHEUS, hubhealth.SCRAPE_JOB}
        else:
            assert set(VARIABLES) <= defined, path
        used = {
            name
            for text in _strings(dashboard["panels"]) + _strings(dashboard["links"])
            for name in USED.findall(text)
            if not name.startswith("__")
        }
        assert used <= defined, (path, used - defined)
        # Each variable's own query uses only those before it.
        seen: set[str] = set()
        for variable in dashboard["templating"]["list"]:
            needs = {n for n in USED.findall(variable["query"]) if not n.startswith("__")}
            assert needs <= seen, (path, variable["name"], needs - seen)
            seen.add(variable["name"])


def test_every_link_goes_to_a_dashboard_by_uid_carrying_the_variables() -> None:
    uids = {module.UID for module in build.DASHBOARDS}
    for path, content in dashboard_files().items():
        dashboard = json.loads(content)
        assert {link["url"].split("?")[0] for link in dashboard["links"]} == {
            f"/d/{uid}" for uid in uids - {dashboard["uid"]}
        }
        for link in dashboard["links"]:
            # Hub health has none of the five variables: a link to or from it carries the
            # time range alone, no `${environment:queryparam}` it cannot fill in.
            linked = link["url"].split("?")[0].removeprefix("/d/")
            between_store_dashboards = hubhealth.UID not in (dashboard["uid"], linked)
            for variable in VARIABLES:
                carried = f"${{{variable}:queryparam}}" in link["url"]
                assert carried == between_store_dashboards, (path, link["url"])
            assert "${__url_time_range}" in link["url"]
        targets = {uid for text in _strings(dashboard) for uid in LINKED.findall(text)}
        assert targets <= uids, (path, targets - uids)
        assert not any("://" in url for url in _strings(dashboard["links"])), path


def test_no_environment_or_cluster_is_named() -> None:
    for path, content in dashboard_files().items():
        named = re.findall(r"'(dev|stage|prod|drone-\d+|large-\d+)'", content)
        assert named == [], path
