"""Every panel of every built dashboard, run as Grafana runs it (macros and variables
expanded) as the read-only role on a simulated fleet; the dashboards' own panels checked on
the rows they show."""

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from tests.dashboards.conftest import PanelQuery, ReadOnly, Seeded, panel_queries
from tests.hub.harvest import scenario

QUERIES = panel_queries()
FUNCTIONAL = scenario.target_name("functional-test")
WORKLOAD = scenario.WORKLOAD
PERFORMANCE = scenario.target_name("performance-test")


def by_key(queries: list[PanelQuery]) -> dict[str, PanelQuery]:
    return {query.key: query for query in queries}


PANELS = by_key(QUERIES)


async def show(
    readonly: ReadOnly, seeded: Seeded, key: str, timescaledb: bool = False, **chosen: list[str]
) -> list[dict[str, Any]]:
    """The rows panel `key` shows for the last day, the variables at "All" but `chosen`."""
    query = PANELS[key]
    variables = await readonly.variables(query.dashboard, chosen)
    return await readonly.panel(
        query,
        variables,
        seeded.now - timedelta(days=1),
        seeded.now + timedelta(hours=1),
        timescaledb=timescaledb,
    )


# Each dashboard's panel queries, by its uid: the fleet is seeded once per dashboard.
DASHBOARD_QUERIES: dict[str, list[PanelQuery]] = {}
for found in QUERIES:
    DASHBOARD_QUERIES.setdefault(str(found.dashboard.uid), []).append(found)


@pytest.mark.parametrize("uid", DASHBOARD_QUERIES)
async def test_every_panel_runs_as_the_read_only_role(
    uid: str, readonly: ReadOnly, seeded: Seeded
) -> None:
    now = seeded.now
    dashboard = DASHBOARD_QUERIES[uid][0].dashboard
    every = await readonly.variables(dashboard)
    some = await readonly.variables(
        dashboard, {"environment": ["dev"], "cluster": ["drone-02", "large-01"]}
    )
    for query in DASHBOARD_QUERIES[uid]:
        for variables in (every, some):
            for timescaledb in {False, readonly.timescaledb}:
                for span in (timedelta(days=1), timedelta(days=30)):
                    await readonly.panel(query, variables, now - span, now, timescaledb)


@pytest.mark.parametrize("uid", DASHBOARD_QUERIES)
async def test_all_is_every_value(uid: str, readonly: ReadOnly, seeded: Seeded) -> None:
    """Grafana's "All", as the dashboards' custom all value, shows what choosing every value
    shows and what Grafana's own "All" (every value listed) shows. Not for a workload or a
    workspace: choosing them all leaves out the clusters that carry none, "All" does not; nor
    for a variable without "All" (Cluster detail's cluster)."""
    now = seeded.now
    every = await readonly.variables(DASHBOARD_QUERIES[uid][0].dashboard)
    listed, chosen = dict(every), dict(every)
    for name in ("environment", "cluster_type", "cluster"):
        if not every[name].include_all:
            continue
        listed[name] = replace(every[name], all_value=None)
        chosen[name] = replace(every[name], values=every[name].options)
    for query in DASHBOARD_QUERIES[uid]:
        shown = [
            await readonly.panel(query, variables, now - timedelta(days=1), now)
            for variables in (every, listed, chosen)
        ]
        assert shown[0] == shown[1] == shown[2], query.key


def times(rows: list[dict[str, Any]]) -> list[tuple[float, str, float]]:
    """(bucket as epoch seconds, series, value): either form of $__timeGroup alike."""
    converted = []
    for row in rows:
        moment = row["time"]
        epoch = moment.timestamp() if isinstance(moment, datetime) else float(moment)
        converted.append((epoch, row["metric"], float(row["value"])))
    return converted


async def series(
    readonly: ReadOnly, seeded: Seeded, key: str, **chosen: list[str]
) -> list[tuple[float, str, float]]:
    """A time series panel's points, the same whether $__timeGroup is time_bucket or not."""
    shown = times(await show(readonly, seeded, key, **chosen))
    if readonly.timescaledb:
        assert times(await show(readonly, seeded, key, timescaledb=True, **chosen)) == shown
    return shown


def bucket(moment: datetime) -> float:
    return moment.replace(minute=0, second=0, microsecond=0).timestamp()


