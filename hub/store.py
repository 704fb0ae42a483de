"""The store's backend, and how long it keeps the history and when it compresses it.

Plain PostgreSQL, TimescaleDB, or TimescaleDB's Apache-licensed build (no compression,
continuous aggregates or policies), told apart at run time. The `rollup` and `retention` jobs
run here; what each backend keeps is in docs/operating.md, "Store".
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import structlog
from psycopg.errors import InsufficientPrivilege
from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Delete,
    any_,
    delete,
    func,
    literal_column,
    select,
    sql,
    text,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from hub.database import write_session
from hub.errors import UnknownRole
from hub.migrate import HYPERTABLES
from hub.models.observed import SNAPSHOT_PARTS_KEPT
from hub.settings import HubSettings
from hub.types import Sessions

log = structlog.get_logger("fleetmark.store")

RETENTION_LOCK = 0x726574656E74
ROLLUP_LOCK = 0x726F6C6C7570
# Hours are rolled up once complete, and the last ROLLUP_REFRESHED of them again at each run,
# for rows that came in late: the raw rows a dashboard reads are those of the hour under way.
ROLLUP_REFRESHED = timedelta(days=3)
# Rolled up within the hour under way too (migration 0045), to a cut ROLLUP_CUT_BEFORE the run,
# so that changes reported late by as much are still read: dashboards read their raw rows of a
# rollup interval and this much at most, instead of an hour's.
CUT_ROLLUPS = ("deployment_hourly",)
ROLLUP_CUT_BEFORE = timedelta(minutes=2)
# Continuous aggregates on TimescaleDB, tables the rollup job keeps elsewhere.
ROLLUP_VIEWS = ("heartbeat_hourly", "transition_hourly")
# Summed per environment and cluster type (from transition_hourly, the drift periods and the
# deployment history): tables the rollup job keeps on every backend, after those.
PLACEMENT_ROLLUPS = (
    "placement_hourly",
    "placement_drift_hourly",
    "deployment_hourly",
    "drift_period_hourly",
)
# Sampled by the rollup job at each run, on every backend.
HEALTH_ROLLUP = "fleet_health_hourly"
# Rows deleted per transaction on plain PostgreSQL: short transactions, no long lock on ingest.
DELETE_BATCH = 50_000


@dataclass(frozen=True, slots=True)
class Backend:
    """What the store can do: TimescaleDB's version (None on plain PostgreSQL) and whether
    its build compresses and keeps continuous aggregates (the Timescale-licensed one)."""

    timescaledb: str | None
    licensed: bool

    @property
    def name(self) -> str:
        if self.timescaledb is None:
            return "postgresql"
        return "timescaledb" if self.licensed else "timescaledb-apache"

    @property
    def compression(self) -> bool:
        return self.licensed

    @property
    def continuous_aggregates(self) -> bool:
        return self.licensed


async def backend(connection: AsyncConnection | AsyncSession) -> Backend:
    version, licensed = (
        await connection.execute(
            text(
                "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'), "
                "current_setting('timescaledb.license', true) = 'timescale'"
            )
        )
    ).one()
    return Backend(str(version) if version else None, bool(version and licensed))


def _retention(settings: HubSettings, table: str) -> timedelta:
    """How long the history table is kept."""
    return (
        settings.history_retention if table == "status_transition" else settings.heartbeat_retention
    )


# TimescaleDB's retention and compression policies, each by the hypertable or continuous
# aggregate it is on (a continuous aggregate's jobs name its materialization hypertable).
_POLICIES = text("""
SELECT j.proc_name, COALESCE(a.view_name, j.hypertable_name), j.config
FROM timescaledb_information.jobs j
LEFT JOIN timescaledb_information.continuous_aggregates a
  ON a.materialization_hypertable_schema = j.hypertable_schema
 AND a.materialization_hypertable_name = j.hypertable_name
