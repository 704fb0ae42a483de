"""Schema migrations (Alembic), run by `fleetmark migrate` and at hub start-up, and the move of
a plain-PostgreSQL store onto TimescaleDB (`fleetmark migrate --to-timescaledb`).

Upgrades hold a PostgreSQL advisory lock, so replicas starting together migrate once.
"""

from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, create_engine, pool, text

# Advisory lock key for schema changes ("fleetmark" in ASCII, truncated to fit int8).
MIGRATION_LOCK = 0x666C6565746D61


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("migrations")))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()


def _run(url: str, action: str, revision: str) -> None:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK})
            connection.commit()
            try:
                getattr(command, action)(_config(connection), revision)
                connection.commit()
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK})
                connection.commit()
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    _run(url, "upgrade", revision)


def downgrade(url: str, revision: str) -> None:
    _run(url, "downgrade", revision)


def current_revision(url: str) -> str | None:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


class ConversionError(RuntimeError):
    """The store cannot be moved onto TimescaleDB as it is; the message says why."""


# The newest revision whose schema does not depend on the backend: the migrations after it lay
# the store out for TimescaleDB or for plain PostgreSQL, whichever they find.
BACKEND_NEUTRAL = "0016_unknown_revision_forms"
# The history tables, as migration 0001 makes them hypertables: (time column, chunk interval).
HYPERTABLES = {
    "status_transition": ("observed_at", "7 days"),
    "cluster_heartbeat": ("bucket_at", "7 days"),
}


def to_timescaledb(url: str) -> None:
    """Move a store made on plain PostgreSQL onto TimescaleDB, keeping every row.

    The server must preload TimescaleDB. The migrations laid out for plain PostgreSQL are
    undone down to BACKEND_NEUTRAL (what they hold is derived: rollups, recomputed), the
    history tables become hypertables with their rows (create_hypertable's migrate_data, which
    locks them while it copies), and the migrations are done again, now for TimescaleDB.
    Hubs should be stopped meanwhile.
    """
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            preloaded = connection.execute(
                text(
                    # The loader's setting: it exists when the server preloads TimescaleDB,
                    # and a role that is no superuser may read it.
                    "SELECT EXISTS (SELECT 1 FROM pg_available_extensions "
                    "WHERE name = 'timescaledb') "
                    "AND current_setting('timescaledb.disable_load', true) IS NOT NULL"
                )
            ).scalar()
            installed = connection.execute(
                text("SELECT 1 FROM pg_extension WHERE extname = 'timescaledb'")
            ).scalar()
    finally:
        engine.dispose()
    if not preloaded:
        raise ConversionError(
            "this PostgreSQL server does not preload TimescaleDB: install it, add timescaledb "
            "to shared_preload_libraries and restart the server"
        )
    if installed:
        raise ConversionError("the store is on TimescaleDB already")
    upgrade(url, BACKEND_NEUTRAL)
    downgrade(url, BACKEND_NEUTRAL)
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text("CREATE EXTENSION timescaledb"))
            for table, (column, chunk) in HYPERTABLES.items():
                connection.execute(text(f"DROP INDEX IF EXISTS ix_{table}_{column}_brin"))
                connection.execute(
                    text(
                        "SELECT create_hypertable(CAST(:table AS regclass), "
                        "by_range(:column, CAST(:chunk AS interval)), "
                        "create_default_indexes => false, migrate_data => true)"
                    ),
                    {"table": table, "column": column, "chunk": chunk},
                )
    finally:
        engine.dispose()
    upgrade(url)
