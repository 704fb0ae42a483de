"""What the hub's subcommands share: settings and the database (the hub's extra)."""

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from hub import migrate
from hub.cli.output import fail, validation_failure
from hub.database import create_engine, create_sessionmaker, resolve_database_url, write_session
from hub.embedded import EmbeddedDatabaseError
from hub.errors import FleetmarkError
from hub.logs import configure_logging
from hub.settings import HubSettings

T = TypeVar("T")

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        envvar="FLEETMARK_DATA_DIR",
        help="Where the embedded PostgreSQL keeps its data (when no database URL is set).",
        show_default=False,
    ),
]
PortOption = Annotated[
    int | None, typer.Option(help="Port to listen on (default: FLEETMARK_PORT, else 8080).")
]


# Where each setting comes from, to name it when it breaks a rule.
_SETTINGS = {name: f"FLEETMARK_{name.upper()}" for name in HubSettings.model_fields} | {
    "data_dir": "--data-dir",
    "database_url": "--database-url",
    "": "the settings",
}


def load_settings(data_dir: Path | None = None, database_url: str | None = None) -> HubSettings:
    overrides: dict[str, Any] = {} if data_dir is None else {"data_dir": data_dir}
    if database_url is not None:
        # --database-url stands for the variable and for the file alike.
        overrides |= {"database_url": database_url, "database_url_file": None}
    try:
        settings = HubSettings(**overrides)
    except ValidationError as exc:
        raise fail(validation_failure(exc, _SETTINGS)) from exc
    configure_logging(settings.effective_log_format)
    return settings


def check_port(host: str, port: int, option: str = "--port") -> None:
    """Refuse a port another server listens on, before anything is started."""
    with socket.socket() as probe:
        # As the hub binds: connections of an earlier run in TIME_WAIT do not count.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise fail(f"{option} {port}: cannot listen on {host}:{port} ({exc.strerror})") from exc


def database_url(settings: HubSettings) -> str:
    """The configured database, or the embedded one, started if need be."""
    try:
        return resolve_database_url(settings)
    except (EmbeddedDatabaseError, ValueError) as exc:
        raise fail(str(exc)) from exc


def open_database(settings: HubSettings, *, upgrade: bool) -> str:
    """The hub's database, migrated to head when asked (always when embedded)."""
    url = database_url(settings)
    if upgrade or settings.database_url is None:
        migrate.upgrade(url)
    elif migrate.current_revision(url) != migrate.head_revision():
        raise fail("the database schema is not up to date: run `fleetmark migrate` first")
    return url


@asynccontextmanager
async def _unit_of_work(url: str, settings: HubSettings) -> AsyncIterator[AsyncSession]:
    engine = create_engine(url, settings)
    try:
        async with write_session(create_sessionmaker(engine)) as session:
            yield session
    finally:
        await engine.dispose()


def run_in_session(settings: HubSettings, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run one service call in a committed unit of work; domain errors become clean exits."""
    return run_in_database(open_database(settings, upgrade=False), settings, work)


def run_in_database(
    url: str, settings: HubSettings, work: Callable[[AsyncSession], Awaitable[T]]
) -> T:
    """`run_in_session` on a database already opened."""

    async def go() -> T:
        async with _unit_of_work(url, settings) as session:
            return await work(session)

    try:
        return asyncio.run(go())
    except FleetmarkError as exc:
        raise fail(exc.detail) from exc
