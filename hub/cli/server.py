"""`fleetmark serve`, `fleetmark migrate`."""

import os
import signal
from pathlib import Path
from types import FrameType
from typing import Annotated
from urllib.parse import unquote

import typer
import uvicorn
from sqlalchemy.engine import make_url
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

import hub
from hub import migrate
from hub.cli.common import (
    DataDirOption,
    PortOption,
    database_url,
    load_settings,
    open_database,
    run_in_database,
)
from hub.cli.output import console, fail, show_token
from hub.http import DeadlineHttpToolsProtocol
from hub.security import API_TOKEN_FORMAT, API_TOKEN_PREFIX
from hub.settings import HubSettings
from hub.tokens import service as token_service


def serve(
    host: Annotated[
        str | None,
        typer.Option(help="Address to listen on (default: FLEETMARK_HOST, else 127.0.0.1)."),
    ] = None,
    port: PortOption = None,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    run_migrations: Annotated[
        bool, typer.Option("--migrate/--no-migrate", help="Upgrade the schema before serving.")
    ] = True,
    data_dir: DataDirOption = None,
) -> None:
    """Run the hub. Without FLEETMARK_DATABASE_URL it starts an embedded PostgreSQL."""
    settings = load_settings(data_dir)
    host = host or settings.host
    port = port or settings.port
    url = open_database(settings, upgrade=run_migrations)
    _create_first_admin_token(settings, url)
    where = (
        f"embedded PostgreSQL in {settings.embedded_data_dir}"
        if settings.database_url is None
        else "FLEETMARK_DATABASE_URL"
    )
    console.print(
        f"fleetmark {hub.__version__} starting on [bold]http://{host}:{port}[/]", highlight=False
    )
    console.print(f"database: {_display_url(url)} ({where})", highlight=False, soft_wrap=True)
    # Workers build their app from the environment; hand them the database already resolved.
    os.environ.pop("FLEETMARK_DATABASE_URL_FILE", None)
    os.environ["FLEETMARK_DATABASE_URL"] = url
    # uvicorn re-raises SIGTERM after a graceful shutdown; exiting normally instead lets the
    # embedded PostgreSQL be stopped on the way out.
    signal.signal(signal.SIGTERM, _exit_normally)
    config = uvicorn.Config(
        "hub.asgi:create_app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http=DeadlineHttpToolsProtocol,
        access_log=False,
        proxy_headers=True,
    )
    _run(config, settings.metrics_port)


def _run(config: uvicorn.Config, metrics_port: int | None) -> None:
    """uvicorn.run, with a second listening socket for /metrics when it has a port of its own:
    one server, one app and one shutdown for both (hub.metrics.MetricsPortMiddleware tells
    them apart)."""
    sockets = [config.bind_socket()]
    if metrics_port is not None:
        metrics = uvicorn.Config(config.app, host=config.host, port=metrics_port)
        sockets.append(metrics.bind_socket())
    server = uvicorn.Server(config)
    try:
        if config.workers > 1:
            Multiprocess(config, sockets=sockets).run()
            return
        config.load_app()
        server.run(sockets=sockets)
    except KeyboardInterrupt:  # Ctrl-C, once the server has shut down
        return
    if not server.started:
        raise typer.Exit(STARTUP_FAILURE)


def _create_first_admin_token(settings: HubSettings, url: str) -> None:
    """The admin token from FLEETMARK_ADMIN_TOKEN_FILE, or a new one printed once."""
    path = settings.admin_token_file
    token = None if path is None else _read_admin_token(path)
    created = run_in_database(
        url,
        settings,
        lambda session: token_service.create_first_admin(
            session, token=token, token_secret=settings.token_secret.get_secret_value()
        ),
    )
    if created is None:
        return
    name = token_service.FIRST_ADMIN_TOKEN_NAME
    if path is not None:
        console.print(
            f"admin token [bold]{name}[/] created from {path}", highlight=False, soft_wrap=True
        )
        return
    show_token(name, created, "No admin token existed: created admin token")


def _read_admin_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"FLEETMARK_ADMIN_TOKEN_FILE {path}: cannot be read ({exc})") from exc
    if not API_TOKEN_FORMAT.fullmatch(token):
        raise fail(
            f"FLEETMARK_ADMIN_TOKEN_FILE {path}: does not hold a fleetmark API token "
            f"({API_TOKEN_PREFIX} and 43 characters of A-Z a-z 0-9 _ -, one line)"
        )
    return token


def _exit_normally(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _display_url(url: str) -> str:
    """The libpq form, which psql and other clients accept, without the password."""
    shown = make_url(url).set(drivername="postgresql").render_as_string(hide_password=True)
    return unquote(shown)


def migrate_command(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    down: Annotated[
        bool, typer.Option("--down", help="Downgrade to REVISION (e.g. base).")
    ] = False,
    to_timescaledb: Annotated[
        bool,
        typer.Option(
            "--to-timescaledb",
            help="Move a store made on plain PostgreSQL onto TimescaleDB (the server must "
            "preload it), keeping every row; stop the hubs first.",
        ),
    ] = False,
    data_dir: DataDirOption = None,
) -> None:
    """Upgrade the schema to the newest revision (or downgrade with --down)."""
    settings = load_settings(data_dir)
    url = database_url(settings)
    if to_timescaledb:
        if down or revision != "head":
            raise fail(
                "--to-timescaledb moves the store to the newest revision: no REVISION or --down"
            )
        try:
            migrate.to_timescaledb(url)
        except migrate.ConversionError as exc:
            raise fail(str(exc)) from exc
    elif down:
        migrate.downgrade(url, revision)
    else:
        migrate.upgrade(url, revision)
    console.print(f"schema at revision {migrate.current_revision(url) or 'base'}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command("migrate")(migrate_command)
