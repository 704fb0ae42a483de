"""What every dashboard shares: the datasource, the variables, the filters they make, panels.

A dashboard module builds one `Dashboard` with `dashboard(...)` and panels each given one SQL
query over the `grafana` views, narrowed by `scope(alias)` and Grafana's time macros;
docs/contributing.md ("Dashboards as code") lists the helpers.
"""

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import gauge as gauge_builders
from grafana_foundation_sdk.builders import stat as stat_builders
from grafana_foundation_sdk.builders import statetimeline as statetimeline_builders
from grafana_foundation_sdk.builders import table as table_builders
from grafana_foundation_sdk.builders import timeseries as timeseries_builders
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import common as common_models
from grafana_foundation_sdk.models import dashboard as model

from dashboards.postgres import DATASOURCE_TYPE, SQL, Annotation, Format
from hub.dora.tasks import DORA_JOB
from hub.drift.tasks import DRIFT_JOB
from hub.envdiff.tasks import ENV_DIFF_JOB
from hub.gate.tasks import GATE_ANSWERS_JOB
from hub.palette import HEX, Colour, colour
from hub.rollouts.tasks import ROLLOUTS_JOB
from hub.tasks import ROLLUP_JOB

__all__ = [
    "ALL",
    "DATASOURCE",
    "EVERY_CLUSTER",
    "PER_HOUR",
    "ROLLOUT_EVENTS",
    "SHOWN_CLUSTERS",
    "STALE_AFTER",
    "VARIABLES",
    "chosen",
    "chosen_subject",
    "dashboard",
    "dashboard_url",
    "freshness",
    "gauge",
    "latest_first",
    "link_clusters",
    "placed",
    "scope",
    "severity",
    "shown_clusters",
    "stale",
    "stat",
    "state_timeline",
    "table",
    "timeseries",
    "variables",
]

DATASOURCE = model.DataSourceRef(type_val=DATASOURCE_TYPE, uid="fleetmark")
VARIABLES = ("environment", "workspace", "workload", "cluster_type", "cluster")
# The "All" value of every variable, put into the SQL as it is (Grafana does not format a
# custom all value): a quoted string no environment, cluster or workload name can be.
ALL = "'*'"
# SQL: "All" is chosen for the cluster variable.
EVERY_CLUSTER = f"({ALL} IN (${{cluster:sqlstring}}))"
# Seconds without a report after which a cluster is stale; the hub's default
# (FLEETMARK_STALE_AFTER_SECONDS). A constant variable, so provisioning can change it.
STALE_AFTER = "stale_after"
STALE_AFTER_DEFAULT = "600"
# Rollups are hourly: a bucket is never finer.
HOURLY = "1h"
# SQL: a sum over a bucket of `$__interval` as a rate per hour, whatever the range's buckets.
PER_HOUR = "* 3600000.0 / $__interval_ms"
_SPAN_NULLS = model.DynamicConfigValue(id_val="custom.spanNulls", value=True)


def chosen(variable: str, column: str) -> str:
    """SQL: `column` is among the values chosen for `variable`, or "All" is chosen."""
    values = f"${{{variable}:sqlstring}}"
    return f"({ALL} IN ({values}) OR {column} IN ({values}))"


def chosen_subject(alias: str) -> str:
    """SQL: the row (of a view the query names `alias`) is of a chosen environment and of a
    platform commit (`workload` NULL: shown unless workloads or workspaces are chosen) or of a
    chosen workload's version."""
    return (
        f"({chosen('environment', f'{alias}.environment')} AND ({alias}.workload IS NULL "
        f"AND {chosen('workload', 'NULL')} AND {chosen('workspace', 'NULL')} "
        f"OR {chosen('workload', f'{alias}.workload')} "
        f"AND {chosen('workspace', f'{alias}.workspace')}))"
    )


