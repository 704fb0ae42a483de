"""Scheduler endpoints (read scope): the assignments it rendered and the errors it met."""

from fastapi import APIRouter

from hub.client.params import Limit, Offset, Text
from hub.deps import ReadAccess, ReadSessionDep
from hub.errors import error_responses
from hub.scheduling import service
from hub.scheduling.schemas import AssignmentPage, ErrorKind, SchedulingErrorPage

router = APIRouter(
    prefix="/api/v1",
    tags=["scheduling"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)


@router.get("/assignments", response_model=AssignmentPage)
async def list_assignments(
    session: ReadSessionDep,
    environment: Text | None = None,
    cluster_type: Text | None = None,
    workload: Text | None = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> AssignmentPage:
    """Every pair the scheduling policies select, as the last run left it: rendered, failed
    (keeping its previous output) or rejected; in promotion order."""
    return await service.list_assignments(
        session,
        environment=environment,
        cluster_type=cluster_type,
        workload=workload,
        limit=limit,
        offset=offset,
    )


@router.get("/scheduling/errors", response_model=SchedulingErrorPage)
async def list_errors(
    session: ReadSessionDep,
    environment: Text | None = None,
    kind: ErrorKind | None = None,
    cluster_type: Text | None = None,
    deployment_target: Text | None = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> SchedulingErrorPage:
    """What the last run of each environment could not load, schedule, render or write."""
    return await service.list_errors(
        session,
        environment=environment,
        kind=kind,
        cluster_type=cluster_type,
        deployment_target=deployment_target,
        limit=limit,
        offset=offset,
    )
