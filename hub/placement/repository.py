"""Get-or-create of fleet dimensions, safe under concurrency; their names and ids; the fleet in
parts, and how far back the jobs that read what changed look."""

from collections.abc import Sequence
from datetime import timedelta
from typing import NamedTuple

from sqlalchemy import Select, func, select, update
from sqlalchemy.dialects.postgresql import Insert, insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import AssignmentRevision, Cluster, ClusterType, Environment

# Clusters (by id) in one part of the fleet. Jobs that pass over every object (the drift
# evaluation, the env diff summary) do so a part at a time, with pauses between
# (hub/background/pacing.py). So no statement holds a core for long while reports come in, and
# ingest catches up between parts. Some 5,000 objects: a few hundredths of a second of a core
# each. The env diff keeps its summary per part (deployed_part): a release that changes the
# size must make its next round a full pass (deployed_refresh.full_at NULL, by a migration).
PART_CLUSTERS = 250
# Objects in one part of what changed, for a job that judges them by id (the drift evaluation).
PART_OBJECTS = 5_000
# How far before its last round's `now` a job that reads what changed since (the drift
# evaluation, the env diff summary) looks for objects written (`object_state.written_at`): a
# report is stamped with the hub's time when it arrives and commits a little later (queued,
# then written in a batch), possibly by a replica whose clock is a little off.
WRITTEN_OVERLAP = timedelta(minutes=5)


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
    """The id of the row `find` finds, inserted with `values` if there is none. An existing row
    is only read. Every row referencing it (a cluster, the drift totals) holds a key-share lock
    on it, and an upsert would wait for those locks, and deadlock with one that waits in turn
    for this transaction. A row inserted meanwhile by another transaction is waited for, then
    read."""
    found = await session.scalar(find)
    if found is None:
        found = await session.scalar(
            create.values(**values).on_conflict_do_nothing().returning(create.table.c.id)
        )
    if found is None:
        found = (await session.execute(find)).scalar_one()
    return found


# --- names, to say what exists when a question names what does not ---------------------------


class PlacedEnvironment(NamedTuple):
    name: str
    id: int
    # In the declared promotion order; None: not declared.
    position: int | None


async def environments(session: AsyncSession) -> list[PlacedEnvironment]:
    """Every environment with its id and position, in promotion order (declared first, then
    by name)."""
    rows = await session.execute(
        select(Environment.name, Environment.id, Environment.position).order_by(
            Environment.position.asc().nulls_last(), Environment.name
        )
    )
    return [PlacedEnvironment(name, id_, position) for name, id_, position in rows]


async def environment_names(session: AsyncSession) -> list[str]:
    """Every environment, in promotion order (declared first, then by name)."""
    rows = await session.scalars(
        select(Environment.name).order_by(Environment.position.asc().nulls_last(), Environment.name)
    )
    return list(rows)


async def cluster_type_names(session: AsyncSession, environment: str | None) -> list[str]:
    """The cluster types of one environment (of every one: None), each name once."""
    statement = select(ClusterType.name).distinct().order_by(ClusterType.name)
    if environment is not None:
        statement = statement.join(Environment, Environment.id == ClusterType.environment_id)
        statement = statement.where(Environment.name == environment)
    return list(await session.scalars(statement))


async def cluster_names(session: AsyncSession, limit: int) -> tuple[list[str], int]:
    """The first `limit` registered clusters by name, and how many there are."""
    names = await session.scalars(select(Cluster.name).order_by(Cluster.name).limit(limit))
    total = await session.scalar(select(func.count()).select_from(Cluster))
    return list(names), total or 0


# A workload is known by the assignments the harvester found for it (their Namespace's label).
async def workload_names(session: AsyncSession) -> list[str]:
    workload = AssignmentRevision.workload
    statement = select(workload).where(workload.is_not(None)).distinct().order_by(workload)
    return [name for name in await session.scalars(statement) if name is not None]


async def cluster_exists(session: AsyncSession, name: str) -> bool:
    return await session.scalar(select(Cluster.id).where(Cluster.name == name)) is not None


async def workload_exists(session: AsyncSession, name: str) -> bool:
    found = await session.scalar(
        select(AssignmentRevision.id).where(AssignmentRevision.workload == name).limit(1)
    )
    return found is not None
