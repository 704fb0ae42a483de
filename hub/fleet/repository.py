"""SQL of the read-only views: fleet state and deployment history.

The views are defined by migrations (0004_query_views; deployment_history as of
0009_history_lookup) and shared with the dashboards; the tables below only name their columns
for SQLAlchemy. Nothing here writes.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    DateTime,
    Integer,
    RowMapping,
    String,
    and_,
    any_,
    case,
    cast,
    column,
    func,
    literal,
    or_,
    select,
    table,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from hub.database import plan_for_values
from hub.models import Cluster, ClusterDrift, ClusterType, Environment, ObjectState
from hub.sorting import Order

OBJECT_STATES = ("ready", "failing", "progressing", "suspended", "drifted")
DRIFT_COUNTS = (
    "drift_total",
    "drift_behind",
    "drift_failing",
    "drift_stale",
    "drift_live",
    "drift_other",
)

fleet_cluster_state = table(
    "fleet_cluster_state",
    column("cluster_id", Integer),
    column("cluster", String),
    column("environment_id", Integer),
    column("environment", String),
    column("environment_position", Integer),
    column("cluster_type_id", Integer),
    column("cluster_type", String),
    column("registered_at", DateTime(timezone=True)),
    column("first_seen_at", DateTime(timezone=True)),
    column("last_seen_at", DateTime(timezone=True)),
    column("objects", BigInteger),
    *(column(state, BigInteger) for state in OBJECT_STATES),
)

deployment_history = table(
    "deployment_history",
    column("deployed_at", DateTime(timezone=True)),
    column("cluster_id", Integer),
    column("cluster", String),
    column("environment_id", Integer),
    column("environment", String),
    column("environment_position", Integer),
    column("cluster_type_id", Integer),
    column("cluster_type", String),
    column("object_id", BigInteger),
    column("reconciler", String),
    column("kind", String),
    column("namespace", String),
    column("name", String),
    column("source_url", String),
    column("source_ref", String),
    column("source_path", String),
    column("applied_revision", String),
    column("applied_sha", String),
    column("applied_version", String),
    column("previous_revision", String),
    column("previous_sha", String),
    column("previous_version", String),
    column("ready", Boolean),
    column("reason", String),
)


@dataclass(frozen=True, slots=True)
class Placement:
    """Which clusters a query looks at: by environment and cluster type names."""

    environment: str | None = None
    cluster_type: str | None = None


def _placed(view: Any, placement: Placement) -> list[ColumnElement[bool]]:
    filters = []
    if placement.environment is not None:
        filters.append(view.c.environment == placement.environment)
    if placement.cluster_type is not None:
        filters.append(view.c.cluster_type == placement.cluster_type)
    return filters


def _agent(stale_before: datetime) -> ColumnElement[str]:
    """reporting, stale (silent since before `stale_before`) or never_reported."""
    last_seen_at = fleet_cluster_state.c.last_seen_at
    return case(
        (last_seen_at.is_(None), literal("never_reported")),
        (last_seen_at < stale_before, literal("stale")),
        else_=literal("reporting"),
    )


def _drift(stale_before: datetime) -> dict[str, ColumnElement[int]]:
    """A cluster's drift counts (DRIFT_COUNTS), as the drift listing counts them: from the
    drift job's `cluster_drift`, with staleness as of `stale_before`; the caller outer-joins
    it on the cluster."""
    last_seen_at = fleet_cluster_state.c.last_seen_at
    stale = or_(last_seen_at.is_(None), last_seen_at < stale_before)
    whole = func.greatest(func.coalesce(ClusterDrift.objects, 0), 1)

    def counted(*reasons: str) -> ColumnElement[int]:
        return func.coalesce(sum(getattr(ClusterDrift, reason) for reason in reasons), 0)

    return {
        "drift_total": case((stale, whole), else_=func.coalesce(ClusterDrift.drifted, 0)),
        "drift_behind": counted("behind"),
        "drift_failing": counted("failing"),
        "drift_stale": case((stale, whole), else_=0),
        "drift_live": counted("live_drift"),
        "drift_other": counted("diverged", "unknown_revision", "not_applied", "config_mismatch"),
    }


def _with_drift(view: Any) -> Any:
    return view.outerjoin(ClusterDrift, ClusterDrift.cluster_id == view.c.cluster_id)


def _environment_order(name: Any, position: Any) -> list[Any]:
    """Promotion order where the control plane declared it, then by name; unplaced last."""
    return [position.asc().nulls_last(), name.asc().nulls_last()]


async def declared_groups(session: AsyncSession, placement: Placement) -> Sequence[RowMapping]:
    """Environments with their cluster types (None for an environment without any)."""
    filters = []
    if placement.environment is not None:
        filters.append(Environment.name == placement.environment)
    if placement.cluster_type is not None:
        filters.append(ClusterType.name == placement.cluster_type)
    statement = (
        select(
            Environment.name.label("environment"),
            Environment.position.label("environment_position"),
            ClusterType.name.label("cluster_type"),
        )
        .outerjoin(ClusterType, ClusterType.environment_id == Environment.id)
        .where(and_(True, *filters))
        .order_by(*_environment_order(Environment.name, Environment.position), ClusterType.name)
    )
    return (await session.execute(statement)).mappings().all()


async def group_counts(
    session: AsyncSession, placement: Placement, *, stale_before: datetime
) -> Sequence[RowMapping]:
    """Clusters (by agent, and those drifted) and their objects counted per (environment,
    cluster type) they belong to."""
    view = fleet_cluster_state
    agent = _agent(stale_before)
    drift = _drift(stale_before)
    statement = (
        select(
            view.c.environment,
            view.c.environment_position,
            view.c.cluster_type,
            func.count().label("clusters"),
            func.count().filter(agent == "reporting").label("reporting"),
            func.count().filter(agent == "stale").label("stale"),
            func.count().filter(agent == "never_reported").label("never_reported"),
            func.count().filter(drift["drift_total"] > 0).label("drift_clusters"),
            *(
                func.sum(view.c[name]).cast(BigInteger).label(name)
                for name in ("objects", *OBJECT_STATES)
            ),
            *(func.sum(count).cast(BigInteger).label(name) for name, count in drift.items()),
        )
        .select_from(_with_drift(view))
        .where(and_(True, *_placed(view, placement)))
        .group_by(view.c.environment, view.c.environment_position, view.c.cluster_type)
        .order_by(
            *_environment_order(view.c.environment, view.c.environment_position),
            view.c.cluster_type.asc().nulls_last(),
        )
    )
    return (await session.execute(statement)).mappings().all()


def _agent_rank(stale_before: datetime) -> ColumnElement[int]:
    """The agent from the furthest from fine to fine: never reported, stale, reporting."""
    last_seen_at = fleet_cluster_state.c.last_seen_at
    return case((last_seen_at.is_(None), 0), (last_seen_at < stale_before, 1), else_=2)


def _column(name: str) -> Callable[[datetime], list[Any]]:
    return lambda _: [fleet_cluster_state.c[name]]


# The columns a page of clusters sorts by, each as what it orders by (given the moment before
# which an agent is stale). Either way None comes last, and ties keep the fleet's order.
CLUSTER_SORTS: Mapping[str, Callable[[datetime], list[Any]]] = {
    "cluster": _column("cluster"),
    "placement": lambda _: [
        fleet_cluster_state.c.environment_position,
        fleet_cluster_state.c.environment,
        fleet_cluster_state.c.cluster_type,
    ],
    "agent": lambda stale_before: [_agent_rank(stale_before)],
    "last_report": _column("last_seen_at"),
    "objects": _column("objects"),
    "ready": _column("ready"),
    "failing": _column("failing"),
    "progressing": _column("progressing"),
    "suspended": _column("suspended"),
    "live_drift": _column("drifted"),
}


def _cluster_order(order: Order, stale_before: datetime) -> list[Any]:
    """`order`, then the fleet's own: promotion order, cluster type, name."""
    view = fleet_cluster_state
    chosen = [] if order.column is None else CLUSTER_SORTS[order.column](stale_before)
    return [
        *((key.desc() if order.descending else key.asc()).nulls_last() for key in chosen),
        *_environment_order(view.c.environment, view.c.environment_position),
        view.c.cluster_type.asc().nulls_last(),
        view.c.cluster,
    ]


