"""/healthz (process up), /readyz (database reachable), /metrics (Prometheus)."""

import asyncio

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from hub.background.runner import beside_jobs
from hub.deps import MetricsAccess
from hub.health import service
from hub.health.schemas import Health, Readiness
from hub.metrics import HubMetrics
from hub.runs import service as runs
from hub.runs.service import FleetSnapshot
from hub.settings import HubSettings
from hub.types import Sessions

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "The database does not answer."}},
)
async def readyz(request: Request) -> JSONResponse:
    problem = await service.database_problem(request.app.state.sessionmaker)
    if problem is not None:
        readiness = Readiness(status="unavailable", detail=problem)
        return JSONResponse(readiness.model_dump(mode="json"), status_code=503)
    return JSONResponse(Readiness(status="ready").model_dump(mode="json", exclude_none=True))


@router.get("/metrics", include_in_schema=False, dependencies=[MetricsAccess])
async def metrics(request: Request) -> Response:
    """The fleet gauges are read from the store when their snapshot is due, on the jobs'
    thread; the text is written on a worker thread (thousands of lines with per-cluster
    series): neither holds up the event loop that answers reports."""
    settings: HubSettings = request.app.state.settings
    clock = request.app.state.clock
    hub_metrics: HubMetrics = request.app.state.metrics

    async def snapshot(sessions: Sessions) -> FleetSnapshot:
        return await runs.fleet_snapshot(
            sessions,
            now=clock(),
            stale_after=settings.stale_after,
            per_cluster=settings.metrics_per_cluster,
        )

    await hub_metrics.fleet.refresh(lambda: beside_jobs(request.app.state.jobs, snapshot))
    body = await asyncio.to_thread(hub_metrics.render)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
