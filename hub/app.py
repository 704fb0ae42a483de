"""The hub's ASGI application: routers, error handling, metrics and the database lifecycle."""

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import structlog
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline

import hub
from hub.background.runner import start_jobs, stop_jobs
from hub.clusters.router import router as clusters_router
from hub.database import (
    STORE_BUSY_ERRORS,
    STORE_UNAVAILABLE_ERRORS,
    StoreGate,
    create_engine,
    create_sessionmaker,
    create_statement_pool,
)
from hub.dora.router import router as dora_router
from hub.drift.router import router as drift_router
from hub.envdiff.router import router as envdiff_router
from hub.errors import ErrorAnswers
from hub.events.router import router as events_router
from hub.fleet.router import router as fleet_router
from hub.gate.router import document_decision_examples
from hub.gate.router import router as gate_router
from hub.harvest.config import load_repositories_file
from hub.harvest.router import router as repositories_router
from hub.health.router import router as health_router
from hub.ingest.batcher import ReportBatcher
from hub.ingest.router import REPORT_COMPONENTS, ReportShortcut
from hub.ingest.router import router as ingest_router
from hub.metrics import HubMetrics, MetricsPortMiddleware, RequestMetricsMiddleware
from hub.pages.headers import SecurityHeaders
from hub.pages.router import public as pages_public_router
from hub.pages.router import router as pages_router
from hub.pages.throttle import FailedSignIns
from hub.rollouts.router import router as rollouts_router
from hub.runs.router import router as runs_router
from hub.scheduling.router import router as scheduling_router
from hub.settings import HubSettings
from hub.suspects.router import router as suspects_router
from hub.tasks import TASKS
from hub.timeline.router import router as timeline_router
from hub.tokens.router import router as tokens_router
from hub.types import Clock

log = structlog.get_logger("fleetmark.app")

# The API's documentation pages (FastAPIOffline serves them and does not keep their paths).
DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
DOCS_PATHS = (DOCS_URL, REDOC_URL, OAUTH2_REDIRECT_URL)


def utc_now() -> datetime:
    return datetime.now(UTC)


def create_app(settings: HubSettings, database_url: str, *, clock: Clock = utc_now) -> FastAPI:
    """Build the app; the engine and statement pool open on start-up and close on shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.mode != "development" and settings.public_url is None:
            log.warning(
                "FLEETMARK_PUBLIC_URL is not set: events' source and evidence links name the "
                "address the hub serves on",
                address=settings.effective_public_url,
            )
        if settings.repositories_file is not None:
            # A file the harvest cannot use (a URL with credentials, …) stops the start, the
            # error naming the file and the entry, rather than failing every harvest.
            load_repositories_file(settings.repositories_file)
        engine = create_engine(database_url, settings)
        statements = create_statement_pool(database_url, settings)
        # Without waiting: a store that is down shows in /readyz, not as a failed start.
        await statements.open(wait=False)
        app.state.sessionmaker = create_sessionmaker(engine)
        app.state.statements = statements
        app.state.report_batcher = ReportBatcher(
            statements, busy_timeout=settings.database_pool_timeout
        )
        app.state.jobs = start_jobs(database_url, settings, clock, TASKS)
        # What start-up built lives as long as the process: out of the collector's way, so
        # that the full collections requests set off now and then do not walk it each time.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            await stop_jobs(app.state.jobs)
            await statements.close()
            await engine.dispose()

    # /docs and /redoc load Swagger UI and ReDoc from the hub, so they render air-gapped too.
    app = FastAPIOffline(
        docs_url=DOCS_URL,
        redoc_url=REDOC_URL,
        swagger_ui_oauth2_redirect_url=OAUTH2_REDIRECT_URL,
        title="fleetmark",
        version=hub.__version__,
        summary="Deployment observability hub for GitOps fleets.",
        lifespan=lifespan,
        # Swagger UI would ask an online validator about the document.
        swagger_ui_parameters={"validatorUrl": None},
    )
    app.state.settings = settings
    app.state.clock = clock
    app.state.store_gate = gate = StoreGate(
        database_url, connect_timeout=settings.database_pool_timeout
    )
    app.state.failed_sign_ins = FailedSignIns()
    app.state.metrics = HubMetrics(
        fleet_max_age=settings.metrics_refresh_interval, clock=clock, gate=gate
    )
    errors = ErrorAnswers(gate=gate, busy=STORE_BUSY_ERRORS, unavailable=STORE_UNAVAILABLE_ERRORS)
    errors.install(app)
    for router in (
        health_router,
        ingest_router,
        clusters_router,
        tokens_router,
        events_router,
        fleet_router,
        gate_router,
        suspects_router,
        dora_router,
        rollouts_router,
        drift_router,
        envdiff_router,
        repositories_router,
        scheduling_router,
        runs_router,
        timeline_router,
        pages_public_router,
        pages_router,
    ):
        app.include_router(router)
    # Innermost: reports are answered inside the middlewares below, ahead of the app's routing.
    app.add_middleware(ReportShortcut, errors=errors)
    app.add_middleware(RequestMetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(SecurityHeaders, docs_paths=DOCS_PATHS)
    if settings.metrics_port is not None:
        app.add_middleware(MetricsPortMiddleware, port=settings.metrics_port)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(REPORT_COMPONENTS)
            document_decision_examples(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
