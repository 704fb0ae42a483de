"""Environment diff endpoint (read scope)."""

from typing import Annotated

from fastapi import APIRouter, Query

from hub.client.schemas.diff import DiffQuery
from hub.deps import ClockDep, ReadAccess, ReadSessionDep, sort_order
from hub.envdiff import service
from hub.envdiff.schemas import EnvironmentDiff
from hub.errors import error_response, error_responses
from hub.sorting import Order

router = APIRouter(
    prefix="/api/v1",
    tags=["queries"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)

_NOT_FOUND = error_response(404, "Unknown environment, cluster type or workload.")


@router.get("/diff", response_model=EnvironmentDiff, responses=_NOT_FOUND)
async def environment_diff(
    session: ReadSessionDep,
    clock: ClockDep,
    order: Annotated[Order, sort_order(service.COLUMNS, "rows")],
    query: Annotated[DiffQuery, Query()],
) -> EnvironmentDiff:
    """Per workload and cluster type, what each environment is meant to run and what its
    clusters run, side by side, with every difference and its reason."""
    return await service.environment_diff(
        session, query.environments, query, now=clock(), order=order
    )