def placed(environment: str, cluster_type: str) -> str:
    """SQL: the environment's cluster type carries a chosen workload of a chosen workspace."""
    every = f"{ALL} IN (${{workload:sqlstring}}) AND {ALL} IN (${{workspace:sqlstring}})"
    return (
        f"(({every}) OR EXISTS (SELECT FROM grafana.placement placed "
        f"WHERE placed.environment = {environment} AND placed.cluster_type = {cluster_type} "
        f"AND {chosen('workload', 'placed.workload')} "
        f"AND {chosen('workspace', 'placed.workspace')}))"
    )


def scope(alias: str) -> str:
    """SQL: the row's cluster is one the five variables choose, from the columns
    environment, cluster_type and cluster of the view the query names `alias` (named, so
    that no column of grafana.placement, which the workload filter reads, stands in)."""
    environment, cluster_type = f"{alias}.environment", f"{alias}.cluster_type"
    return " AND ".join(
        (
            chosen("environment", environment),
            chosen("cluster_type", cluster_type),
            chosen("cluster", f"{alias}.cluster"),
            placed(environment, cluster_type),
        )
    )


def per_chosen_cluster(view: str, where: str) -> str:
    """SQL: a subquery `x` of the rows of `view` (a view of the history with a cluster_id,
    named `x` in `where`) that satisfy `where`, of the clusters the five variables choose. Read
    per chosen cluster by its id: an index scan on plain PostgreSQL; on TimescaleDB, the batches
    of a compressed chunk whose least and greatest cluster id admit it, where a join on the
    cluster's name decompresses the whole range to find one cluster's rows."""
    return f"""(
    SELECT x.* FROM grafana.cluster c
    CROSS JOIN LATERAL (
        SELECT x.* FROM {view} x WHERE x.cluster_id = c.cluster_id AND {where}
        OFFSET 0  -- not flattened into a join: read per chosen cluster, by its id
    ) x
    WHERE {scope("c")}
) x"""


# Clusters one timeline or chart shows at most: a line per cluster is read for a few.
SHOWN_CLUSTERS = 50


def shown_clusters() -> str:
    """SQL: the chosen clusters a per-cluster panel shows (`cluster_id`, `cluster`), at most
    SHOWN_CLUSTERS: those failing first, then those drifted, then by name. From the clusters'
    current state; a panel joins its rollup to them laterally (`FROM ({shown_clusters()}) s
    CROSS JOIN LATERAL (... WHERE x.cluster_id = s.cluster_id ...)`), so that it reads the
    rollup rows of those clusters by index, not the range's rows of the whole fleet."""
    return (
        f"SELECT c.cluster_id, c.cluster FROM grafana.cluster c WHERE {scope('c')} "
        "ORDER BY c.failing > 0 DESC, c.drifted_objects > 0 DESC, c.cluster "
        f"LIMIT {SHOWN_CLUSTERS}"
    )


def stale(last_seen_at: str) -> str:
    """SQL: a cluster that reported, but not within the staleness threshold."""
    return f"{last_seen_at} < now() - make_interval(secs => ${{{STALE_AFTER}}})"


def severity(alias: str) -> str:
    """SQL: how much a cluster (a row of grafana.cluster named `alias`) needs attention, 0 the
    most: an object failing, silent past the staleness threshold, never reported, an object
    drifted, 4 none of those."""
    return (
        f"CASE WHEN {alias}.failing > 0 THEN 0 WHEN {stale(f'{alias}.last_seen_at')} THEN 1 "
        f"WHEN {alias}.last_seen_at IS NULL THEN 2 WHEN {alias}.drifted_objects > 0 THEN 3 "
        "ELSE 4 END"
    )


def latest_first(alias: str) -> str:
    """SQL, to ORDER BY: the environment of the row named `alias`, the latest in the promotion
    order first (prod before dev), those with no place in it after them."""
    return f"{alias}.environment_position DESC NULLS LAST, {alias}.environment"


