"""Schema migrations (Alembic), run by `fleetmark migrate` and at hub start-up.

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
