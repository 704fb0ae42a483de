"""SQL for clusters and their current object state."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncRawCursor
from sqlalchemy import ColumnElement, RowMapping, and_, case, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from hub.database import Statements
from hub.models import AgentSession, Cluster, ClusterType, Environment, ObjectState, SnapshotPart


@dataclass(frozen=True, slots=True)
class ClusterIdentity:
    id: int
    name: str
    environment: str | None
    cluster_type: str | None


def _identity_query() -> Any:
    return (
        select(
            Cluster.id,
            Cluster.name,
            Environment.name.label("environment"),
            ClusterType.name.label("cluster_type"),
        )
        .outerjoin(Environment, Environment.id == Cluster.environment_id)
        .outerjoin(ClusterType, ClusterType.id == Cluster.cluster_type_id)
    )


async def find_by_token_hash(session: AsyncSession, token_hash: str) -> ClusterIdentity | None:
    row = (
        await session.execute(
            _identity_query().where(
                Cluster.token_hash == token_hash, Cluster.decommissioned_at.is_(None)
            )
        )
    ).one_or_none()
    return None if row is None else ClusterIdentity(**row._mapping)


def cluster_identity_sql(token_hash: str) -> str:
    """The identity a cluster token stands for, in plain SQL, its hash given by the SQL
    expression `token_hash` (a parameter, or a column where the ingest statement runs it
    once for every report of a batch)."""
    return f"""
