"""Get-or-create of fleet dimensions, safe under concurrency."""

from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import ClusterType, Environment


async def ensure_environment(session: AsyncSession, name: str) -> int:
    statement = (
        insert(Environment)
        .values(name=name)
        .on_conflict_do_update(index_elements=[Environment.name], set_={"name": name})
        .returning(Environment.id)
    )
    return (await session.execute(statement)).scalar_one()


async def ensure_cluster_type(session: AsyncSession, environment_id: int, name: str) -> int:
    statement = (
        insert(ClusterType)
        .values(environment_id=environment_id, name=name)
        .on_conflict_do_update(
            index_elements=[ClusterType.environment_id, ClusterType.name], set_={"name": name}
        )
        .returning(ClusterType.id)
    )
    return (await session.execute(statement)).scalar_one()
