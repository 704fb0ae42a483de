"""Cluster endpoints: list and inspect (read scope), register and manage tokens (admin)."""

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, status

from hub.clusters import service
from hub.clusters.schemas import ClusterDetail, ClusterPage, ClusterRegistration, RegisteredCluster
from hub.deps import AdminAccess, ClockDep, ReadAccess, ReadSessionDep, SessionDep, SettingsDep

router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])


@router.get("", response_model=ClusterPage, dependencies=[ReadAccess])
async def list_clusters(
    session: ReadSessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    environment: str | None = None,
    cluster_type: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ClusterPage:
    return await service.list_clusters(
        session,
        environment=environment,
        cluster_type=cluster_type,
        limit=limit,
        offset=offset,
        now=clock(),
        stale_after=timedelta(seconds=settings.stale_after_seconds),
    )


@router.get("/{name}", response_model=ClusterDetail, dependencies=[ReadAccess])
async def get_cluster(
    name: str, session: ReadSessionDep, settings: SettingsDep, clock: ClockDep
) -> ClusterDetail:
    return await service.cluster_detail(
        session, name, now=clock(), stale_after=timedelta(seconds=settings.stale_after_seconds)
    )


@router.post(
    "",
    response_model=RegisteredCluster,
    status_code=status.HTTP_201_CREATED,
    dependencies=[AdminAccess],
)
async def register_cluster(
    registration: ClusterRegistration, session: SessionDep, settings: SettingsDep
) -> RegisteredCluster:
    return await service.register(
        session, registration, token_secret=settings.token_secret.get_secret_value()
    )


@router.post("/{name}/token", response_model=RegisteredCluster, dependencies=[AdminAccess])
async def rotate_cluster_token(
    name: str, session: SessionDep, settings: SettingsDep, clock: ClockDep
) -> RegisteredCluster:
    return await service.rotate_token(
        session, name, token_secret=settings.token_secret.get_secret_value(), now=clock()
    )


@router.delete("/{name}/token", status_code=status.HTTP_204_NO_CONTENT, dependencies=[AdminAccess])
async def revoke_cluster_token(name: str, session: SessionDep, clock: ClockDep) -> None:
    await service.revoke_token(session, name, now=clock())