SELECT c.id, c.name, e.name AS environment, ct.name AS cluster_type
FROM cluster c
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
WHERE c.token_hash = {token_hash} AND c.decommissioned_at IS NULL
"""  # noqa: S608 - the caller's expression names a parameter or a column, never input


_IDENTIFY = cluster_identity_sql("$1").encode()


async def identify_token_hash(statements: Statements, token_hash: str) -> ClusterIdentity | None:
    """find_by_token_hash as one prepared statement, for the ingest path."""
    async with statements.connection() as connection:
        cursor = AsyncRawCursor(connection)
        await cursor.execute(_IDENTIFY, (token_hash,), prepare=True)
        row = await cursor.fetchone()
    return None if row is None else ClusterIdentity(*row)


async def find_by_name(session: AsyncSession, name: str) -> ClusterIdentity | None:
    row = (await session.execute(_identity_query().where(Cluster.name == name))).one_or_none()
    return None if row is None else ClusterIdentity(**row._mapping)


async def create(
    session: AsyncSession,
    *,
    name: str,
    environment_id: int | None,
    cluster_type_id: int | None,
    labels: dict[str, str],
    token_hash: str,
) -> int | None:
    """Insert a cluster; None when the name is taken."""
    statement = (
        insert(Cluster)
        .values(
            name=name,
            environment_id=environment_id,
            cluster_type_id=cluster_type_id,
            labels=labels,
            token_hash=token_hash,
        )
        .on_conflict_do_nothing(index_elements=[Cluster.name])
        .returning(Cluster.id)
    )
    return (await session.execute(statement)).scalar_one_or_none()


async def set_token_hash(
    session: AsyncSession, name: str, token_hash: str | None, now: datetime
) -> bool:
    """Replace (or, with None, revoke) a cluster's token; False when there is no such cluster.

    A new token brings a decommissioned cluster back; revoking leaves it decommissioned."""
    values: dict[str, Any] = (
        {"token_hash": None, "token_revoked_at": now}
        if token_hash is None
        else {
            "token_hash": token_hash,
            "token_revoked_at": None,
            "decommissioned_at": None,
            "placed_at": case(
                (Cluster.decommissioned_at.is_not(None), now), else_=Cluster.placed_at
            ),
        }
    )
    statement = update(Cluster).where(Cluster.name == name).values(values).returning(Cluster.id)
    return (await session.execute(statement)).scalar_one_or_none() is not None


async def decommission(session: AsyncSession, name: str, now: datetime) -> bool:
    """Mark a cluster decommissioned as of `now` (kept when it was already), revoke its token
    and drop the parts of its snapshots not yet complete, which no part can complete now;
    False when there is no such cluster."""
    statement = (
        update(Cluster)
        .where(Cluster.name == name)
        .values(
            decommissioned_at=func.coalesce(Cluster.decommissioned_at, now),
            token_hash=None,
            token_revoked_at=func.coalesce(Cluster.token_revoked_at, now),
        )
        .returning(Cluster.id)
    )
    cluster_id = (await session.execute(statement)).scalar_one_or_none()
    if cluster_id is None:
        return False
    await session.execute(delete(SnapshotPart).where(SnapshotPart.cluster_id == cluster_id))
    return True


async def place(
    session: AsyncSession,
    name: str,
    environment_id: int,
    cluster_type_id: int | None,
    now: datetime,
) -> tuple[int, bool] | None:
    """Set a cluster's placement, a change of it as of `now`: its id and whether that changed
    it; None when there is no such cluster."""
    found = (
        await session.execute(
            select(Cluster.id, Cluster.environment_id, Cluster.cluster_type_id)
            .where(Cluster.name == name)
            .with_for_update()
        )
    ).one_or_none()
    if found is None:
        return None
    if (found.environment_id, found.cluster_type_id) == (environment_id, cluster_type_id):
        return found.id, False
    await session.execute(
        update(Cluster)
        .where(Cluster.id == found.id)
        .values(environment_id=environment_id, cluster_type_id=cluster_type_id, placed_at=now)
    )
    return found.id, True


async def decommissioned_at(session: AsyncSession, name: str) -> datetime | None:
    found: datetime | None = await session.scalar(
        select(Cluster.decommissioned_at).where(Cluster.name == name)
    )
    return found


async def list_clusters(
    session: AsyncSession,
    *,
    environment: str | None,
    cluster_type: str | None,
    decommissioned: bool,
    limit: int,
    offset: int,
) -> tuple[Sequence[RowMapping], int]:
    """A page of clusters with counts of their objects by readiness, and the total count."""
    live = aliased(ObjectState)
    counts = (
        select(
            live.cluster_id,
            func.count().label("objects"),
            func.count().filter(live.ready.is_(True)).label("ready"),
            func.count().filter(live.ready.is_(False)).label("failing"),
        )
        .where(live.removed_at.is_(None))
        .group_by(live.cluster_id)
        .subquery()
    )
    filters: list[ColumnElement[bool]] = []
    if not decommissioned:
        filters.append(Cluster.decommissioned_at.is_(None))
    if environment is not None:
        filters.append(Environment.name == environment)
    if cluster_type is not None:
        filters.append(ClusterType.name == cluster_type)
    base = (
        select(
            Cluster.name,
            Environment.name.label("environment"),
            ClusterType.name.label("cluster_type"),
            Cluster.claimed_environment,
            Cluster.claimed_cluster_type,
            Cluster.labels,
            Cluster.registered_at,
            Cluster.first_seen_at,
            Cluster.last_seen_at,
            (Cluster.token_hash.is_not(None)).label("token_active"),
            Cluster.decommissioned_at,
            func.coalesce(counts.c.objects, 0).label("objects"),
            func.coalesce(counts.c.ready, 0).label("ready"),
            func.coalesce(counts.c.failing, 0).label("failing"),
        )
        .outerjoin(Environment, Environment.id == Cluster.environment_id)
        .outerjoin(ClusterType, ClusterType.id == Cluster.cluster_type_id)
        .outerjoin(counts, counts.c.cluster_id == Cluster.id)
        .where(and_(True, *filters))
    )
    total = (await session.execute(select(func.count()).select_from(base.subquery()))).scalar_one()
    page = base.order_by(Cluster.name).limit(limit).offset(offset)
    return (await session.execute(page)).mappings().all(), total


async def cluster_detail(session: AsyncSession, name: str) -> RowMapping | None:
    statement = (
        select(
            Cluster.id,
            Cluster.name,
            Environment.name.label("environment"),
            ClusterType.name.label("cluster_type"),
            Cluster.claimed_environment,
            Cluster.claimed_cluster_type,
            Cluster.labels,
            Cluster.registered_at,
            Cluster.first_seen_at,
            Cluster.last_seen_at,
            (Cluster.token_hash.is_not(None)).label("token_active"),
            Cluster.decommissioned_at,
        )
        .outerjoin(Environment, Environment.id == Cluster.environment_id)
        .outerjoin(ClusterType, ClusterType.id == Cluster.cluster_type_id)
        .where(Cluster.name == name)
    )
    return (await session.execute(statement)).mappings().one_or_none()


async def latest_agent_session(session: AsyncSession, cluster_id: int) -> AgentSession | None:
    statement = (
        select(AgentSession)
        .where(AgentSession.cluster_id == cluster_id)
        .order_by(AgentSession.last_report_at.desc(), AgentSession.started_at.desc())
        .limit(1)
    )
    return (await session.scalars(statement)).one_or_none()


async def object_states(session: AsyncSession, cluster_id: int) -> list[ObjectState]:
    rows = await session.scalars(
        select(ObjectState)
        .where(ObjectState.cluster_id == cluster_id, ObjectState.removed_at.is_(None))
        .order_by(ObjectState.reconciler, ObjectState.kind, ObjectState.namespace, ObjectState.name)
    )
    return list(rows)
