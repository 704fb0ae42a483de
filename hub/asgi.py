"""ASGI entry point for uvicorn workers: settings and database URL come from the environment.

Run under uvicorn directly, give it the hub's HTTP protocol as well, which bounds slow clients:
`uvicorn hub.asgi:create_app_from_environment --factory --http hub.http:DeadlineHttpToolsProtocol`.
"""

import gc

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
    app = create_app(settings, normalise_database_url(settings.database_url.get_secret_value()))
    tune_garbage_collection()
    return app


def tune_garbage_collection() -> None:
    """Collect cycles less often than Python's default, which suits a library, not a server.

    A request allocates thousands of short-lived objects and keeps none. At the default
    threshold (700) the young generation is collected every few hundred allocations, the
    objects of requests still in flight get promoted, and full collections of the whole heap
    follow: under ingest load that cost each worker a sixth of its CPU. Everything built at
    start-up is frozen out of collection; the rest is collected every 10,000 allocations.
    """
    gc.freeze()
    gc.set_threshold(10_000, 20, 100)
