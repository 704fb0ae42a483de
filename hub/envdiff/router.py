"""Environment diff endpoint (read scope)."""

from typing import Annotated

from fastapi import APIRouter, Query

from hub.client.params import Limit, Offset, Text, TextList
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
    environment: Annotated[
        TextList,
        Query(
            description="Two or more environments, each once; rows show them in this order. "
            "Versions are compared in promotion order: the declared one, or this one."
        ),
    ],
    workload: Text | None = None,
    cluster_type: Text | None = None,
    deployment_target: Annotated[
        Text | None,
        Query(description="Rows where this target is assigned: <workload>-<target> or <target>."),
    ] = None,
    only_differences: Annotated[
        bool,
        Query(
            description="Only rows that differ: an assignment in some environments only, "
            "another desired version or pin, a config key, or clusters that do not run what "
            "their environment is meant to (failed, drifted)."
        ),
    ] = True,
    ignore_key: Annotated[
        TextList | None, Query(description="Platform config keys not to compare (repeatable).")
    ] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> EnvironmentDiff:
    """Per workload and cluster type, what each environment is meant to run and what its
    clusters run, side by side, with every difference and its reason."""
    return await service.environment_diff(
        session,
        environments=environment,
        workload=workload,
        cluster_type=cluster_type,
        deployment_target=deployment_target,
        only_differences=only_differences,
        ignored_keys=ignore_key or [],
        limit=limit,
        offset=offset,
        now=clock(),
        order=order,
    )