async def test_variables_offer_the_fleet_narrowed_by_those_before(
    readonly: ReadOnly, seeded: Seeded
) -> None:
    dashboard = PANELS["fleetmark-fleet: Clusters"].dashboard
    every = await readonly.variables(dashboard)
    stage = await readonly.variables(dashboard, {"environment": ["stage"]})
    large = await readonly.variables(dashboard, {"cluster_type": ["large"]})
    placed = await readonly.variables(
        dashboard, {"environment": ["dev"], "workload": ["hello-world-app"]}
    )

    assert every["environment"].options == ["dev", "stage"]
    assert every["workload"].options == ["hello-world-app"]
    assert every["cluster_type"].options == ["drone", "large", "small"]
    assert every["cluster"].options == [
        "drone-01", "drone-02", "large-01", "small-01", "stage-drone-01", "stage-large-01"
    ]  # fmt: skip
    assert stage["cluster_type"].options == ["drone", "large"]
    assert stage["cluster"].options == ["stage-drone-01", "stage-large-01"]
    assert large["cluster"].options == ["large-01", "stage-large-01"]
    # small carries no assignment on dev: none of hello-world-app's clusters.
    assert placed["cluster"].options == ["drone-01", "drone-02", "large-01"]


async def test_fleet_overview(readonly: ReadOnly, seeded: Seeded) -> None:
    [totals] = await show(readonly, seeded, "fleetmark-fleet: Clusters")
    [stage] = await show(readonly, seeded, "fleetmark-fleet: Clusters", environment=["stage"])
    [placed] = await show(
        readonly, seeded, "fleetmark-fleet: Clusters", workload=["hello-world-app"]
    )
    per_type = await show(
        readonly, seeded, "fleetmark-fleet: Clusters per environment and cluster type"
    )
    attention = await show(readonly, seeded, "fleetmark-fleet: Clusters that need attention")
    harvest = await show(readonly, seeded, "fleetmark-fleet: Harvest per repository")

    counts = ("Clusters", "Reporting", "Stale", "Never reported", "Drifted", "Failing")
    assert [totals[name] for name in counts] == [6, 4, 1, 1, 2, 1]
    assert totals["Reporting share"] == pytest.approx(4 / 6)
    assert [stage[name] for name in counts] == [2, 0, 1, 1, 0, 0]
    assert placed["Clusters"] == 5
    assert [
        (row["Environment"], row["Cluster type"], *(row[name] for name in counts))
        for row in per_type
    ] == [
        ("dev", "drone", 2, 2, 0, 0, 1, 0),
        ("dev", "large", 1, 1, 0, 0, 1, 1),
        ("dev", "small", 1, 1, 0, 0, 0, 0),
        ("stage", "drone", 1, 0, 1, 0, 0, 0),
        ("stage", "large", 1, 0, 0, 1, 0, 0),
    ]
    # Most severe first (a failure before silence before drift), whatever the environment.
    assert [(row["Cluster"], row["State"]) for row in attention] == [
        ("large-01", "failing"),
        ("stage-drone-01", "stale"),
        ("stage-large-01", "never reported"),
        ("drone-02", "drifted"),
    ]
    drifted = next(row for row in attention if row["Cluster"] == "drone-02")
    assert drifted["Drifted since"] == seeded.now - timedelta(hours=3)
    assert {(row["Repository"].rsplit("/", 1)[-1], row["Role"]) for row in harvest} == {
        ("platform-gitops", "platform"),
        ("app-gitops", "app"),
    }
    assert all(row["Errors recorded"] == 0 and row["Fetch error"] is None for row in harvest)
    assert all(row["Last harvest"] is not None for row in harvest)


