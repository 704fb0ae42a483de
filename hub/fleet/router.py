"""Query endpoints (read scope): fleet state and deployment history."""

from typing import Annotated

from fastapi import APIRouter, Query

from hub.client.schemas.fleet import FleetQuery, HistoryQuery
from hub.deps import ReadAccess, ReadContextDep, ReadSessionDep, sort_order
from hub.errors import error_response, error_responses
from hub.fleet import service
from hub.fleet.schemas import DeploymentPage, FleetState
from hub.sorting import Order

router = APIRouter(
    prefix="/api/v1",
    tags=["queries"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)


@router.get(
    "/fleet",
    response_model=FleetState,
    responses=error_response(404, "Unknown environment or cluster type."),
)
async def fleet_state(
    session: ReadSessionDep,
    context: ReadContextDep,
    order: Annotated[Order, sort_order(service.CLUSTER_COLUMNS, "clusters")],
    query: Annotated[FleetQuery, Query()],
) -> FleetState:
    """Clusters and their objects by state, per environment and cluster type; a page of clusters."""
    return await service.fleet_state(
        session,
        environment=query.environment,
        cluster_type=query.cluster_type,
        limit=query.limit,
        offset=query.offset,
        now=context.now,
        stale_after=context.stale_after,
        order=order,
    )


@router.get(
    "/history",
    response_model=DeploymentPage,
    responses=error_response(404, "Unknown environment, cluster type or cluster."),
)
async def deployment_history(
    session: ReadSessionDep, query: Annotated[HistoryQuery, Query()]
) -> DeploymentPage:
    """Every change of the revision a reconciler object applied, newest first."""
    return await service.deployment_history(session, query)
