"""Dashboard benchmark: every panel query of every dashboard, as Grafana runs it, on the query
benchmark's store (10,000 clusters, 90 days).

The store is benchmarks/query.py's, generated (or a kept one reused) by its own code, with the
hub's jobs run once as there. A role for Grafana is made on the server and granted as
`fleetmark db grant-readonly` grants; then each panel's SQL, its macros and variables expanded
as Grafana's PostgreSQL datasource expands them (tests/dashboards/grafana_sql.py) with every
variable at "All" as the dashboards open, runs as that role, one statement at a time, over the
last 24 hours and the last 30 days, and the p50/p99 of each are printed against the targets
(p99 < 100 ms for 24 hours, < 500 ms for 30 days). On TimescaleDB the datasource's TimescaleDB
option is taken to be on, so `$__timeGroup` is `time_bucket`.

    .venv/bin/python benchmarks/dashboards.py                    # generate, measure, drop
    .venv/bin/python benchmarks/dashboards.py --clusters 200 --days 7
    .venv/bin/python benchmarks/dashboards.py --keep \\
        --database-url postgresql://postgres@127.0.0.1:5432/fleetmark_bench_query
        # the query benchmark's kept store, reused (same --clusters/--days/... as it was made)
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the macro expander of the tests

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

from hub import store  # noqa: E402
from hub.database import create_sessionmaker, normalise_database_url, write_session  # noqa: E402
from hub.envdiff.service import keep_diff  # noqa: E402
from hub.promotion.service import AnswerOptions, keep_answers  # noqa: E402
from hub.settings import HubSettings  # noqa: E402
from tests.dashboards.grafana_sql import expand  # noqa: E402
from tests.dashboards.panels import PanelQuery, opened, panel_queries  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/fleetmark_bench_dashboards"
ROLE = "fleetmark_bench_grafana"
RANGES = {"24 h": (timedelta(days=1), 100.0), "30 d": (timedelta(days=30), 500.0)}


@dataclass
class Timing:
    key: str
    span: str
    target_ms: float
    seconds: list[float]
    rows: int

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
    run.add_argument("--runs", type=int, default=20, help="Measured runs per panel and range.")
    run.add_argument("--warmup", type=int, default=2, help="Unmeasured runs per panel and range.")
    run.add_argument(
        "--only", action="append", default=[], help="Only panels whose name has this text."
    )
    return parser.parse_args()


def make_role(url: str) -> None:
    """The role Grafana would use, made if missing: able to log in, on servers that trust local
    connections."""
    with psycopg.connect(url, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,))
        if exists.fetchone() is None:
            connection.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(ROLE)))


def ready(url: str) -> None:
    """The hourly rollups refreshed, as the hub's rollup job keeps them where they are tables
    (the query benchmark's jobs leave them be), and the environment diff and the gate answers
    kept, as the hub's jobs keep them for the dashboards; the role Grafana would use made if
    missing and granted as the command grants."""
    make_role(url)

    async def run() -> None:
        engine = create_async_engine(normalise_database_url(url))
        sessions = create_sessionmaker(engine)
        try:
            with phase("rolling up the history hourly, as the hub's rollup job does"):
                stale_after = timedelta(seconds=HubSettings().stale_after_seconds)
                await store.refresh_rollups(sessions, datetime.now(UTC), stale_after)
            with phase("keeping the environment diff, as the hub's environment diff job does"):
                async with write_session(sessions) as session:
                    await keep_diff(session, now=datetime.now(UTC))
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


def measure(url: str, args: argparse.Namespace, timescaledb: bool) -> list[Timing]:
    queries = [
        query
        for query in panel_queries()
        if not args.only or any(text in query.key for text in args.only)
    ]
    timings = []
    # Logged in as the role, as Grafana is: its settings in the database apply (JIT off).
    with (
        psycopg.connect(url, user=ROLE, autocommit=True) as connection,
        psycopg.connect(url, autocommit=True) as owner,
    ):
        for query in queries:
            # Panels that tell stale clusters apart meet the same fleet, however long it took.
            catch_up(owner)
            for span, (length, target) in RANGES.items():
                timings.append(run(connection, query, span, length, target, args, timescaledb))
                print(
                    f"  {timings[-1].key} ({span}): p99 {timings[-1].p99:,.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
    return timings


def first_option(connection: psycopg.Connection[Any], options: str) -> str:
    """The first value a variable's query gives: what a dashboard without "All" opens on."""
    found = connection.execute(options.encode()).fetchone()
    assert found is not None, f"no option for {options}"
    return str(found[0])


def run(
    connection: psycopg.Connection[Any],
    query: PanelQuery,
    span: str,
    length: timedelta,
    target: float,
    args: argparse.Namespace,
    timescaledb: bool,
) -> Timing:
    variables = opened(query.dashboard, first=lambda options: first_option(connection, options))
    seconds, rows = [], 0
    for attempt in range(args.warmup + args.runs):
        now = datetime.now(UTC)
        statement = expand(
            query.query.raw_sql,
            variables=variables,
            time_from=now - length,
            time_to=now,
            min_interval=query.panel.interval,
            timescaledb=timescaledb,
        )
        started = time.perf_counter()
        rows = len(connection.execute(statement.encode()).fetchall())
        if attempt >= args.warmup:
            seconds.append(time.perf_counter() - started)
    return Timing(query.key, span, target, seconds, rows)


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_at_start = load()
    workdir = Path(tempfile.mkdtemp(prefix="fleetmark-dashboards-bench-"))
    results: list[tuple[str, list[Timing]]] = []
    try:
        for label, url, timescaledb in stores(args, workdir):
            prepare_store(args, label, url, timescaledb)
            ready(url)
            try:
                with phase(f"{label}: every panel as {ROLE}"):
                    results.append((label, measure(url, args, timescaledb)))
            finally:
                revoke(url)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    header("fleetmark dashboard benchmark", load_at_start)
    row("store", f"{args.clusters:,} clusters, {args.days} days; variables at All")
    for label, timings in results:
        print()
        print(f"{label}: panel, range, p50 / p99 (target), rows")
        for timing in timings:
            verdict = "ok" if timing.p99 < timing.target_ms else "SLOW"
            print(
                f"  {timing.key:<64} {timing.span:>5} {timing.p50:>9,.1f} / {timing.p99:>9,.1f} ms"
                f" (< {timing.target_ms:,.0f}) {verdict:<4} {timing.rows:>6,}"
            )


if __name__ == "__main__":
    main()