async def test_drift(readonly: ReadOnly, seeded: Seeded) -> None:
    first, second, now = seeded.first, seeded.second, seeded.now
    [totals] = await show(readonly, seeded, "fleetmark-drift: Drift now")
    drifted = await show(readonly, seeded, "fleetmark-drift: Drifted")
    one = await show(readonly, seeded, "fleetmark-drift: Drifted", cluster=["drone-02"])
    minutes = await series(readonly, seeded, "fleetmark-drift: Drift minutes per environment")
    periods = await show(readonly, seeded, "fleetmark-drift: Drift periods")

    assert (totals["Drifted clusters"], totals["Drifted objects"], totals["Stale clusters"]) == (
        4,
        2,
        2,
    )
    assert {(row["Cluster"], row["Object"]): row["Reasons"] for row in drifted} == {
        ("drone-02", "Kustomization/flux-system"): "behind",
        ("large-01", f"Application/{PERFORMANCE}"): "failing",
        ("stage-drone-01", "Kustomization/flux-system"): "stale",
        ("stage-drone-01", "Kustomization/hello-world-app-uat-test"): "stale",
        ("stage-large-01", None): "stale",
    }
    [behind] = one
    assert behind["Object"] == "Kustomization/flux-system"
    assert (behind["Applied"], behind["Desired"]) == (first[:12], second[:12])
    assert behind["Commits behind"] == 1
    assert behind["Drifted since"] == now - timedelta(hours=3)
    assert behind["Time behind"] > 3 * 3600
    failing = next(row for row in drifted if row["Reasons"] == "failing")
    assert failing["Message"] == "Deployment/hello-world not ready"
    assert failing["Condition"] == "HealthCheckFailed"
    # Three dev clusters drifted for three hours (drone-01 until it caught up now); on stage
    # the cluster that never reported.
    per_environment: dict[str, float] = {}
    for _, environment, value in minutes:
        per_environment[environment] = per_environment.get(environment, 0) + value
    assert per_environment == pytest.approx({"dev": 540, "stage": 180})
    # One cluster chosen: its own periods, not the fleet's sums.
    one_minutes = await series(
        readonly, seeded, "fleetmark-drift: Drift minutes per environment", cluster=["drone-02"]
    )
    assert {environment for _, environment, _ in one_minutes} == {"dev"}
    assert sum(value for _, _, value in one_minutes) == pytest.approx(180)
    assert {moment for moment, _, _ in minutes} == {
        bucket(now - timedelta(hours=hours)) for hours in (3, 2, 1, 0)
    }
    caught_up = [row for row in periods if row["Cluster"] == "drone-01"]
    assert {(row["Object"], row["Ended"], row["Minutes"]) for row in caught_up} == {
        ("(cluster)", now, 180),
        ("Kustomization/flux-system", now, 180),
    }
    assert {row["Cluster"] for row in periods if row["Ended"] is None} == {
        "drone-02",
        "large-01",
        "stage-drone-01",
        "stage-large-01",
    }


async def test_drift_periods_are_the_newest_of_the_range_however_many(
    readonly: ReadOnly, seeded: Seeded, session: AsyncSession
) -> None:
    query, now = PANELS["fleetmark-drift: Drift periods"], seeded.now
    every = await readonly.variables(query.dashboard)

    # The last hour: the periods still open since three hours ago, and drone-01's, which
    # ended now; none started in it.
    hour = await readonly.panel(query, every, now - timedelta(hours=1), now)
    assert {row["Cluster"] for row in hour} == {
        "drone-01",
        "drone-02",
        "large-01",
        "stage-drone-01",
        "stage-large-01",
    }

    # 1,000 periods of drone-02 in the last hour, a second apart: the newest 1,000 are
    # shown, newest first, those older than the hour no longer among them.
    await session.execute(
        text(
            "INSERT INTO drift_period (cluster_id, started_at, ended_at) "
            "SELECT c.id, CAST(:now AS timestamptz) - make_interval(secs => 3000 - n), "
            "       CAST(:now AS timestamptz) - make_interval(secs => 1000 - n) "
            "FROM cluster c, generate_series(1, 1000) AS n WHERE c.name = 'drone-02'"
        ),
        {"now": now},
    )
    hour = await readonly.panel(query, every, now - timedelta(hours=1), now)
    assert len(hour) == 1000
    started = [row["Started"] for row in hour]
    assert started == sorted(started, reverse=True)
    assert min(started) >= now - timedelta(hours=1)
    ours = [
        moment for moment, row in zip(started, hour, strict=True) if row["Cluster"] == "drone-02"
    ]
    assert ours == [now - timedelta(seconds=3000 - n) for n in range(1000, 1000 - len(ours), -1)]
    assert len(ours) >= 990