async def cluster_page(
    session: AsyncSession,
    placement: Placement,
    *,
    stale_before: datetime,
    order: Order,
    limit: int,
    offset: int,
) -> Sequence[RowMapping]:
    """A page of the clusters in `order`, with their objects by state and their drift.

    The page's clusters are picked first, by what `order` reads alone (the view leaves out
    what no column asks for), then their counts and drift read.
    """
    view = fleet_cluster_state
    picked = (
        select(view.c.cluster_id)
        .where(and_(True, *_placed(view, placement)))
        .order_by(*_cluster_order(order, stale_before))
        .limit(limit)
        .offset(offset)
    )
    ids = cast(list(await session.scalars(picked)), ARRAY(Integer))
    statement = (
        select(
            view.c.cluster.label("name"),
            view.c.environment,
            view.c.cluster_type,
            view.c.first_seen_at,
            view.c.last_seen_at,
            _agent(stale_before).label("agent"),
            view.c.objects,
            *(view.c[name] for name in OBJECT_STATES),
            *(count.label(name) for name, count in _drift(stale_before).items()),
        )
        .select_from(_with_drift(view))
        .where(view.c.cluster_id == any_(ids))
        .order_by(func.array_position(ids, view.c.cluster_id))
    )
    return (await session.execute(statement)).mappings().all()


