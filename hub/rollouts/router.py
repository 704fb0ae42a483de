"""Rollout health endpoint (read scope): the current rollout of each workload and of the
platform commits per environment, as numbers."""

from typing import Annotated

from fastapi import APIRouter, Query

from hub.client.schemas.rollouts import RolloutHealthList, RolloutHealthQuery
from hub.deps import ReadAccess, ReadSessionDep
from hub.errors import error_response, error_responses
from hub.rollouts import service

router = APIRouter(
    prefix="/api/v1/rollouts",
    tags=["queries"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)


@router.get(
    "",
    response_model=RolloutHealthList,
    responses=error_response(404, "Unknown environment or workload."),
)
async def rollouts(
    session: ReadSessionDep, query: Annotated[RolloutHealthQuery, Query()]
) -> RolloutHealthList:
    """Per environment and workload (or the platform commits), the current rollout: the share
    of its expected clusters converged, the time to converge across them (p50, p95, max) and
    its failures, as of the DORA job's last refresh."""
    return await service.rollout_health(session, query)