async def test_the_periods_count_is_the_rows_the_periods_table_has(
    readonly: ReadOnly, seeded: Seeded, session: AsyncSession
) -> None:
    """Counted from the hourly counts with every cluster chosen, from the periods themselves
    with clusters chosen: either way the periods the table lists from, whatever hours the
    range's ends cut."""
    table, stat, now = (
        PANELS["fleetmark-drift: Drift periods"],
        PANELS["fleetmark-drift: Periods"],
        seeded.now,
    )
    hours = [timedelta(hours=hours) for hours in (30 * 24, 24, 5, 3.5, 3, 2.5, 1, 0.5, 0)]
    ranges = [(now - hours[1], now + hours[6])] + [
        (now - start, now - end) for start in hours for end in hours if end < start
    ]
    choices: list[dict[str, list[str]]] = [
        {},
        {"environment": ["stage"]},
        {"cluster": ["drone-02"]},
    ]

    # Periods ended and started at odd minutes, on dev and on stage.
    for started, ended in ((250, 40), (170, 140), (20, 5), (26 * 60, 195)):
        await session.execute(
            text(
                "INSERT INTO drift_period (cluster_id, started_at, ended_at) "
                "SELECT c.id, CAST(:now AS timestamptz) - make_interval(mins => :started), "
                "       CAST(:now AS timestamptz) - make_interval(mins => :ended) "
                "FROM cluster c WHERE c.name IN ('drone-02', 'stage-drone-01')"
            ),
            {"now": now, "started": started, "ended": ended},
        )

    async def counts(start: datetime, end: datetime) -> list[tuple[int, int]]:
        found = []
        for chosen in choices:
            variables = await readonly.variables(table.dashboard, chosen)
            rows = await readonly.panel(table, variables, start, end)
            [counted] = await readonly.panel(stat, variables, start, end)
            found.append((counted["Periods"], len(rows)))
        return found

    for start, end in ranges:
        for counted, listed in await counts(start, end):
            assert counted == listed, (start, end)
    assert (await counts(now - hours[1], now))[0][0] > 0

    # More periods than the table lists: it shows 1,000, the count says them all.
    before = await counts(now - hours[6], now)
    await session.execute(
        text(
            "INSERT INTO drift_period (cluster_id, started_at, ended_at) "
            "SELECT c.id, CAST(:now AS timestamptz) - make_interval(secs => 3000 - n), "
            "       CAST(:now AS timestamptz) - make_interval(secs => 1000 - n) "
            "FROM cluster c, generate_series(1, 1500) AS n WHERE c.name = 'drone-02'"
        ),
        {"now": now},
    )
    after = await counts(now - hours[6], now)
    assert [counted for counted, _ in after] == [
        before[0][0] + 1500,
        before[1][0],
        before[2][0] + 1500,
    ]
    assert after[0][1] == 1000


