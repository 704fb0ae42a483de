"""DORA endpoints (read scope): figures per environment, and the rollouts behind them as a page
or as CSV."""

from typing import Annotated

from fastapi import APIRouter, Query, Response

from hub.client.schemas.dora import DoraDeploymentsQuery, DoraQuery
from hub.deps import ClockDep, ReadAccess, ReadSessionDep, SettingsDep
from hub.dora import service
from hub.dora.schemas import DoraDeploymentPage, DoraReport
from hub.errors import error_response, error_responses

router = APIRouter(
    prefix="/api/v1/dora",
    tags=["queries"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)

_NOT_FOUND = error_response(404, "Unknown environment, or a workload without assignments there.")

QueryDep = Annotated[DoraQuery, Query()]


@router.get("", response_model=DoraReport, responses=_NOT_FOUND)
async def dora(
    session: ReadSessionDep, clock: ClockDep, settings: SettingsDep, query: QueryDep
) -> DoraReport:
    """Deployment frequency, lead time, change failure rate and time to restore per
    environment, of its platform commits or of a workload's versions."""
    return await service.dora_report(session, query, now=clock(), kept=settings.history_retention)


@router.get("/deployments", response_model=DoraDeploymentPage, responses=_NOT_FOUND)
async def dora_deployments(
    session: ReadSessionDep,
    clock: ClockDep,
    settings: SettingsDep,
    query: Annotated[DoraDeploymentsQuery, Query()],
) -> DoraDeploymentPage:
    """The rollouts the figures count, per environment, newest first."""
    return await service.dora_deployments(
        session,
        query,
        now=clock(),
        kept=settings.history_retention,
    )


@router.get(
    "/deployments.csv",
    response_class=Response,
    responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}}}, **_NOT_FOUND},
)
async def dora_deployments_csv(
    session: ReadSessionDep, clock: ClockDep, settings: SettingsDep, query: QueryDep
) -> Response:
    """Every rollout the figures count, as CSV (the columns of /dora/deployments' items)."""
    body = await service.dora_deployments_csv(
        session, query, now=clock(), kept=settings.history_retention
    )
    return Response(
        body,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="dora-deployments.csv"'},
    )
