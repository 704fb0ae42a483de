"""The names a question refers to: an environment, cluster type, cluster or workload that names
nothing is an error on every endpoint, naming what is unknown and what exists."""

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from hub.errors import UnknownCluster, UnknownClusterType, UnknownEnvironment, UnknownWorkload
from hub.placement import repository
from hub.placement.repository import PlacedEnvironment

# Names listed at most in an error; a fleet of thousands of clusters is summed up after them.
LISTED = 20


def known(names: Sequence[str], total: int | None = None) -> str:
    """`known: dev, stage`; `known: a, b, … (3,000 in all)`; `none known yet`."""
    total = len(names) if total is None else total
    if not total:
        return "none known yet"
    shown = ", ".join(names[:LISTED])
    return f"known: {shown}" + (f", … ({total:,} in all)" if total > LISTED else "")


def _unknown_environments(unknown: Sequence[str], names: Sequence[str]) -> UnknownEnvironment:
    named = ", ".join(repr(name) for name in unknown)
    what = f"environment {named} is" if len(unknown) == 1 else f"environments {named} are"
    return UnknownEnvironment(f"{what} unknown ({known(names)})")


async def unknown_environment(session: AsyncSession, name: str) -> UnknownEnvironment:
    return _unknown_environments([name], await repository.environment_names(session))


async def environments(session: AsyncSession, names: Sequence[str] = ()) -> list[PlacedEnvironment]:
    """The environments named (every one when none is), in promotion order; UnknownEnvironment
    names each that is not one."""
    every = await repository.environments(session)
    if not names:
        return every
    placed = {environment.name for environment in every}
    unknown = sorted(set(names) - placed)
    if unknown:
        raise _unknown_environments(unknown, [environment.name for environment in every])
    return [environment for environment in every if environment.name in names]


async def environment_id(session: AsyncSession, name: str) -> int:
    """The environment's id; UnknownEnvironment if there is none of that name."""
    (found,) = await environments(session, [name])
    return found.id


async def unknown_cluster_type(
    session: AsyncSession, name: str, environment: str | None
) -> UnknownClusterType:
    names = await repository.cluster_type_names(session, environment)
    where = "" if environment is None else f" in environment {environment!r}"
    return UnknownClusterType(f"cluster type {name!r} is unknown{where} ({known(names)})")


async def unknown_cluster(session: AsyncSession, name: str) -> UnknownCluster:
    names, total = await repository.cluster_names(session, LISTED)
    return UnknownCluster(f"cluster {name!r} is unknown ({known(names, total)})")


async def unknown_workload(session: AsyncSession, name: str) -> UnknownWorkload:
    names = await repository.workload_names(session)
    return UnknownWorkload(f"workload {name!r} is unknown ({known(names)})")


async def check_names(
    session: AsyncSession,
    *,
    environment: str | None = None,
    cluster_type: str | None = None,
    cluster: str | None = None,
    workload: str | None = None,
) -> None:
    """Raises the Unknown… error of the first name given that names nothing (a cluster type
    within the environment given)."""
    if environment is not None and environment not in await repository.environment_names(session):
        raise await unknown_environment(session, environment)
    if cluster_type is not None and cluster_type not in await repository.cluster_type_names(
        session, environment
    ):
        raise await unknown_cluster_type(session, cluster_type, environment)
    if cluster is not None and not await repository.cluster_exists(session, cluster):
        raise await unknown_cluster(session, cluster)
    if workload is not None and not await repository.workload_exists(session, workload):
        raise await unknown_workload(session, workload)
