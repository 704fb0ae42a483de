"""/healthz (process up), /readyz (database reachable), /metrics (Prometheus)."""

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from hub.health import service
from hub.health.schemas import Health, Readiness

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


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
