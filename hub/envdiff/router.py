"""Environment diff endpoint (read scope)."""

from typing import Annotated, Any

from fastapi import APIRouter, Query

from hub.deps import ClockDep, ReadAccess, ReadSessionDep
from hub.envdiff import service
from hub.envdiff.schemas import EnvironmentDiff

router = APIRouter(prefix="/api/v1", tags=["queries"], dependencies=[ReadAccess])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "Unknown environment."}}


@router.get("/diff", response_model=EnvironmentDiff, responses=_NOT_FOUND)
async def environment_diff(
    session: ReadSessionDep,
    clock: ClockDep,
    environment: Annotated[
        list[str],
        Query(
            description="Two or more environments, each once; rows show them in this order. "
            "Versions are compared in promotion order: the declared one, or this one."
        ),
    ],
    workload: str | None = None,
    cluster_type: str | None = None,
    deployment_target: Annotated[
        str | None,
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
        list[str] | None, Query(description="Platform config keys not to compare (repeatable).")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
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
    )
