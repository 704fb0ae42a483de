"""ASGI entry point for uvicorn workers: settings and database URL come from the environment."""

from fastapi import FastAPI

from hub.app import create_app
from hub.database import normalise_database_url
from hub.logs import configure_logging
from hub.settings import HubSettings


def create_app_from_environment() -> FastAPI:
    settings = HubSettings()
    if settings.database_url is None:
        raise RuntimeError(
            "FLEETMARK_DATABASE_URL must be set; start the hub with `fleetmark serve`"
        )
    configure_logging(settings.effective_log_format)
    return create_app(settings, normalise_database_url(settings.database_url.get_secret_value()))
