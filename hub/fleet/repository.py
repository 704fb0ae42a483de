"""Get-or-create of fleet dimensions, safe under concurrency; the fleet in parts."""

from collections.abc import Sequence

from sqlalchemy import Select, func, select, update
from sqlalchemy.dialects.postgresql import Insert, insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import Cluster, ClusterType, Environment

# Clusters (by id) in one part of the fleet: jobs that pass over every object of the fleet (the
# drift evaluation, the env diff summary) do so a part at a time with a pause of PART_PACE
# seconds between parts, so that no statement holds a core for long while reports come in and
# what the parts took from report ingest is caught up before the next. Some 5,000 objects: a
# few hundredths of a second of a core each.
PART_CLUSTERS = 250
PART_PACE = 0.05


async def fleet_parts(session: AsyncSession) -> list[tuple[int, int]]:
    """The parts of the fleet as [first, end) ranges of cluster ids, up to the last cluster."""
    last: int | None = await session.scalar(select(func.max(Cluster.id)))
    count = 0 if last is None else last // PART_CLUSTERS + 1
    return [(part * PART_CLUSTERS, (part + 1) * PART_CLUSTERS) for part in range(count)]


async def ensure_environment(session: AsyncSession, name: str) -> int:
    return await _get_or_create(
        session,
        select(Environment.id).where(Environment.name == name),
        insert(Environment),
        name=name,
    )


async def order_environments(session: AsyncSession, names: Sequence[str]) -> None:
    """The declared promotion order, first to last: each environment named (created if new)
    takes its place in it, any other none."""
    await session.execute(
        update(Environment)
        .where(Environment.name.not_in(names), Environment.position.is_not(None))
        .values(position=None)
    )
    if names:
        statement = insert(Environment).values(
            [{"name": name, "position": position} for position, name in enumerate(names)]
        )
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[Environment.name],
                set_={"position": statement.excluded.position},
                where=Environment.position.is_distinct_from(statement.excluded.position),
            )
        )


async def ensure_cluster_type(session: AsyncSession, environment_id: int, name: str) -> int:
    return await _get_or_create(
        session,
        select(ClusterType.id).where(
            ClusterType.environment_id == environment_id, ClusterType.name == name
        ),
        insert(ClusterType),
        environment_id=environment_id,
        name=name,
    )


async def _get_or_create(
    session: AsyncSession, find: Select[int], create: Insert, **values: object
) -> int:
    """The id of the row `find` finds, inserted with `values` if there is none. An existing
    row is only read: every row referencing it (a cluster, the drift totals) holds a key-share
    lock on it until its transaction ends, and an upsert locking it as if to change its key
    would wait for those (and deadlock with one waiting in turn for this transaction). A row
    inserted meanwhile by another transaction is waited for, then read."""
    found = await session.scalar(find)
    if found is None:
        found = await session.scalar(
            create.values(**values).on_conflict_do_nothing().returning(create.table.c.id)
        )
    if found is None:
        found = (await session.execute(find)).scalar_one()
    return found