def variables(*, one_cluster: bool = False) -> list[cogbuilder.Builder[model.VariableModel]]:
    """The staleness threshold and the five variables, each narrowed by those before it; with
    `one_cluster`, the cluster variable is single-valued without "All", its clusters in the
    order of their severity."""
    queries = {
        "environment": (
            "Environment",
            "SELECT name FROM grafana.environment ORDER BY position NULLS LAST, name",
        ),
        "workspace": ("Workspace", "SELECT name FROM grafana.workspace ORDER BY name"),
        "workload": (
            "Workload",
            "SELECT DISTINCT workload FROM grafana.placement "
            f"WHERE {chosen('workspace', 'workspace')} AND {chosen('environment', 'environment')} "
            "ORDER BY 1",
        ),
        "cluster_type": (
            "Cluster type",
            "SELECT DISTINCT cluster_type FROM grafana.cluster "
            f"WHERE cluster_type IS NOT NULL AND {chosen('environment', 'environment')} "
            "ORDER BY 1",
        ),
        "cluster": (
            "Cluster",
            f"SELECT c.cluster FROM grafana.cluster c "
            f"WHERE {chosen('environment', 'c.environment')} "
            f"AND {chosen('cluster_type', 'c.cluster_type')} "
            f"AND {placed('c.environment', 'c.cluster_type')} "
            + (
                f"ORDER BY {severity('c')}, {latest_first('c')}, c.cluster_type, c.cluster"
                if one_cluster
                else "ORDER BY 1"
            ),
        ),
    }
    built: list[cogbuilder.Builder[model.VariableModel]] = [
        dashboard_builders.ConstantVariable(STALE_AFTER)
        .label("Stale after (seconds)")
        .value(STALE_AFTER_DEFAULT)
    ]
    for name, (label, query) in queries.items():
        variable = (
            dashboard_builders.QueryVariable(name)
            .label(label)
            .datasource(DATASOURCE)
            .query(query)
            .refresh(model.VariableRefresh.ON_DASHBOARD_LOAD)
            .sort(model.VariableSort.DISABLED)
        )
        if one_cluster and name == "cluster":
            # Grafana opens it on its first option, the most severe cluster, and on that too
            # when a link brings a value it does not offer (another dashboard's "All").
            built.append(variable.multi(False).include_all(False).allow_custom_value(False))
            continue
        built.append(
            variable.multi(True)
            .include_all(True)
            .all_value(ALL)
            .current(model.VariableOption(selected=True, text=["All"], value=["$__all"]))
        )
    return built


def dashboard_url(uid: str, *, carried: Sequence[str] = VARIABLES, **fixed: str) -> str:
    """A relative link to dashboard `uid` with the time range and the variables `carried`
    over; `fixed` sets variables instead (`cluster="${__data.fields.cluster}"`)."""
    given = [f"var-{name}={value}" for name, value in fixed.items()]
    given += [f"${{{name}:queryparam}}" for name in carried if name not in fixed]
    return f"/d/{uid}?" + "&".join(["${__url_time_range}", *given])


# The rollouts' starts and ends (converged or failed) as annotations: a name of what it is
# (the workload, or a platform commit), which revision, where, what happened, with how many
# clusters; tagged with the environment and the event.
_REVISION = "CASE WHEN x.workload IS NULL THEN left(x.revision, 12) ELSE x.revision END"
ROLLOUT_EVENTS = f"""
SELECT e.time,
       COALESCE(x.workload, 'platform commit') || ' ' || {_REVISION} || ' ' || e.event
       || ' on ' || x.environment || ': ' || e.detail AS text,
       x.environment || ',' || e.event AS tags
FROM grafana.rollout x
CROSS JOIN LATERAL (VALUES
    (x.started_at, 'started', x.expected_clusters || ' clusters expected'),
    (x.converged_at, 'converged', x.reached_clusters || ' of ' || x.expected_clusters
                                  || ' clusters reached it'),
    (x.failed_at, 'failed', COALESCE(x.failed_cluster, '') || ' failed it ('
                            || COALESCE(x.failure_reason, 'no reason given') || ')')
) AS e (time, event, detail)
WHERE e.time IS NOT NULL AND x.started_at <= $__timeTo() AND $__timeFilter(e.time)
  AND {chosen_subject("x")}
ORDER BY e.time
"""


