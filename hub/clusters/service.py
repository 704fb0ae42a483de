"""Cluster registration and token lifecycle; cluster views."""

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from hub.clusters import repository
from hub.clusters.repository import ClusterIdentity
from hub.clusters.schemas import (
    AgentStatus,
    ClusterDetail,
    ClusterPage,
    ClusterPlacement,
    ClusterRegistration,
    ClusterSummary,
    ObjectStateOut,
    RegisteredCluster,
    SkippedKindOut,
)
from hub.drift import service as drift_service
from hub.errors import AlreadyExists, NotAuthenticated
from hub.placement import service as placement_service
from hub.placement.repository import ensure_cluster_type, ensure_environment
from hub.security import CLUSTER_TOKEN_PREFIX, hash_token, new_token


def _is_stale(last_seen_at: datetime | None, now: datetime, stale_after: timedelta) -> bool:
    return last_seen_at is None or now - last_seen_at > stale_after


async def register(
    session: AsyncSession, registration: ClusterRegistration, *, token_secret: str
) -> RegisteredCluster:
    environment_id = cluster_type_id = None
    if registration.environment is not None:
        environment_id = await ensure_environment(session, registration.environment)
        if registration.cluster_type is not None:
            cluster_type_id = await ensure_cluster_type(
                session, environment_id, registration.cluster_type
            )
    token = new_token(CLUSTER_TOKEN_PREFIX)
    created = await repository.create(
        session,
        name=registration.name,
        environment_id=environment_id,
        cluster_type_id=cluster_type_id,
        labels=registration.labels,
        token_hash=hash_token(token_secret, token),
    )
    if created is None:
        left = await repository.decommissioned_at(session, registration.name)
        if left is not None:
            raise AlreadyExists(
                f"cluster {registration.name!r} was decommissioned at "
                f"{left.isoformat(timespec='seconds')}; its name stays with its history: "
                "rotate its token to bring it back into service"
            )
        raise AlreadyExists(
            f"cluster {registration.name!r} is already registered; "
            "rotate its token instead of registering it again"
        )
    return RegisteredCluster(name=registration.name, token=token)


async def rotate_token(
    session: AsyncSession, name: str, *, token_secret: str, now: datetime
) -> RegisteredCluster:
    token = new_token(CLUSTER_TOKEN_PREFIX)
    if not await repository.set_token_hash(session, name, hash_token(token_secret, token), now):
        raise await placement_service.unknown_cluster(session, name)
    return RegisteredCluster(name=name, token=token)


async def revoke_token(session: AsyncSession, name: str, *, now: datetime) -> None:
    if not await repository.set_token_hash(session, name, None, now):
        raise await placement_service.unknown_cluster(session, name)


async def decommission(
    session: AsyncSession, name: str, *, now: datetime, stale_after: timedelta
) -> ClusterDetail:
    """Take a cluster out of service: its token stops working, and the gate, drift, the
    environment diff and the dashboards no longer expect it; its history stays. Decommissioning
    again changes nothing and answers the same time."""
    if not await repository.decommission(session, name, now):
        raise await placement_service.unknown_cluster(session, name)
    return await cluster_detail(session, name, now=now, stale_after=stale_after)


async def place(
    session: AsyncSession,
    name: str,
    placement: ClusterPlacement,
    *,
    now: datetime,
    stale_after: timedelta,
) -> ClusterDetail:
    """Set or change where a cluster counts (its environment and cluster type, created when
    new). A change counts from `now`: its open drift periods end (the next evaluation opens
    them in the new place); its history stays as it was."""
    environment_id = await ensure_environment(session, placement.environment)
    cluster_type_id = None
    if placement.cluster_type is not None:
        cluster_type_id = await ensure_cluster_type(session, environment_id, placement.cluster_type)
    placed = await repository.place(session, name, environment_id, cluster_type_id, now)
    if placed is None:
        raise await placement_service.unknown_cluster(session, name)
    cluster_id, changed = placed
    if changed:
        await drift_service.end_open_periods(session, cluster_id, now)
    return await cluster_detail(session, name, now=now, stale_after=stale_after)


async def authenticate(
    session: AsyncSession, token: str | None, *, token_secret: str
) -> ClusterIdentity:
    if not token:
        raise NotAuthenticated("a cluster token is required (Authorization: Bearer <token>)")
    cluster = await repository.find_by_token_hash(session, hash_token(token_secret, token))
    if cluster is None:
        raise NotAuthenticated("the cluster token is unknown or revoked")
    return cluster


async def list_clusters(
    session: AsyncSession,
    *,
    environment: str | None,
    cluster_type: str | None,
    decommissioned: bool = False,
    limit: int,
    offset: int,
    now: datetime,
    stale_after: timedelta,
) -> ClusterPage:
    """A page of the clusters in service; with `decommissioned`, those decommissioned too."""
    await placement_service.check_names(session, environment=environment, cluster_type=cluster_type)
    rows, total = await repository.list_clusters(
        session,
        environment=environment,
        cluster_type=cluster_type,
        decommissioned=decommissioned,
        limit=limit,
        offset=offset,
    )
    items = [
        ClusterSummary(**row, stale=_is_stale(row["last_seen_at"], now, stale_after))
        for row in rows
    ]
    return ClusterPage(items=items, total=total, limit=limit, offset=offset)


async def cluster_detail(
    session: AsyncSession, name: str, *, now: datetime, stale_after: timedelta
) -> ClusterDetail:
    row = await repository.cluster_detail(session, name)
    if row is None:
        raise await placement_service.unknown_cluster(session, name)
    objects = await repository.object_states(session, row["id"])
    agent = await repository.latest_agent_session(session, row["id"])
    fields = dict(row)
    fields.pop("id")
    return ClusterDetail(
        **fields,
        stale=_is_stale(row["last_seen_at"], now, stale_after),
        agent=None
        if agent is None
        else AgentStatus(
            boot_id=agent.boot_id,
            version=agent.agent_version,
            instance=agent.instance,
            started_at=agent.started_at,
            last_report_at=agent.last_report_at,
            sequence=agent.max_sequence,
            reports=agent.report_count,
            skipped_kinds=[SkippedKindOut(**skipped) for skipped in agent.skipped_kinds],
        ),
        objects=[ObjectStateOut.model_validate(item, from_attributes=True) for item in objects],
    )