# Objects of one name, at most, that a history statement lists by id (see _history_filters).
_LISTED_OBJECTS = 1000


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    placement: Placement
    cluster: str | None = None
    object_name: str | None = None
    since: datetime | None = None
    until: datetime | None = None


async def _history_filters(
    session: AsyncSession, criteria: HistoryFilter
) -> list[ColumnElement[bool]]:
    """Filters on the clusters and objects as lists of ids, looked up first. The history
    statement is then planned with the lists in hand (see history_page), so the planner can tell
    one cluster (walk its transitions) from thousands (walk the newest transitions of all).

    An object name found on more than _LISTED_OBJECTS objects is walked that way in any case,
    and its ids stay in the database: sent back as a list of ten thousand, they cost more to
    fetch, send and plan with than the walk itself. `IS TRUE` keeps the IN a filter that
    hashes the ids once; as a join, PostgreSQL looks each walked transition's object up."""
    view = deployment_history
    filters = []
    cluster_ids = select(Cluster.id)
    placement = criteria.placement
    if placement.environment is not None:
        cluster_ids = cluster_ids.join(Environment, Environment.id == Cluster.environment_id)
        cluster_ids = cluster_ids.where(Environment.name == placement.environment)
    if placement.cluster_type is not None:
        cluster_ids = cluster_ids.join(ClusterType, ClusterType.id == Cluster.cluster_type_id)
        cluster_ids = cluster_ids.where(ClusterType.name == placement.cluster_type)
    if criteria.cluster is not None:
        cluster_ids = cluster_ids.where(Cluster.name == criteria.cluster)
    if cluster_ids.whereclause is not None:
        ids = list(await session.scalars(cluster_ids))
        # One cluster by equality: each chunk's index on (cluster_id, observed_at) then walks
        # its newest transitions in order, where `= ANY` has TimescaleDB walk every cluster's.
        filters.append(
            view.c.cluster_id == ids[0]
            if len(ids) == 1
            else view.c.cluster_id == any_(cast(ids, ARRAY(Integer)))
        )
    if criteria.object_name is not None:
        # In the collation of ix_object_state_name_c, which ingest's statements cannot use.
        object_ids = select(ObjectState.id).where(
            ObjectState.name.collate("C") == criteria.object_name
        )
        ids = list(await session.scalars(object_ids.limit(_LISTED_OBJECTS + 1)))
        if len(ids) <= _LISTED_OBJECTS:
            filters.append(view.c.object_id == any_(cast(ids, ARRAY(BigInteger))))
        else:
            filters.append(view.c.object_id.in_(object_ids).is_(true()))
    if criteria.since is not None:
        filters.append(view.c.deployed_at >= criteria.since)
    if criteria.until is not None:
        filters.append(view.c.deployed_at < criteria.until)
    return filters


HISTORY_COLUMNS: Sequence[str] = (
    "deployed_at",
    "cluster",
    "environment",
    "cluster_type",
    "reconciler",
    "kind",
    "namespace",
    "name",
    "source_url",
    "source_ref",
    "source_path",
    "applied_revision",
    "applied_sha",
    "applied_version",
    "previous_revision",
    "previous_sha",
    "previous_version",
    "ready",
    "reason",
)


async def history_page(
    session: AsyncSession, criteria: HistoryFilter, *, limit: int, offset: int
) -> Sequence[RowMapping]:
    """Newest changes first; up to `limit` rows from `offset` (the caller asks for one more
    than it shows, to know whether another page follows).

    Which walk is fast depends on the values filtered by (how many clusters or objects, how
    far back), so the statement is planned for each request's values: a plan prepared for
    any values, as psycopg's prepared statements come to use, walks every transition since
    `since` to find one cluster's.
    """
    view = deployment_history
    filters = await _history_filters(session, criteria)
    await plan_for_values(session)
    statement = (
        select(*(view.c[name] for name in HISTORY_COLUMNS))
        .where(and_(True, *filters))
        # Every key column, so a page boundary never falls between rows of equal sort key.
        .order_by(
            view.c.deployed_at.desc(),
            view.c.cluster,
            view.c.reconciler,
            view.c.kind,
            view.c.namespace,
            view.c.name,
            view.c.applied_sha,
            view.c.applied_version,
        )
        .limit(limit)
        .offset(offset)
    )
    return (await session.execute(statement)).mappings().all()