def dashboard(
    uid: str,
    title: str,
    description: str,
    *,
    refresh: str = "1m",
    one_cluster: bool = False,
    own_variables: Sequence[cogbuilder.Builder[model.VariableModel]] | None = None,
) -> dashboard_builders.Dashboard:
    """A dashboard refreshed every `refresh`: as often as its data changes. Its variables are
    the five (of one cluster at a time with `one_cluster`) and the staleness threshold, and its
    time series marked with the rollouts' starts and ends, unless it brings its own variables
    (one that reads no view)."""
    built = (
        dashboard_builders.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["fleetmark"])
        .editable()
        .time("now-24h", "now")
        .refresh(refresh)
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
    )
    if own_variables is not None:
        return built.variables(list(own_variables))
    return built.variables(variables(one_cluster=one_cluster)).annotation(
        Annotation("Rollouts", ROLLOUT_EVENTS)
        .datasource(DATASOURCE)
        .icon_color(HEX[colour("in_progress")])
    )


P = TypeVar(
    "P",
    table_builders.Panel,
    stat_builders.Panel,
    gauge_builders.Panel,
    timeseries_builders.Panel,
    statetimeline_builders.Panel,
)


def _panel(panel: P, title: str, sql: SQL, description: str, height: int, span: int) -> P:
    return (
        panel.title(title)
        .description(description)
        .datasource(DATASOURCE)
        .with_target(sql)
        .height(height)
        .span(span)
    )


def _hourly(panel: P, title: str, sql: str, description: str, height: int, span: int) -> P:
    series = SQL(sql).format(Format.TIME_SERIES)
    return _panel(panel.interval(HOURLY), title, series, description, height, span)


def table(
    title: str, sql: str, *, description: str = "", height: int = 8, span: int = 24
) -> table_builders.Panel:
    return _panel(table_builders.Panel(), title, SQL(sql), description, height, span)


def _thresholds(*steps: tuple[float | None, Colour]) -> dict[str, Any]:
    """Grafana's thresholds: from each step's value up (the first from -Infinity), its colour."""
    return {
        "mode": "absolute",
        "steps": [{"value": value, "color": HEX[name]} for value, name in steps],
    }


# A stat's figures on their colour: totals in the palette's neutral colour, a count of a state
# green at 0 and in that state's colour from 1, a share (0 to 1) red below 90 %, amber below
# 99 %, green from there.
_NEUTRAL = [
    model.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": HEX["idle"]}),
    model.DynamicConfigValue(id_val="thresholds", value=_thresholds((None, "idle"))),
]
_BY_THRESHOLDS = model.DynamicConfigValue(id_val="color", value={"mode": "thresholds"})
_SHARE = [
    _BY_THRESHOLDS,
    model.DynamicConfigValue(
        id_val="thresholds", value=_thresholds((None, "bad"), (0.9, "warn"), (0.99, "ok"))
    ),
    model.DynamicConfigValue(id_val="unit", value="percentunit"),
]


def _count_of(state: str) -> list[model.DynamicConfigValue]:
    steps = _thresholds((None, "ok"), (1, colour(state)))
    return [_BY_THRESHOLDS, model.DynamicConfigValue(id_val="thresholds", value=steps)]


