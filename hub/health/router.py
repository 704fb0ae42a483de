"""/healthz (process up), /readyz (database reachable), /metrics (Prometheus)."""

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import SQLAlchemyError

from hub.database import read_session
from hub.health.repository import ping

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    try:
        async with read_session(request.app.state.sessionmaker) as session:
            await ping(session)
    except (SQLAlchemyError, OSError) as exc:
        return JSONResponse(
            {"status": "unavailable", "detail": f"database unreachable: {type(exc).__name__}"},
            status_code=503,
        )
    return JSONResponse({"status": "ready"})


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
