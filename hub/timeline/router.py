"""Timeline endpoint (read scope): what happened to the fleet, newest first."""

from typing import Annotated

from fastapi import APIRouter, Query

from hub.client.schemas.timeline import TimelineQuery
from hub.deps import ClockDep, ReadAccess, ReadSessionDep
from hub.errors import error_response, error_responses
from hub.timeline import service
from hub.timeline.schemas import TimelinePage

router = APIRouter(
    prefix="/api/v1/timeline",
    tags=["queries"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)


@router.get(
    "",
    response_model=TimelinePage,
    responses=error_response(404, "Unknown environment, workload, cluster type or cluster."),
)
async def timeline(
    session: ReadSessionDep, clock: ClockDep, query: Annotated[TimelineQuery, Query()]
) -> TimelinePage:
    """Commits reaching environment branches, scheduling runs, rollouts' milestones, health
    regressions and recoveries per 5 minutes, drift, silences, decommissions and harvest
    failures, merged newest first; a page at a time, each page's `next` the cursor of the
    one after."""
    return await service.timeline(session, query, now=clock())
