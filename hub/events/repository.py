"""SQL for the outbox: events written and matched to subscriptions, the deliveries due and
their attempts, the subscriptions, and what the retention job and /metrics read."""

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    CursorResult,
    DateTime,
    String,
    Text,
    and_,
    any_,
    delete,
    exists,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, array, insert
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from hub.models import EventDelivery, EventState, EventSubscription, OutboxEvent

_PENDING = "pending"
# The tables' columns, typed as columns for the filters' SQL.
_EVENT = OutboxEvent.__table__.c
_SUBSCRIPTION = EventSubscription.__table__.c


def _passes(value: ColumnElement[Any], names: ColumnElement[Any]) -> ColumnElement[bool]:
    """An event's dimension passes a subscription's filter on it: no filter, a listed value, or
    no value where the subscription lets those through."""
    return or_(
        func.cardinality(names) == 0,
        value == any_(names),
        and_(value.is_(None), EventSubscription.include_missing),
    )


async def add_events(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> list[int]:
    """Insert the events; their ids, in order."""
    statement = insert(OutboxEvent).values(list(rows)).returning(OutboxEvent.id)
    return list((await session.scalars(statement)).all())


async def published_kinds(
    session: AsyncSession, subjects: Collection[str], types: Collection[str]
) -> set[tuple[str, str]]:
    """Of these types of event, those the outbox holds about these subjects: (type, subject)."""
    if not subjects:
        return set()
    found = await session.execute(
        select(OutboxEvent.type, OutboxEvent.subject)
        .where(
            OutboxEvent.subject == any_(literal(list(set(subjects)), ARRAY(Text))),
            OutboxEvent.type == any_(literal(list(types), ARRAY(String))),
        )
        .distinct()
    )
    return {(type_, subject) for type_, subject in found}


async def fan_out(session: AsyncSession, event_ids: Sequence[int]) -> int:
    """A pending delivery of each of the events to each subscription it matches, due at the
    event's time: how many."""
    matches = (
        select(EventSubscription.id, OutboxEvent.id, OutboxEvent.subject, OutboxEvent.time)
        .join(
            EventSubscription,
            and_(
                or_(
                    func.cardinality(EventSubscription.event_types) == 0,
                    OutboxEvent.type == any_(EventSubscription.event_types),
                ),
                _passes(_EVENT.environment, _SUBSCRIPTION.environments),
                _passes(_EVENT.workload, _SUBSCRIPTION.workloads),
                or_(
                    func.cardinality(EventSubscription.cluster_types) == 0,
                    _EVENT.cluster_types.overlap(_SUBSCRIPTION.cluster_types),
                    and_(
                        func.cardinality(_EVENT.cluster_types) == 0,
                        EventSubscription.include_missing,
                    ),
                ),
            ),
        )
        .where(OutboxEvent.id == any_(array(event_ids, type_=BigInteger)))
    )
    return await _deliver(session, matches)


async def deliver_to(
    session: AsyncSession, subscription_id: int, event_id: int, *, subject: str, due_at: datetime
) -> int:
    """A pending delivery of the event to this subscription alone (a test event): its id."""
    statement = (
        insert(EventDelivery)
        .values(
            subscription_id=subscription_id,
            event_id=event_id,
            subject=subject,
            next_attempt_at=due_at,
        )
        .returning(EventDelivery.id)
    )
    return (await session.execute(statement)).scalar_one()


async def _deliver(session: AsyncSession, matches: Any) -> int:
    statement = (
        insert(EventDelivery)
        .from_select(["subscription_id", "event_id", "subject", "next_attempt_at"], matches)
        .on_conflict_do_nothing()
    )
    return cast(CursorResult[Any], await session.execute(statement)).rowcount


def _waits() -> ColumnElement[bool]:
    """A delivery waits behind an earlier pending one of its subscription and subject."""
    earlier = aliased(EventDelivery)
    return exists().where(
        earlier.subscription_id == EventDelivery.subscription_id,
        earlier.subject == EventDelivery.subject,
        earlier.state == _PENDING,
        earlier.event_id < EventDelivery.event_id,
    )


async def due(
    session: AsyncSession, now: datetime, limit: int, *, sending: Collection[int] = ()
) -> list[RowMapping]:
    """Pending deliveries due by `now`, each the oldest pending one of its subscription and
    subject (a later event waits for it), but for those `sending` now: what sending them
    takes."""
    statement = (
        select(
            EventDelivery.id,
            EventDelivery.created_at,
            EventDelivery.retried_at,
            EventDelivery.attempts,
            EventSubscription.url,
            EventSubscription.format,
            EventSubscription.secret,
            OutboxEvent.body,
            OutboxEvent.environment,
        )
        .join(EventSubscription, EventSubscription.id == EventDelivery.subscription_id)
        .join(OutboxEvent, OutboxEvent.id == EventDelivery.event_id)
        .where(
            EventDelivery.state == _PENDING,
            EventDelivery.next_attempt_at <= now,
            EventDelivery.id.not_in(list(sending)),
            ~_waits(),
        )
        .order_by(EventDelivery.event_id)
        .limit(limit)
    )
    return list((await session.execute(statement)).mappings())


async def expire(session: AsyncSession, now: datetime, window: timedelta) -> int:
    """Dead, unsent: the pending deliveries whose retry window (since they were made, or
    retried by hand) has passed while they waited behind an earlier event of their subject.
    How many."""
    started = func.coalesce(EventDelivery.retried_at, EventDelivery.created_at)
    statement = (
        update(EventDelivery)
        .where(EventDelivery.state == _PENDING, started <= now - window, _waits())
        .values(
            state="dead",
            last_error=(
                f"not sent within the retry window ({window}): it waited behind an earlier "
                "event of its subject that was not delivered"
            ),
        )
    )
    return cast(CursorResult[Any], await session.execute(statement)).rowcount


async def record_attempt(session: AsyncSession, delivery_id: int, **values: Any) -> None:
    statement = (
        update(EventDelivery)
        .where(EventDelivery.id == delivery_id)
        .values(attempts=EventDelivery.attempts + 1, **values)
    )
    await session.execute(statement)


async def add_subscription(session: AsyncSession, **values: Any) -> EventSubscription | None:
    """Insert a subscription; None when the name is taken."""
    statement = (
        insert(EventSubscription)
        .values(**values)
        .on_conflict_do_nothing(index_elements=[EventSubscription.name])
        .returning(EventSubscription)
    )
    return (await session.scalars(statement)).one_or_none()


async def subscriptions(session: AsyncSession) -> list[EventSubscription]:
    return list(await session.scalars(select(EventSubscription).order_by(EventSubscription.name)))


async def subscription(session: AsyncSession, name: str) -> EventSubscription | None:
    statement = select(EventSubscription).where(EventSubscription.name == name)
    return (await session.scalars(statement)).one_or_none()


async def remove_subscription(session: AsyncSession, name: str) -> bool:
    """Delete the subscription and its deliveries; False when there is none of that name."""
    statement = (
        delete(EventSubscription)
        .where(EventSubscription.name == name)
        .returning(EventSubscription.id)
    )
    return (await session.execute(statement)).first() is not None


_DELIVERY_COLUMNS = (
    EventDelivery.id,
    OutboxEvent.event_id,
    OutboxEvent.type.label("event_type"),
    EventDelivery.subject,
    EventDelivery.state,
    EventDelivery.attempts,
    EventDelivery.next_attempt_at,
    EventDelivery.last_attempt_at,
    EventDelivery.last_status_code,
    EventDelivery.last_error,
    EventDelivery.delivered_at,
    EventDelivery.created_at,
)


async def deliveries(session: AsyncSession, subscription_id: int, limit: int) -> list[RowMapping]:
    """The subscription's newest deliveries first."""
    statement = (
        select(*_DELIVERY_COLUMNS)
        .join(OutboxEvent, OutboxEvent.id == EventDelivery.event_id)
        .where(EventDelivery.subscription_id == subscription_id)
        .order_by(EventDelivery.id.desc())
        .limit(limit)
    )
    return list((await session.execute(statement)).mappings())


async def delivery(
    session: AsyncSession, subscription_id: int, delivery_id: int
) -> RowMapping | None:
    statement = (
        select(*_DELIVERY_COLUMNS)
        .join(OutboxEvent, OutboxEvent.id == EventDelivery.event_id)
        .where(EventDelivery.subscription_id == subscription_id, EventDelivery.id == delivery_id)
    )
    return (await session.execute(statement)).mappings().one_or_none()


async def revive(session: AsyncSession, delivery_id: int, now: datetime) -> bool:
    """A dead delivery pending again, due now, with a retry window of its own; False when it
    is not dead."""
    statement = (
        update(EventDelivery)
        .where(EventDelivery.id == delivery_id, EventDelivery.state == "dead")
        .values(
            state=_PENDING,
            attempts=0,
            next_attempt_at=now,
            delivered_at=None,
            retried_at=now,
        )
        .returning(EventDelivery.id)
    )
    return (await session.execute(statement)).first() is not None


async def add_event(session: AsyncSession, row: dict[str, Any]) -> int:
    [event_id] = await add_events(session, [row])
    return event_id


async def prune(session: AsyncSession, before: datetime) -> dict[str, int]:
    """Delete the deliveries done (delivered or dead) and the events written before `before`;
    an event with a pending delivery stays."""
    done = await session.execute(
        delete(EventDelivery).where(
            EventDelivery.state != _PENDING, EventDelivery.created_at < before
        )
    )
    pending = exists().where(
        EventDelivery.event_id == OutboxEvent.id, EventDelivery.state == _PENDING
    )
    events = await session.execute(
        delete(OutboxEvent).where(OutboxEvent.created_at < before, ~pending)
    )
    return {
        "event_delivery": cast(CursorResult[Any], done).rowcount,
        "outbox_event": cast(CursorResult[Any], events).rowcount,
    }


async def oldest_pending(session: AsyncSession) -> datetime | None:
    """When the oldest delivery still waiting to be sent was made (entered the outbox)."""
    return await session.scalar(
        select(func.min(EventDelivery.created_at)).where(EventDelivery.state == _PENDING)
    )


# --- the states that open events --------------------------------------------------------------

# The columns of a held state, each sent as one array whatever the number of states.
_STATE_COLUMNS: dict[str, Any] = {
    "key": Text,
    "since": DateTime(timezone=True),
    "announced": Boolean,
}


async def states(session: AsyncSession, kind: str) -> dict[str, tuple[datetime, bool]]:
    """The held states of `kind`: since when, and whether announced, by key."""
    rows = await session.execute(
        select(EventState.key, EventState.since, EventState.announced).where(
            EventState.kind == kind
        )
    )
    return {key: (since, announced) for key, since, announced in rows}


async def hold(session: AsyncSession, kind: str, rows: Sequence[dict[str, Any]]) -> None:
    """Keep the states (key, since, announced) of `kind`, replacing those of the same keys. The
    rows go as three arrays, so any number of them is one statement of four parameters."""
    if not rows:
        return
    given = select(
        literal(kind, String).label("kind"),
        *(
            func.unnest(literal([row[name] for row in rows], ARRAY(type_))).label(name)
            for name, type_ in _STATE_COLUMNS.items()
        ),
    )
    statement = insert(EventState).from_select(["kind", *_STATE_COLUMNS], given)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[EventState.kind, EventState.key],
            set_={"since": statement.excluded.since, "announced": statement.excluded.announced},
        )
    )


async def release(session: AsyncSession, kind: str, keys: Collection[str]) -> None:
    if keys:
        await session.execute(
            delete(EventState).where(
                EventState.kind == kind, EventState.key == any_(literal(list(keys), ARRAY(Text)))
            )
        )