WHERE j.proc_name IN ('policy_retention', 'policy_compression')
""")


async def apply_policies(session: AsyncSession, settings: HubSettings) -> dict[str, str]:
    """TimescaleDB's retention and compression policies, set to the settings: what changed."""
    changed: dict[str, str] = {}
    wanted = (
        {
            ("policy_retention", table): ("drop_after", _retention(settings, table))
            for table in HYPERTABLES
        }
        | {
            ("policy_retention", view): ("drop_after", settings.rollup_retention)
            for view in ROLLUP_VIEWS
        }
        | {
            ("policy_compression", table): ("compress_after", settings.compress_after)
            for table in HYPERTABLES
        }
    )
    jobs = await session.execute(_POLICIES)
    current: dict[tuple[str, str], Any] = {
        (str(proc), str(table)): config for proc, table, config in jobs
    }
    for (proc, table), (key, interval) in wanted.items():
        config = current.get((proc, table))
        if config is not None and config.get(key) == _postgres_interval(interval):
            continue
        remove, add = (
            ("remove_retention_policy", "add_retention_policy")
            if proc == "policy_retention"
            else ("remove_compression_policy", "add_compression_policy")
        )
        await session.execute(
            text(f"SELECT {remove}(CAST(:table AS regclass), if_exists => true)"),
            {"table": table},
        )
        await session.execute(
            text(f"SELECT {add}(CAST(:table AS regclass), CAST(:interval AS interval))"),
            {"table": table, "interval": interval},
        )
        changed[f"{table} {key}"] = _postgres_interval(interval)
    return changed


def _postgres_interval(interval: timedelta) -> str:
    """How TimescaleDB writes an interval into a job's config (PostgreSQL's interval output)."""
    days, seconds = interval.days, interval.seconds
    parts = [f"{days} day{'s' if days != 1 else ''}"] if days else []
    if seconds or not parts:
        hours, rest = divmod(seconds, 3600)
        minutes, seconds = divmod(rest, 60)
        parts.append(f"{hours:02d}:{minutes:02d}:{seconds:02d}")
    return " ".join(parts)


async def drop_expired(
    sessions: Sessions, settings: HubSettings, found: Backend, now: datetime
) -> dict[str, int]:
    """Drop what is older than the retention, where no policy does: chunks or rows dropped."""
    dropped: dict[str, int] = {}
    for table, (column, _) in HYPERTABLES.items():
        before = now - _retention(settings, table)
        if found.timescaledb is not None:
            async with write_session(sessions) as session:
                chunks = await session.scalars(
                    text("SELECT drop_chunks(CAST(:table AS regclass), older_than => :before)"),
                    {"table": table, "before": before},
                )
                dropped[table] = len(list(chunks))
            continue
        dropped[table] = await _delete_expired(sessions, table, column, before)
    return dropped | await _drop_expired_rollups(sessions, settings, (*ROLLUP_VIEWS,), now)


async def _delete_expired(sessions: Sessions, table: str, column: str, before: datetime) -> int:
    """Delete the rows of `table` whose `column` is before `before`, a batch a transaction."""
    total = 0
    while True:
        async with write_session(sessions) as session:
            deleted = await session.execute(_delete_batch(table, column, before))
            count = cast(CursorResult[Any], deleted).rowcount
        total += count
        if count < DELETE_BATCH:
            return total


async def _drop_expired_rollups(
    sessions: Sessions,
    settings: HubSettings,
    views: tuple[str, ...],
    now: datetime,
) -> dict[str, int]:
    """Delete the hours of those rollup tables, and of the sampled health, older than the
    rollups' retention."""
    tables = {view: f"{view}_rollup" for view in (*views, *PLACEMENT_ROLLUPS)}
    dropped = {}
    for view, table in (tables | {HEALTH_ROLLUP: HEALTH_ROLLUP}).items():
        async with write_session(sessions) as session:
            # The names are ROLLUP_VIEWS', PLACEMENT_ROLLUPS' and HEALTH_ROLLUP, not input.
            deleted = await session.execute(
                text(f"DELETE FROM {table} WHERE hour < :before"),  # noqa: S608
                {"before": now - settings.rollup_retention},
            )
            dropped[view] = cast(CursorResult[Any], deleted).rowcount
    return dropped