def stat(
    title: str,
    sql: str,
    *,
    counts: Mapping[str, str] | None = None,
    shares: Sequence[str] = (),
    description: str = "",
    height: int = 4,
    span: int = 24,
) -> stat_builders.Panel:
    """A stat of the query's columns: totals unless named in `counts` (column → the state word
    of hub.palette it counts) or in `shares`."""
    panel = _panel(stat_builders.Panel(), title, SQL(sql), description, height, span)
    # Every field neutral (a field is a column: the defaults would colour each alike), then
    # the counts and shares by name.
    panel = (
        panel.color_mode(common_models.BigValueColorMode.BACKGROUND_SOLID)
        .graph_mode(common_models.BigValueGraphMode.NONE)
        .reduce_options(common_builders.ReduceDataOptions().values(False).calcs(["lastNotNull"]))
    )
    panel = panel.override_by_field_type("number", _NEUTRAL)
    for column, state in (counts or {}).items():
        panel = panel.override_by_name(column, _count_of(state))
    for column in shares:
        panel = panel.override_by_name(column, _SHARE)
    return panel


def gauge(
    title: str, sql: str, *, description: str = "", height: int = 8, span: int = 24
) -> gauge_builders.Panel:
    """A gauge per row of the query: its number, named by the row's text columns."""
    panel = _panel(gauge_builders.Panel(), title, SQL(sql), description, height, span)
    return panel.reduce_options(
        common_builders.ReduceDataOptions().values(True).calcs(["lastNotNull"])
    )


# The jobs whose kept results the panels read, by the name their rounds are recorded under.
_FRESHNESS = {
    "Drift": DRIFT_JOB,
    "Environment diff": ENV_DIFF_JOB,
    "Gate answers": GATE_ANSWERS_JOB,
    "DORA": DORA_JOB,
    "Rollouts": ROLLOUTS_JOB,
    "Rollups": ROLLUP_JOB,
}
_NEVER = model.SpecialValueMap(
    options=model.DashboardSpecialValueMapOptions(
        match=model.SpecialValueMatch.NULL, result=model.ValueMappingResult(text="never")
    )
)


def freshness() -> stat_builders.Panel:
    """A line of how long ago each job whose results the panels read last succeeded, from the
    rounds the hub records (grafana.job_run)."""
    last = "max(finished_at) FILTER (WHERE job = '{}' AND outcome = 'succeeded')"
    ages = ",\n       ".join(
        f'extract(epoch FROM now() - {last.format(job)}) AS "{title}"'
        for title, job in _FRESHNESS.items()
    )
    return (
        stat(
            "Data as of",
            f"SELECT {ages}\nFROM grafana.job_run",
            description="How long ago the hub's drift, environment diff, gate answers, DORA, "
            "rollouts and rollup jobs last succeeded: what the panels show is that old. A job that "
            "fails keeps the age of its last success.",
            height=3,
        )
        .unit("s")
        .mappings([_NEVER])
    )


def timeseries(
    title: str, sql: str, *, description: str = "", height: int = 8, span: int = 24
) -> timeseries_builders.Panel:
    """A time series over hourly rollups: buckets of an hour at least."""
    return _hourly(timeseries_builders.Panel(), title, sql, description, height, span)


def state_timeline(
    title: str, sql: str, *, description: str = "", height: int = 10, span: int = 24
) -> statetimeline_builders.Panel:
    """A state timeline over hourly rollups: buckets of an hour at least. A state lasts until
    the series' next state: Grafana turns the long rows wide with a null wherever a series has
    no row at another's time, and a state timeline ends a state at a null unless it spans them
    (the SDK's model lacks `custom.spanNulls`, so an override sets it)."""
    panel = _hourly(statetimeline_builders.Panel(), title, sql, description, height, span)
    return panel.override_by_field_type("number", [_SPAN_NULLS])


def link_clusters(panel: table_builders.Panel, column: str = "Cluster") -> table_builders.Panel:
    """A table whose `column` of cluster names links to each cluster's detail."""
    url = dashboard_url("fleetmark-cluster", cluster=f"${{__data.fields.{column}}}")
    links = [{"title": "Cluster detail", "url": url}]
    return panel.override_by_name(column, [model.DynamicConfigValue(id_val="links", value=links)])
