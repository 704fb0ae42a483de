"""Dashboard benchmark: every panel query and every variable query of every dashboard, as
Grafana runs them, on the query benchmark's store (10,000 clusters, 90 days).

docs/benchmarks.md ("Dashboards") gives the choices, ranges and targets. Each p50/p99 is printed
beside a statement that reads nothing. A manual run: the matrix takes long.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the macro expander of the tests

from grafana_foundation_sdk.models.dashboard import Dashboard  # noqa: E402
from ingest import percentile, phase  # noqa: E402
from query import (  # noqa: E402
    add_store_options,
    catch_up,
    header,
    load,
    prepare_store,
    row,
    stores,
)
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402

from dashboards.common import DATASOURCE  # noqa: E402
from hub import store  # noqa: E402
from hub.database import create_sessionmaker, normalise_database_url, write_session  # noqa: E402
from hub.envdiff.service import keep_diff  # noqa: E402
from hub.events.service import event_source  # noqa: E402
from hub.gate.service import AnswerOptions, keep_answers  # noqa: E402
from hub.rollouts.service import keep_rollouts  # noqa: E402
from hub.settings import HubSettings  # noqa: E402
from hub.tasks import ROLLUP_INTERVAL  # noqa: E402
from tests.dashboards.grafana_sql import Variable, expand  # noqa: E402
from tests.dashboards.panels import (  # noqa: E402
    PanelQuery,
    built_dashboards,
    opened,
    panel_queries,
)

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/fleetmark_bench_dashboards"
ROLE = "fleetmark_bench_grafana"
# Each range: its length, the p99 target in ms (None: measured, no target), and whether it
# is a long range, measured --long-runs times instead of --runs.
RANGES = {
    "24 h": (timedelta(days=1), 100.0, False),
    "30 d": (timedelta(days=30), 500.0, False),
    "90 d": (timedelta(days=90), None, True),
}
# A variable's query has no range: it runs as a dashboard opens, held to the 24 hours' target.
VARIABLE = (timedelta(0), 100.0, False)


@dataclass
class Timing:
    key: str
    choice: str
    span: str
    target_ms: float | None
    seconds: list[float]
    rows: int
    scans: list[str] = field(default_factory=list)

    @property
    def p50(self) -> float:
        return percentile(sorted(self.seconds), 0.5) * 1000

    @property
    def p99(self) -> float:
        return percentile(sorted(self.seconds), 0.99) * 1000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/dashboards.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_store_options(parser, DEFAULT_DATABASE_URL)
    run = parser.add_argument_group("measurement")
    run.add_argument(
        "--runs", type=int, default=20, help="Measured runs per statement, choice and range."
    )
    run.add_argument(
        "--long-runs", type=int, default=5, help="Measured runs over the 90-day range."
    )
    run.add_argument(
        "--warmup", type=int, default=2, help="Unmeasured runs per statement, choice and range."
    )
    run.add_argument(
        "--only",
        action="append",
        default=[],
        help="Only statements whose name (dashboard uid: panel title or $variable) has this text.",
    )
    return parser.parse_args()


def make_role(url: str) -> None:
    """The role Grafana would use, made if missing: able to log in, on servers that trust local
    connections."""
    with psycopg.connect(url, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,))
        if exists.fetchone() is None:
            connection.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(ROLE)))


def roll_up(url: str, at_least_into_the_hour: timedelta = timedelta(0)) -> None:
    """The hourly rollups refreshed, as the hub's rollup job keeps them where they are tables
    (the query benchmark's jobs leave them be), once the hour under way is
    `at_least_into_the_hour` old. Run before TimescaleDB compresses the history,
    as in a hub's life: the job rolls each hour up within the hour, long before its chunk is
    compressed; run after, a first rollup of the whole history decompresses it row by row."""
    into = datetime.now(UTC) - datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    if into < at_least_into_the_hour:
        with phase(f"waiting until the hour under way is {at_least_into_the_hour} old"):
            time.sleep((at_least_into_the_hour - into).total_seconds())

    async def run() -> None:
        engine = create_async_engine(normalise_database_url(url))
        sessions = create_sessionmaker(engine)
        try:
            with phase("rolling up the history hourly, as the hub's rollup job does"):
                stale_after = timedelta(seconds=HubSettings().stale_after_seconds)
                await store.refresh_rollups(sessions, datetime.now(UTC), stale_after)
        finally:
            await engine.dispose()

    asyncio.run(run())


# How much of the store's history is moved into the hour under way: an hour's, the most a live
# hub's hourly rollups leave raw; of it, the deployment rollup leaves raw only what came after
# its cut, a rollup interval's at most (the last PAST_THE_CUT of it).
UNDER_WAY = timedelta(hours=1)
PAST_THE_CUT = ROLLUP_INTERVAL + store.ROLLUP_CUT_BEFORE


def under_way(url: str) -> int:
    """The store's last UNDER_WAY of transitions moved into the hour under way, as if the
    fleet had gone on changing since the store was made and the rollup job, which ran at the
    start of the benchmark, were about to run again: the last PAST_THE_CUT of them squeezed
    into the time since the deployment rollup's cut, the rest into the hour before it. Panels
    read them from the raw transitions, the same number of them whatever the minute of the
    hour. They carry the revision each changed from, as ingest records it. The transitions
    moved (a kept store's again, each run)."""
    now = datetime.now(UTC)
    with psycopg.connect(url) as connection:
        columns = [
            name
            for (name,) in connection.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = 'status_transition' "
                "ORDER BY ordinal_position"
            )
        ]
        (end,) = connection.execute(
            "SELECT max(observed_at) FROM status_transition"
        ).fetchone() or (None,)
        assert end is not None, "the store has no transitions"
        watermarks = dict(
            connection.execute(
                "SELECT name, materialized_until FROM rollup_watermark "
                "WHERE name IN ('placement_hourly', 'deployment_hourly')"
            ).fetchall()
        )
        hour, cut = watermarks["placement_hourly"], watermarks["deployment_hourly"]
        assert hour < cut, "the rollups ran in the first minutes of an hour"
        since, split = end - UNDER_WAY, end - PAST_THE_CUT
        # Each time scaled from (since, split] into (hour, cut] and from (split, end] into
        # (cut, now], the order of the changes kept.
        to = sql.SQL(
            "CASE WHEN observed_at <= {split} THEN {hour} + (observed_at - {since}) * {before} "
            "ELSE {cut} + (observed_at - {split}) * {after} END"
        ).format(
            split=sql.Literal(split),
            hour=sql.Literal(hour),
            since=sql.Literal(since),
            before=sql.Literal((cut - hour) / (UNDER_WAY - PAST_THE_CUT)),
            cut=sql.Literal(cut),
            after=sql.Literal((now - cut) / PAST_THE_CUT),
        )
        connection.execute(
            sql.SQL(
                "CREATE TEMPORARY TABLE moved ON COMMIT DROP AS "
                "SELECT * FROM status_transition WHERE observed_at > {}"
            ).format(sql.Literal(since))
        )
        connection.execute(
            sql.SQL("DELETE FROM status_transition WHERE observed_at > {}").format(
                sql.Literal(since)
            )
        )
        moved_to = {
            "observed_at": to,
            "received_at": sql.SQL("received_at + ({} - observed_at)").format(to),
        }
        values = sql.SQL(", ").join(moved_to.get(name, sql.Identifier(name)) for name in columns)
        moved = connection.execute(
            sql.SQL("INSERT INTO status_transition ({}) SELECT {} FROM moved").format(
                sql.SQL(", ").join(map(sql.Identifier, columns)), values
            )
        ).rowcount
        # What ingest records of a new transition (migration 0043): the applied revision it
        # changed from, where the object had one.
        connection.execute(
            sql.SQL(
                "UPDATE status_transition t SET (previous_recorded, previous_revision, "
                "previous_sha, previous_version) = ("
                "SELECT true, s.applied_revision, s.applied_sha, s.applied_version "
                "FROM status_transition s WHERE s.object_id = t.object_id "
                "AND (s.applied_sha IS NOT NULL OR s.applied_version IS NOT NULL) "
                "AND s.observed_at <= t.observed_at "
                "AND (s.observed_at, s.received_at) < (t.observed_at, t.received_at) "
                "ORDER BY s.observed_at DESC, s.received_at DESC LIMIT 1) "
                "WHERE t.observed_at > {} "
                "AND (t.applied_sha IS NOT NULL OR t.applied_version IS NOT NULL)"
            ).format(sql.Literal(hour))
        )
    return moved


def ready(url: str) -> None:
    """The environment diff, the rollouts' states and the gate answers kept, as the hub's jobs
    keep them for the dashboards; the role Grafana would use made if missing and granted as the
    command grants."""
    make_role(url)

    async def run() -> None:
        engine = create_async_engine(normalise_database_url(url))
        sessions = create_sessionmaker(engine)
        try:
            with phase("keeping the environment diff, as the hub's environment diff job does"):
                async with write_session(sessions) as session:
                    await keep_diff(session, now=datetime.now(UTC))
            with phase("keeping the rollouts' states, as the hub's rollouts job does"):
                async with write_session(sessions) as session:
                    settings = HubSettings()
                    await keep_rollouts(
                        session,
                        stall_after=settings.rollout_stall_after,
                        source=event_source(settings),
                    )
            with phase("keeping the gate answers, as the hub's gate answers job does"):
                async with write_session(sessions) as session:
                    await keep_answers(
                        session, AnswerOptions.of(HubSettings()), now=datetime.now(UTC)
                    )
            async with write_session(sessions) as session:
                await store.grant_readonly(session, ROLE)
        finally:
            await engine.dispose()

    asyncio.run(run())


def revoke(url: str) -> None:
    """The role's grants in this database gone, and the role with them if it has no others."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(ROLE)))
        try:
            connection.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(ROLE)))
        except psycopg.errors.DependentObjectsStillReferenced:
            print(f"  role {ROLE} kept: it has grants in another database", file=sys.stderr)


# The screen width, in pixels, Grafana lays the panels out on: a panel's query asks for as
# many points as the panel is wide (its maxDataPoints), so the interval `$__interval` is.
SCREEN = 1_800
# Tables above this many rows (estimated) that a one-cluster or one-workload plan should not
# read from end to end.
LARGE = 100_000


@dataclass(frozen=True)
class Choice:
    """The variables' values a measurement opens its dashboards with: "All" but `fixed`."""

    name: str
    fixed: dict[str, str]

    def variables(self, dashboard: Dashboard, first: Callable[[str], str]) -> dict[str, Variable]:
        """`first` answers a variable's query: what a variable without "All" opens on."""
        variables = opened(dashboard, first)
        for name, value in self.fixed.items():
            if name in variables:
                was = variables[name]
                variables[name] = Variable([value], multi=was.multi, include_all=was.include_all)
        return variables


def choices(url: str) -> list[Choice]:
    """Every variable at All; the latest environment; one workload of it; one cluster of it
    (a failing one if any: the one Cluster detail opens on)."""
    with psycopg.connect(url, autocommit=True) as connection:
        latest = connection.execute(
            "SELECT name FROM grafana.environment ORDER BY position DESC NULLS LAST, name LIMIT 1"
        ).fetchone()
        assert latest is not None, "the store has no environment"
        workload = connection.execute(
            "SELECT workload FROM grafana.placement WHERE environment = %s "
            "ORDER BY workload LIMIT 1",
            latest,
        ).fetchone()
        cluster = connection.execute(
            "SELECT cluster FROM grafana.cluster WHERE environment = %s "
            "ORDER BY failing > 0 DESC, cluster LIMIT 1",
            latest,
        ).fetchone()
    assert workload is not None, "the latest environment carries no workload"
    assert cluster is not None, "the latest environment has no cluster"
    return [
        Choice("All", {}),
        Choice(f"env {latest[0]}", {"environment": latest[0]}),
        Choice(f"workload {workload[0]}", {"workload": workload[0]}),
        Choice(f"cluster {cluster[0]}", {"cluster": cluster[0]}),
    ]


@dataclass(frozen=True)
class Statement:
    """One statement a dashboard sends: a panel's query, or a variable's."""

    key: str
    dashboard: Dashboard
    sql: str
    panel: PanelQuery | None  # None: a variable's query, which has no time range or interval

    def expanded(
        self,
        connection: psycopg.Connection[Any],
        choice: Choice,
        length: timedelta,
        timescaledb: bool,
    ) -> str:
        now = datetime.now(UTC)
        return expand(
            self.sql,
            variables=choice.variables(
                self.dashboard, lambda options: first_option(connection, options)
            ),
            time_from=now - length,
            time_to=now,
            max_data_points=self.panel.max_data_points(SCREEN) if self.panel else 1_000,
            min_interval=self.panel.panel.interval if self.panel else None,
            timescaledb=timescaledb,
        )


def statements(only: list[str]) -> list[Statement]:
    """Every panel's query, then every query variable's, of the built dashboards."""
    found = [
        Statement(query.key, query.dashboard, query.query.raw_sql, query)
        for query in panel_queries()
    ]
    for dashboard in built_dashboards():
        assert dashboard.templating is not None
        assert dashboard.templating.list_val is not None
        for variable in dashboard.templating.list_val:
            source = variable.datasource
            if variable.type_val == "query" and source is not None and source.uid == DATASOURCE.uid:
                assert isinstance(variable.query, str), variable.name
                found.append(
                    Statement(f"{dashboard.uid}: ${variable.name}", dashboard, variable.query, None)
                )
    return [s for s in found if not only or any(text in s.key for text in only)]


def large_scans(connection: psycopg.Connection[Any], statement: str) -> list[str]:
    """The tables of more than LARGE rows (estimated) that the plan reads with a Seq Scan."""
    (plan,) = connection.execute(b"EXPLAIN (FORMAT JSON) " + statement.encode()).fetchone()
    scanned: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        if node["Node Type"] == "Seq Scan":
            scanned.add(node["Relation Name"])
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    if not scanned:
        return []
    large = connection.execute(
        "SELECT relname FROM pg_class WHERE relname = ANY(%s) AND reltuples > %s ORDER BY 1",
        (sorted(scanned), LARGE),
    ).fetchall()
    return [name for (name,) in large]


def measure(url: str, args: argparse.Namespace, timescaledb: bool) -> list[Timing]:
    found = statements(args.only)
    timings = []
    # Logged in as the role, as Grafana is: its settings in the database apply (JIT off).
    with (
        psycopg.connect(url, user=ROLE, autocommit=True) as connection,
        psycopg.connect(url, autocommit=True) as owner,
    ):
        timings.append(baseline(connection, args))
        for choice in choices(url):
            for statement in found:
                # Panels that tell stale clusters apart meet the same fleet, however long it took.
                catch_up(owner)
                spans = RANGES.items() if statement.panel else [("-", VARIABLE)]
                for span, (length, target, long) in spans:
                    runs = args.long_runs if long else args.runs
                    timing = run(
                        connection,
                        statement,
                        choice,
                        (span, length, target),
                        runs,
                        args,
                        timescaledb,
                    )
                    if choice.fixed.keys() & {"cluster", "workload"}:
                        timing.scans = large_scans(
                            connection, statement.expanded(connection, choice, length, timescaledb)
                        )
                    timings.append(timing)
                    print(
                        f"  {timing.key} [{choice.name}] ({span}): p99 {timing.p99:,.1f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
    return timings


def baseline(connection: psycopg.Connection[Any], args: argparse.Namespace) -> Timing:
    """The floor under every figure: a statement that reads nothing, sent as the panels are."""
    seconds = []
    for attempt in range(args.warmup + args.runs):
        started = time.perf_counter()
        connection.execute(b"SELECT 1").fetchall()
        if attempt >= args.warmup:
            seconds.append(time.perf_counter() - started)
    return Timing("baseline: SELECT 1", "-", "-", None, seconds, 1)


def first_option(connection: psycopg.Connection[Any], options: str) -> str:
    """The first value a variable's query gives: what a dashboard without "All" opens on."""
    found = connection.execute(options.encode()).fetchone()
    assert found is not None, f"no option for {options}"
    return str(found[0])


def run(
    connection: psycopg.Connection[Any],
    statement: Statement,
    choice: Choice,
    measured: tuple[str, timedelta, float | None],
    runs: int,
    args: argparse.Namespace,
    timescaledb: bool,
) -> Timing:
    span, length, target = measured
    seconds, rows = [], 0
    for attempt in range(args.warmup + runs):
        sent = statement.expanded(connection, choice, length, timescaledb)
        started = time.perf_counter()
        rows = len(connection.execute(sent.encode()).fetchall())
        if attempt >= args.warmup:
            seconds.append(time.perf_counter() - started)
    return Timing(statement.key, choice.name, span, target, seconds, rows)


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_at_start = load()
    workdir = Path(tempfile.mkdtemp(prefix="fleetmark-dashboards-bench-"))
    results: list[tuple[str, list[Timing]]] = []
    try:
        for label, url, timescaledb in stores(args, workdir):
            prepare_store(args, label, url, timescaledb, before_compression=roll_up)
            roll_up(url, at_least_into_the_hour=timedelta(minutes=3))
            with phase(f"moving the store's last {UNDER_WAY} of transitions into this hour"):
                row("transitions moved", f"{under_way(url):,}")
            ready(url)
            try:
                with phase(f"{label}: every panel as {ROLE}"):
                    results.append((label, measure(url, args, timescaledb)))
            finally:
                revoke(url)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    header("fleetmark dashboard benchmark", load_at_start)
    row("store", f"{args.clusters:,} clusters, {args.days} days")
    row("screen", f"{SCREEN:,} px wide (each panel asks for its width in points)")
    slow = 0
    for label, timings in results:
        print()
        print(f"{label}: statement, variables, range, p50 / p99 ms (target), rows, plan")
        for timing in timings:
            verdict = "-" if timing.target_ms is None else "ok"
            if timing.target_ms is not None and timing.p99 >= timing.target_ms:
                verdict, slow = "SLOW", slow + 1
            target = "" if timing.target_ms is None else f"< {timing.target_ms:,.0f}"
            plan = ("seq scan: " + ", ".join(timing.scans)) if timing.scans else ""
            print(
                f"  {timing.key:<58} {timing.choice:<22} {timing.span:>4}"
                f" {timing.p50:>8,.1f} / {timing.p99:>8,.1f} ({target:>7}) {verdict:<4}"
                f" {timing.rows:>6,} {plan}"
            )
    print()
    row("over target", f"{slow:,}")


if __name__ == "__main__":
    main()