def _delete_batch(name: str, time: str, before: datetime) -> Delete:
    """DELETE of the first DELETE_BATCH rows older than `before`, found by their ctid."""
    rows = sql.table(name, sql.column(time))
    ctid: ColumnElement[Any] = literal_column("ctid")
    batch = select(ctid).select_from(rows).where(rows.c[time] < before).limit(DELETE_BATCH)
    return delete(rows).where(ctid == any_(func.array(batch.scalar_subquery())))


async def keep_history(sessions: Sessions, settings: HubSettings, now: datetime) -> None:
    """The retention job's run: policies on TimescaleDB (and the dropping of the placement
    rollups' hours, which no policy keeps), the dropping itself elsewhere; the drift periods
    that ended and the readiness turns of buckets that started before the history's retention,
    and the parts of snapshots that never completed, on every backend."""
    async with write_session(sessions) as session:
        found = await backend(session)
        changed = await apply_policies(session, settings) if found.licensed else {}
    dropped = {
        "drift_period": await _delete_expired(
            sessions, "drift_period", "ended_at", now - settings.history_retention
        ),
        "snapshot_part": await _delete_expired(
            sessions, "snapshot_part", "received_at", now - SNAPSHOT_PARTS_KEPT
        ),
        "readiness_turn": await _delete_expired(
            sessions, "readiness_turn", "bucket", now - settings.history_retention
        ),
    }
    if found.licensed:
        dropped |= await _drop_expired_rollups(sessions, settings, (), now)
        log.info("history policies", backend=found.name, changed=changed, dropped=dropped)
    else:
        dropped |= await drop_expired(sessions, settings, found, now)
        log.info("history dropped", backend=found.name, dropped=dropped)


async def refresh_rollups(
    sessions: Sessions, now: datetime, stale_after: timedelta
) -> dict[str, int]:
    """The rollup job's run, for the rollups that are tables (ROLLUP_VIEWS on plain PostgreSQL
    and TimescaleDB's Apache build, PLACEMENT_ROLLUPS everywhere). Each view's hours from
    ROLLUP_REFRESHED before its watermark up to the hour under way (into it, for CUT_ROLLUPS)
    are computed again by the view, and the watermark moves on. Then the fleet's health is
    sampled (sample_health). Hours rolled up per view, and the environments and cluster types
    sampled."""
    async with write_session(sessions) as session:
        tables = () if (await backend(session)).continuous_aggregates else ROLLUP_VIEWS
        refreshed = {}
        for view in (*tables, *PLACEMENT_ROLLUPS):
            until = now - ROLLUP_CUT_BEFORE if view in CUT_ROLLUPS else _hour(now)
            watermark = await session.scalar(
                text("SELECT materialized_until FROM rollup_watermark WHERE name = :view"),
                {"view": view},
            )
            since = None if watermark is None else _hour(min(watermark, until)) - ROLLUP_REFRESHED
            refreshed[view] = await _refresh(session, view, since, until)
        refreshed[HEALTH_ROLLUP] = await sample_health(session, now, now - stale_after)
    return refreshed


# One sample of the fleet's health added to its hour, per environment and cluster type (0 for
# none). It counts the live clusters, those with an object failing (not Ready, not suspended),
# those drifted (as last judged) and those stale (never reported, or not since `stale_before`).
_SAMPLE_HEALTH = text("""
INSERT INTO fleet_health_hourly AS h (
    hour, environment_id, cluster_type_id, samples, clusters, failing, drifted, stale)
SELECT date_bin(INTERVAL '1 hour', CAST(:now AS timestamptz), TIMESTAMPTZ '2000-01-01 UTC'),
       COALESCE(c.environment_id, 0), COALESCE(c.cluster_type_id, 0), 1, count(*),
       count(*) FILTER (WHERE n.failing > 0),
       count(*) FILTER (WHERE d.drifted > 0),
       count(*) FILTER (WHERE c.last_seen_at IS NULL OR c.last_seen_at < :stale_before)
FROM cluster c
LEFT JOIN cluster_object_count n ON n.cluster_id = c.id
LEFT JOIN cluster_drift d ON d.cluster_id = c.id
WHERE c.decommissioned_at IS NULL
GROUP BY 1, 2, 3
ON CONFLICT (hour, environment_id, cluster_type_id) DO UPDATE SET
    samples = h.samples + 1,
    clusters = h.clusters + EXCLUDED.clusters,
    failing = h.failing + EXCLUDED.failing,
    drifted = h.drifted + EXCLUDED.drifted,
    stale = h.stale + EXCLUDED.stale
""")


