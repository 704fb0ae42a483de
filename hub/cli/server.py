"""`fleetmark serve`, `fleetmark migrate`."""

import os
import signal
from pathlib import Path
from types import FrameType
from typing import Annotated
from urllib.parse import unquote

import structlog
import typer
import uvicorn
from rich.markup import escape
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession
from uvicorn.config import LOGGING_CONFIG
from uvicorn.supervisors import Multiprocess

import hub
from hub import migrate
from hub.cli.common import (
    DataDirOption,
    PortOption,
    check_port,
    database_url,
    load_settings,
    open_database,
    run_in_database,
)
from hub.cli.exits import ExitCode
from hub.cli.output import console, fail
from hub.cli.secret_files import read_secret_file
from hub.http import DeadlineHttpToolsProtocol
from hub.security import API_TOKEN_FORMAT, API_TOKEN_PREFIX
from hub.settings import HubSettings
from hub.tokens import service as token_service

# Where, in the data folder, the hub keeps the first admin token it made itself.
ADMIN_TOKEN_FILE_NAME = "admin.token"  # noqa: S105 - a file name, not a secret
log = structlog.get_logger("fleetmark.serve")


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
    check_port(host, port)
    if settings.metrics_port is not None:
        check_port(host, settings.metrics_port, "FLEETMARK_METRICS_PORT")
    url = open_database(settings, upgrade=run_migrations)
    _create_first_admin_token(settings, url)
    where = (
        f"embedded PostgreSQL in {settings.embedded_data_dir}"
        if settings.database_url is None
        else "FLEETMARK_DATABASE_URL"
    )
    log.info(
        "hub starting",
        version=hub.__version__,
        url=f"http://{host}:{port}",
        database=f"{_display_url(url)} ({where})",
    )
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
        forwarded_allow_ips=settings.forwarded_allow_ips,
        # In JSON mode the hub routes uvicorn's loggers itself (hub/logs.py); uvicorn's own
        # set-up would put them back to plain lines.
        log_config=None if settings.effective_log_format == "json" else LOGGING_CONFIG,
    )
    _run(config, settings.metrics_port)


def _run(config: uvicorn.Config, metrics_port: int | None) -> None:
    """uvicorn.run, with a second listening socket for /metrics when it has a port of its own:
    one server, one app and one shutdown for both (hub.metrics.MetricsPortMiddleware tells
    them apart)."""
    sockets = [config.bind_socket()]
    if metrics_port is not None:
        metrics = uvicorn.Config(config.app, host=config.host, port=metrics_port, log_config=None)
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
        raise typer.Exit(ExitCode.NO_ANSWER)


def _create_first_admin_token(settings: HubSettings, url: str) -> None:
    """The admin token from FLEETMARK_ADMIN_TOKEN_FILE, or a new one kept in the data folder."""
    given = settings.admin_token_file
    token = None if given is None else _read_admin_token(given)
    kept = settings.data_dir / ADMIN_TOKEN_FILE_NAME

    async def create(session: AsyncSession) -> str | None:
        created = await token_service.create_first_admin(
            session, token=token, token_secret=settings.token_secret.get_secret_value()
        )
        if created is not None and given is None:
            # Before the commit: a token no file holds is never made.
            _keep(created, kept)
        return created

    created = run_in_database(url, settings, create)
    if created is None:
        if given is None and kept.exists():
            console.print(
                f"The first admin token this hub made is kept in {escape(str(kept))}",
                highlight=False,
                soft_wrap=True,
            )
        return
    name = token_service.FIRST_ADMIN_TOKEN_NAME
    if given is not None:
        console.print(
            f"admin token [bold]{name}[/] created from {escape(str(given))}",
            highlight=False,
            soft_wrap=True,
        )
        return
    console.print(
        f"No admin token existed: created admin token [bold]{name}[/], kept in "
        f"{escape(str(kept))} (readable by its owner only)",
        highlight=False,
        soft_wrap=True,
    )
    if settings.mode == "development":
        # Production logs are kept and shipped; only the file holds the token there.
        console.print("Its token (development mode), shown only this once:", highlight=False)
        console.print(created, style="bold green", highlight=False, soft_wrap=True)


def _keep(token: str, path: Path) -> None:
    """`token` in `path`, readable and writable by its owner alone from the first byte on."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            os.fchmod(descriptor, 0o600)  # a file left by an earlier store kept its mode
            file.write(f"{token}\n")
    except OSError as exc:
        raise fail(
            f"cannot keep the first admin token in {escape(str(path))} ({exc.strerror or exc}): "
            "make the data folder writable, or give the token in FLEETMARK_ADMIN_TOKEN_FILE"
        ) from None


def _read_admin_token(path: Path) -> str:
    token = read_secret_file(path, "FLEETMARK_ADMIN_TOKEN_FILE")
    if not API_TOKEN_FORMAT.fullmatch(token):
        raise fail(
            f"FLEETMARK_ADMIN_TOKEN_FILE {escape(str(path))}: does not hold a fleetmark API "
            f"token ({API_TOKEN_PREFIX} and 43 characters of A-Z a-z 0-9 _ -, one line)"
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