async def test_deployment_history(readonly: ReadOnly, seeded: Seeded) -> None:
    first, second, now = seeded.first, seeded.second, seeded.now
    changed = await show(readonly, seeded, "fleetmark-history: What changed when")
    [counted] = await show(readonly, seeded, "fleetmark-history: Changed")
    states = await series(readonly, seeded, "fleetmark-history: State per cluster")
    rollouts = await show(readonly, seeded, "fleetmark-history: Rollouts per workload")
    stage = await show(
        readonly, seeded, "fleetmark-history: What changed when", environment=["stage"]
    )
    one = await show(readonly, seeded, "fleetmark-history: What changed when", cluster=["drone-01"])

    def moves(rows: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
        return {
            (row["Environment"], row["Workload"], row["From"], row["To"], row["Clusters"])
            for row in rows
        }

    # Per workload, environment and move: drone-01 and drone-02 took the first commit, small-01
    # the second, and three clusters (two Flux, one Argo CD) the workload's version; now
    # drone-01 moved on to the second commit, the newest row.
    newest = changed[0]
    assert (newest["Last change"], newest["Environment"], newest["Workload"]) == (
        now,
        "dev",
        "flux-system",
    )
    assert (newest["From"], newest["To"], newest["Clusters"]) == (first[:12], second[:12], 1)
    app = seeded.fleet.app_heads
    assert moves(changed[1:]) == {
        ("stage", "flux-system", None, seeded.fleet.platform_heads["stage"][:12], 1),
        ("stage", WORKLOAD, None, app["stage"][:12], 1),
        ("dev", "flux-system", None, first[:12], 2),
        ("dev", "flux-system", None, second[:12], 1),
        ("dev", "platform", None, second[:12], 1),
        ("dev", WORKLOAD, None, app["dev"][:12], 3),
    }
    assert {row["Last change"] for row in changed[1:]} == {now - timedelta(hours=3)}
    failed = next(
        row for row in changed if row["Workload"] == WORKLOAD and row["Environment"] == "dev"
    )
    assert (failed["Changes"], failed["Not ready"]) == (3, 1)
    assert (counted["Rows"], counted["Changes"]) == (7, 10)
    assert moves(stage) == {move for move in moves(changed) if move[0] == "stage"}
    # One cluster chosen: its own history.
    assert moves(one) == {
        ("dev", "flux-system", first[:12], second[:12], 1),
        ("dev", "flux-system", None, first[:12], 1),
        ("dev", WORKLOAD, None, app["dev"][:12], 1),
    }
    earlier = bucket(now - timedelta(hours=3))
    assert {(cluster, value) for moment, cluster, value in states if moment == earlier} == {
        ("drone-01", 1),
        ("drone-02", 1),
        ("large-01", 3),
        ("small-01", 1),
        ("stage-drone-01", 1),
    }
    assert [(cluster, value) for moment, cluster, value in states if moment == bucket(now)] == [
        ("drone-01", 1)
    ]
    # The newest state of each workload in each environment: dev's second platform commit
    # stalled (drone-02 behind; tests/dashboards/test_rollouts.py), its version failed on
    # large-01; stage converged.
    assert {row["metric"]: row["value"] for row in rollouts} == {
        "platform on dev": 2,
        "platform on stage": 0,
        "hello-world-app on dev": 3,
        "hello-world-app on stage": 0,
    }


async def test_cluster_detail(readonly: ReadOnly, seeded: Seeded) -> None:
    first, second, now = seeded.first, seeded.second, seeded.now
    dashboard = PANELS["fleetmark-cluster: Cluster"].dashboard
    opened = await readonly.variables(dashboard)
    [most_severe] = await show(readonly, seeded, "fleetmark-cluster: Cluster")
    failing = await show(readonly, seeded, "fleetmark-cluster: Objects")
    [cluster] = await show(readonly, seeded, "fleetmark-cluster: Cluster", cluster=["drone-02"])
    objects = await show(readonly, seeded, "fleetmark-cluster: Objects", cluster=["drone-02"])
    [counted] = await show(readonly, seeded, "fleetmark-cluster: All objects", cluster=["drone-02"])
    reports = await series(
        readonly, seeded, "fleetmark-cluster: Reports per hour", cluster=["drone-02"]
    )
    history = await show(readonly, seeded, "fleetmark-cluster: History", cluster=["drone-01"])
    [changes] = await show(readonly, seeded, "fleetmark-cluster: Changes", cluster=["drone-01"])

    # One cluster at a time, the most severe first: failing, stale, never reported, drifted,
    # then the others; the dashboard opens on the first.
    assert opened["cluster"].options == [
        "large-01", "stage-drone-01", "stage-large-01", "drone-02", "drone-01", "small-01"
    ]  # fmt: skip
    assert most_severe["Cluster"] == "large-01"
    assert failing[0]["State"] == "failing"
    assert {row["State"] for row in failing[1:]} == {"ready"}
    assert (cluster["Agent"], cluster["Objects"], cluster["Drifted objects"]) == (
        "reporting",
        4,
        1,
    )
    assert cluster["Last report"] == now
    assert counted["Objects"] == len(objects) == 4
    root = next(row for row in objects if row["Object"] == "Kustomization/flux-system/flux-system")
    assert root["Applied revision"] == f"dev@sha1:{first}"
    assert (root["Desired"], root["Commits behind"], root["Drift"]) == (second[:12], 1, "behind")
    # The drifted object first.
    assert objects[0] == root
    assert reports == [
        (bucket(now - timedelta(hours=3)), "drone-02", 1),
        (bucket(now), "drone-02", 1),
    ]
    assert [(row["From"], row["To"]) for row in history if "flux-system" in row["Object"]] == [
        (first[:12], second[:12]),
        (None, first[:12]),
    ]
    assert changes["Changes"] == len(history)