async def sample_health(session: AsyncSession, now: datetime, stale_before: datetime) -> int:
    """Add the fleet's health at `now` to the hour's samples: the environments and cluster
    types sampled."""
    sampled = await session.execute(_SAMPLE_HEALTH, {"now": now, "stale_before": stale_before})
    return cast(CursorResult[Any], sampled).rowcount


def _hour(moment: datetime) -> datetime:
    """The start of the UTC hour `moment` is in."""
    return datetime.fromtimestamp(moment.timestamp() // 3600 * 3600, UTC)


async def _refresh(
    session: AsyncSession, view: str, since: datetime | None, until: datetime
) -> int:
    """Recompute `view`'s hours from `since` (the start of an hour) up to `until` into its
    table: its watermark is set back to `since` so that the view reads those hours from the raw
    rows, up to `until` where the view reads `read_until` (CUT_ROLLUPS), then on to `until`.
    Readers see the rows of before until the commit."""
    bounds = {"view": view, "since": since, "until": until}
    await session.execute(
        text(
            "UPDATE rollup_watermark SET materialized_until = :since, read_until = :until "
            "WHERE name = :view"
        ),
        bounds,
    )
    # The names are ROLLUP_VIEWS' and PLACEMENT_ROLLUPS', not input.
    await session.execute(
        text(f"DELETE FROM {view}_rollup WHERE hour >= :since OR :since IS NULL"),  # noqa: S608
        bounds,
    )
    inserted = await session.execute(
        text(
            f"INSERT INTO {view}_rollup SELECT * FROM {view} "  # noqa: S608
            "WHERE (hour >= :since OR :since IS NULL) AND hour < :until"
        ),
        bounds,
    )
    await session.execute(
        text(
            "UPDATE rollup_watermark SET materialized_until = :until, read_until = NULL "
            "WHERE name = :view"
        ),
        bounds,
    )
    return cast(CursorResult[Any], inserted).rowcount


# The schema of the views the dashboards read (migration 0023).
DASHBOARD_SCHEMA = "grafana"


async def grant_readonly(session: AsyncSession, role: str) -> str | None:
    """Let `role` read the dashboards' views, those of today and those later migrations add, and
    nothing else. JIT compilation is turned off for the role's sessions in this database, as for
    the hub's own: the dashboards' reads take milliseconds, which compiling would make hundreds.
    The role must exist (roles are the server's, not the store's), and granting twice changes
    nothing. What the database's administrator has to do still, if anything: a user that may not
    alter the role cannot turn JIT off for it."""
    exists = await session.scalar(
        text("SELECT 1 FROM pg_roles WHERE rolname = :role"), {"role": role}
    )
    if exists is None:
        raise UnknownRole(
            f"no role {role!r} on this PostgreSQL server: create it first "
            f"(e.g. CREATE ROLE {role} LOGIN PASSWORD '…'), then grant"
        )
    quoted = session.get_bind().dialect.identifier_preparer.quote(role)
    for statement in (
        f"GRANT USAGE ON SCHEMA {DASHBOARD_SCHEMA} TO {quoted}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {DASHBOARD_SCHEMA} TO {quoted}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA {DASHBOARD_SCHEMA} GRANT SELECT ON TABLES TO {quoted}",
    ):
        await session.execute(text(statement))
    database = await session.scalar(text("SELECT quote_ident(current_database())"))
    jit_off = f"ALTER ROLE {quoted} IN DATABASE {database} SET jit = off"
    try:
        async with session.begin_nested():
            await session.execute(text(jit_off))
    except DBAPIError as exc:
        if not isinstance(exc.orig, InsufficientPrivilege):
            raise
        return f"this user may not alter role {role!r}; as a superuser, run: {jit_off}"
    return None
