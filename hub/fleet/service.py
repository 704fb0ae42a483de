"""Fleet state and deployment history: filters and pages in, API shapes out."""

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import RowMapping
from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.fleet import HistoryQuery
from hub.errors import InvalidInput
from hub.fleet import repository
from hub.fleet.repository import (
    CLUSTER_SORTS,
    DRIFT_COUNTS,
    OBJECT_STATES,
    HistoryFilter,
    Placement,
)
from hub.fleet.schemas import (
    ClusterTypeState,
    Deployment,
    DeploymentPage,
    EnvironmentState,
    FleetCluster,
    FleetClusterPage,
    FleetState,
    GroupState,
    ObjectCounts,
)
from hub.placement import service as placement_service
from hub.sorting import OWN_ORDER, Order

# The columns a page of clusters sorts by.
CLUSTER_COLUMNS = tuple(CLUSTER_SORTS)

_CLUSTER_COUNTS = ("clusters", "reporting", "stale", "never_reported", "drift_clusters")
_COUNTS = (*_CLUSTER_COUNTS, "objects", *OBJECT_STATES, *DRIFT_COUNTS)


def _objects(counts: Mapping[Any, Any]) -> ObjectCounts:
    states = {state: counts[state] for state in OBJECT_STATES}
    return ObjectCounts(total=counts["objects"], **states)


def _counts(row: RowMapping) -> Counter[str]:
    return Counter({name: row[name] for name in _COUNTS})


def _group(counts: Mapping[str, int]) -> dict[str, Any]:
    return {name: counts[name] for name in (*_CLUSTER_COUNTS, *DRIFT_COUNTS)} | {
        "objects": _objects(counts)
    }


# Cluster types by name, each with its counts, in one environment.
_Types = dict[str | None, Counter[str]]


def _environments(
    declared: Sequence[RowMapping], counted: Sequence[RowMapping]
) -> list[EnvironmentState]:
    """Counted groups placed under their environment and cluster type.

    Declared environments and cluster types come first, in promotion order, so the empty ones
    show too; the counted groups then only add clusters placed in no cluster type (after the
    named ones, as sorted) and clusters placed in no environment (last).
    """
    positions: dict[str | None, int | None] = {}
    environments: dict[str | None, _Types] = {}
    for row in (*declared, *counted):
        positions[row["environment"]] = row["environment_position"]
        environments.setdefault(row["environment"], {})
    for row in declared:
        if row["cluster_type"] is not None:
            environments[row["environment"]][row["cluster_type"]] = Counter()
    for row in counted:
        types = environments[row["environment"]]
        types[row["cluster_type"]] = types.get(row["cluster_type"], Counter()) + _counts(row)

    states = []
    for name, types in environments.items():
        total = sum(types.values(), Counter[str]())
        states.append(
            EnvironmentState(
                name=name,
                position=positions[name],
                cluster_types=[
                    ClusterTypeState(name=type_name, **_group(counts))
                    for type_name, counts in types.items()
                ],
                **_group(total),
            )
        )
    return states


async def fleet_state(
    session: AsyncSession,
    *,
    environment: str | None,
    cluster_type: str | None,
    limit: int,
    offset: int,
    now: datetime,
    stale_after: timedelta,
    order: Order = OWN_ORDER,
) -> FleetState:
    await placement_service.check_names(session, environment=environment, cluster_type=cluster_type)
    placement = Placement(environment=environment, cluster_type=cluster_type)
    stale_before = now - stale_after
    declared = await repository.declared_groups(session, placement)
    counted = await repository.group_counts(session, placement, stale_before=stale_before)
    totals = sum((_counts(row) for row in counted), Counter[str]())
    rows = await repository.cluster_page(
        session, placement, stale_before=stale_before, order=order, limit=limit, offset=offset
    )
    clusters = [
        FleetCluster(
            name=row["name"],
            environment=row["environment"],
            cluster_type=row["cluster_type"],
            first_seen_at=row["first_seen_at"],
            last_seen_at=row["last_seen_at"],
            agent=row["agent"],
            objects=_objects(row),
            **{name: row[name] for name in DRIFT_COUNTS},
        )
        for row in rows
    ]
    return FleetState(
        evaluated_at=now,
        stale_after_seconds=int(stale_after.total_seconds()),
        totals=GroupState(**_group(totals)),
        environments=_environments(declared, counted),
        clusters=FleetClusterPage(
            items=clusters, total=totals["clusters"], limit=limit, offset=offset
        ),
    )


async def deployment_history(session: AsyncSession, query: HistoryQuery) -> DeploymentPage:
    since, until, limit, offset = query.since, query.until, query.limit, query.offset
    if since is not None and until is not None and since >= until:
        raise InvalidInput(f"since: {since.isoformat()} is not before until {until.isoformat()}")
    await placement_service.check_names(
        session,
        environment=query.environment,
        cluster_type=query.cluster_type,
        cluster=query.cluster,
    )
    criteria = HistoryFilter(
        placement=Placement(environment=query.environment, cluster_type=query.cluster_type),
        cluster=query.cluster,
        object_name=query.object_name,
        since=since,
        until=until,
    )
    rows = await repository.history_page(session, criteria, limit=limit + 1, offset=offset)
    return DeploymentPage(
        items=[Deployment(**row) for row in rows[:limit]],
        limit=limit,
        offset=offset,
        next_offset=offset + limit if len(rows) > limit else None,
    )
