"""Cluster endpoints: list and inspect (read scope), register, place and manage tokens
(admin)."""

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Query, status

from hub.background.runner import run_after_placement
from hub.client.params import Limit, Offset, Text
from hub.clusters import service
from hub.clusters.schemas import (
    ClusterDetail,
    ClusterPage,
    ClusterPlacement,
    ClusterRegistration,
    RegisteredCluster,
)
from hub.deps import (
    AdminAccess,
    ClockDep,
    JobsDep,
    ReadAccess,
    ReadContextDep,
    ReadSessionDep,
    SessionDep,
    SettingsDep,
)
from hub.errors import error_response, error_responses

router = APIRouter(
    prefix="/api/v1/clusters",
    tags=["clusters"],
    responses=error_responses(401, 403, 422, 503),
)

_NOT_FOUND = error_response(404, "No cluster of that name.")


@router.get(
    "",
    response_model=ClusterPage,
    dependencies=[ReadAccess],
    responses=error_response(404, "Unknown environment or cluster type."),
)
async def list_clusters(
    session: ReadSessionDep,
    context: ReadContextDep,
    environment: Text | None = None,
    cluster_type: Text | None = None,
    decommissioned: Annotated[
        bool, Query(description="List decommissioned clusters too (they are left out).")
    ] = False,
    limit: Limit = 100,
    offset: Offset = 0,
) -> ClusterPage:
    return await service.list_clusters(
        session,
        environment=environment,
        cluster_type=cluster_type,
        decommissioned=decommissioned,
        limit=limit,
        offset=offset,
        now=context.now,
        stale_after=context.stale_after,
    )


@router.get(
    "/{name}", response_model=ClusterDetail, dependencies=[ReadAccess], responses=_NOT_FOUND
)
async def get_cluster(
    name: Text, session: ReadSessionDep, context: ReadContextDep
) -> ClusterDetail:
    return await service.cluster_detail(
        session, name, now=context.now, stale_after=context.stale_after
    )


@router.post(
    "",
    response_model=RegisteredCluster,
    status_code=status.HTTP_201_CREATED,
    dependencies=[AdminAccess],
    responses=error_responses(400)
    | error_response(409, "A cluster of that name is registered already."),
)
async def register_cluster(
    registration: ClusterRegistration, session: SessionDep, settings: SettingsDep
) -> RegisteredCluster:
    return await service.register(
        session, registration, token_secret=settings.token_secret.get_secret_value()
    )


@router.post(
    "/{name}/token",
    response_model=RegisteredCluster,
    dependencies=[AdminAccess],
    responses=_NOT_FOUND,
)
async def rotate_cluster_token(
    name: Text, session: SessionDep, settings: SettingsDep, clock: ClockDep
) -> RegisteredCluster:
    return await service.rotate_token(
        session, name, token_secret=settings.token_secret.get_secret_value(), now=clock()
    )


@router.delete(
    "/{name}/token",
    status_code=status.HTTP_204_NO_CONTENT,
    dependencies=[AdminAccess],
    responses=_NOT_FOUND,
)
async def revoke_cluster_token(name: Text, session: SessionDep, clock: ClockDep) -> None:
    await service.revoke_token(session, name, now=clock())


@router.post(
    "/{name}/decommission",
    response_model=ClusterDetail,
    dependencies=[AdminAccess],
    responses=_NOT_FOUND,
)
async def decommission_cluster(
    name: Text,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    jobs: JobsDep,
    after: BackgroundTasks,
) -> ClusterDetail:
    """Take a cluster out of service: its token is refused from now on; the gate, drift, the
    environment diff and the dashboards stop expecting it (their kept results are refreshed at
    once); its history stays, and its detail says when it left. Decommissioning it again
    answers the same `decommissioned_at`. Its name stays with its history: rotating its token
    (POST /api/v1/clusters/{name}/token) brings it back into service."""
    detail = await service.decommission(
        session, name, now=clock(), stale_after=settings.stale_after
    )
    # After the response, so after the commit: the jobs see the cluster decommissioned.
    after.add_task(run_after_placement, jobs)
    return detail


@router.put(
    "/{name}/placement",
    response_model=ClusterDetail,
    dependencies=[AdminAccess],
    responses=_NOT_FOUND | error_responses(400),
)
async def place_cluster(
    name: Text,
    placement: ClusterPlacement,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    jobs: JobsDep,
    after: BackgroundTasks,
) -> ClusterDetail:
    """Set or change the environment and cluster type a cluster counts in (created when new);
    its agent's claim never does. A change counts from now: the gate, drift, DORA and the
    environment diff count the cluster in its new place, its open drift periods end, and its
    history stays as it was."""
    detail = await service.place(
        session,
        name,
        placement,
        now=clock(),
        stale_after=settings.stale_after,
    )
    # After the response, so after the commit: the jobs see the cluster in its new place.
    after.add_task(run_after_placement, jobs)
    return detail
