"""Events: published into the outbox in the caller's transaction, sent to subscriptions by the
delivery task, and the subscriptions themselves.

A judging job calls `publish(session, events, source=...)` inside the transaction of the write
that decides them: the events and their deliveries (a row per subscription each matches)
commit with it, or not at all. Matching at publish time means a subscription gets the events
published while it exists, and the delivery task only sends."""

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import structlog
from prometheus_client import Counter as MetricCounter
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncSession

from hub.errors import (
    AlreadyExists,
    DeliveryNotDead,
    InvalidInput,
    Problem,
    UnknownDelivery,
    UnknownSubscription,
)
from hub.events import repository, webhooks
from hub.events.schemas import (
    CLOUDEVENTS_JSON,
    CloudEvent,
    CreatedSubscription,
    DeliveryInfo,
    SubscriptionInfo,
    SubscriptionRequest,
)
from hub.models import EventSubscription
from hub.outbound import USER_AGENT, Answer
from hub.security import new_token
from hub.settings import HubSettings
from hub.types import Clock, Units

__all__ = [
    "METRICS",
    "TEST_EVENT",
    "Event",
    "EventCounts",
    "Held",
    "create_subscription",
    "deliver_due",
    "deliveries",
    "event_counts",
    "event_source",
    "held",
    "hold",
    "list_subscriptions",
    "page_url",
    "prune",
    "publish",
    "release",
    "remove_subscription",
    "retry",
    "retry_delay",
    "send_test",
    "subscription",
]

log = structlog.get_logger("fleetmark.events")

SECRET_PREFIX = "fmw_"  # noqa: S105 - a prefix, not a secret
TEST_EVENT = "fleetmark.test"
# Deliveries read per query, CONCURRENT of them sent at once (each of another subject).
DUE_BATCH = 100
CONCURRENT = 8
# Queries of due deliveries per round: a subject's next event is due once its last is
# delivered, so a round goes on while there are some, up to this many.
ROUNDS = 50
# The first retry's wait, doubled at each further one up to the longest.
FIRST_RETRY = timedelta(seconds=30)
LONGEST_RETRY = timedelta(hours=1)
DELIVERY_OUTCOMES = ("delivered", "retried", "dead")

# Counted by this process as it publishes and delivers; /metrics exports them (hub.metrics).
PUBLISHED = MetricCounter(
    "fleetmark_events",
    "Events published by this process, by type.",
    ["type"],
    registry=None,
)
DELIVERED = MetricCounter(
    "fleetmark_event_deliveries",
    "Deliveries of events by this process, by outcome: delivered, retried (an attempt failed, "
    "tried again later) or dead (the retry window passed, after a failed attempt or unsent "
    "behind an earlier event of its subject).",
    ["outcome"],
    registry=None,
)
for _outcome_name in DELIVERY_OUTCOMES:
    DELIVERED.labels(_outcome_name)
METRICS = (PUBLISHED, DELIVERED)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """An event a job publishes: its type (fleetmark.gate.passed), what it is about
    (`subject`: the gate, environment or repository), when it was judged, its data, and the
    dimensions subscriptions filter on (None, or no cluster types: the event has none). The
    cluster types are those of the clusters it concerns: an event about an environment spans
    several."""

    type: str
    subject: str
    time: datetime
    data: dict[str, Any] = field(default_factory=dict)
    environment: str | None = None
    workload: str | None = None
    cluster_types: Collection[str] = ()


def event_source(settings: HubSettings) -> str:
    """The CloudEvents `source` of the hub's events: FLEETMARK_PUBLIC_URL, else the address it
    serves on. The one place the events' source is read from the settings."""
    return settings.effective_public_url


def page_url(
    source: str, path: str, query: Mapping[str, str | Sequence[str] | None] | None = None
) -> str:
    """Where the hub at `source` shows an event's evidence: its page (or API answer) at `path`,
    asked `query` (a value None is left out). Every event's `data.evidence_url`."""
    asked = {name: value for name, value in (query or {}).items() if value is not None}
    return f"{source}{path}?{urlencode(asked, doseq=True)}" if asked else f"{source}{path}"


def _row(event: Event, source: str) -> dict[str, Any]:
    cloud_event = CloudEvent(
        id=uuid.uuid4(),
        source=source,
        type=event.type,
        subject=event.subject,
        time=event.time,
        data=event.data,
    )
    return {
        "event_id": cloud_event.id,
        "type": event.type,
        "subject": event.subject,
        "time": event.time,
        "environment": event.environment,
        "workload": event.workload,
        "cluster_types": sorted(set(event.cluster_types)),
        "body": cloud_event.model_dump(mode="json"),
    }


async def publish(session: AsyncSession, events: Sequence[Event], *, source: str) -> int:
    """Write `events` to the outbox in the session's transaction, each with a delivery to every
    subscription it matches; the caller commits. How many deliveries were made."""
    if not events:
        return 0
    ids = await repository.add_events(session, [_row(event, source) for event in events])
    made = await repository.fan_out(session, ids)
    for event in events:
        PUBLISHED.labels(event.type).inc()
    return made


async def published_kinds(
    session: AsyncSession, subjects: Collection[str], types: Collection[str]
) -> set[tuple[str, str]]:
    """Of these types of event, those the outbox still holds about these subjects, as (type,
    subject): what a job announced, for as long as `event_retention` keeps it."""
    return await repository.published_kinds(session, subjects, types)


# --- the states that open events -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Held:
    """A state that opens events (an environment's drift, a stale cluster): since when it
    holds, and whether its opening event went out."""

    since: datetime
    announced: bool


async def held(session: AsyncSession, kind: str) -> dict[str, Held]:
    """The states of `kind` a job holds, by key (an environment, a cluster): what it announced,
    or began to watch, in its earlier runs."""
    return {key: Held(*row) for key, row in (await repository.states(session, kind)).items()}


async def hold(session: AsyncSession, kind: str, states: Mapping[str, Held]) -> None:
    """Keep these states of `kind` in the caller's transaction, beside the events they open."""
    rows = [
        {"key": key, "since": state.since, "announced": state.announced}
        for key, state in states.items()
    ]
    await repository.hold(session, kind, rows)


async def release(session: AsyncSession, kind: str, keys: Collection[str]) -> None:
    """Forget the states of `kind` that ended, in the caller's transaction."""
    await repository.release(session, kind, keys)


# --- subscriptions ----------------------------------------------------------------------------


def _info(row: EventSubscription) -> SubscriptionInfo:
    """A subscription as answered: its URL masked (`webhooks.shown_url`), a Slack webhook's
    path all of it."""
    info = SubscriptionInfo.model_validate(row, from_attributes=True)
    shown = webhooks.shown_url(row.url, secret_path=row.format == "slack")
    return info.model_copy(update={"url": shown})


async def create_subscription(
    session: AsyncSession, request: SubscriptionRequest, *, allow_private: bool
) -> CreatedSubscription:
    try:
        webhooks.check_url(request.url, allow_private=allow_private)
    except webhooks.RefusedDestination as exc:
        problem = Problem(
            location="body", field="url", rule="refused_destination", message=str(exc)
        )
        raise InvalidInput(f"url: {exc}", [problem]) from None
    secret = new_token(SECRET_PREFIX)
    row = await repository.add_subscription(session, **request.model_dump(), secret=secret)
    if row is None:
        raise AlreadyExists(f"a subscription named {request.name!r} exists already")
    return CreatedSubscription(**_info(row).model_dump(), secret=secret)


async def list_subscriptions(session: AsyncSession) -> list[SubscriptionInfo]:
    return [_info(row) for row in await repository.subscriptions(session)]


async def _subscription(session: AsyncSession, name: str) -> EventSubscription:
    row = await repository.subscription(session, name)
    if row is None:
        raise UnknownSubscription(f"no subscription named {name!r}")
    return row


async def subscription(session: AsyncSession, name: str) -> SubscriptionInfo:
    return _info(await _subscription(session, name))


async def remove_subscription(session: AsyncSession, name: str) -> None:
    if not await repository.remove_subscription(session, name):
        raise UnknownSubscription(f"no subscription named {name!r}")


def _delivery(row: RowMapping) -> DeliveryInfo:
    values = dict(row)
    if values["state"] != "pending":
        values["next_attempt_at"] = None
    return DeliveryInfo.model_validate(values)


async def deliveries(session: AsyncSession, name: str, *, limit: int) -> list[DeliveryInfo]:
    """The subscription's newest deliveries, each with its latest attempt."""
    found = await _subscription(session, name)
    return [_delivery(row) for row in await repository.deliveries(session, found.id, limit)]


async def retry(
    session: AsyncSession, name: str, delivery_id: int, *, now: datetime
) -> DeliveryInfo:
    """Send a dead delivery again, from now, with a retry window of its own."""
    found = await _subscription(session, name)
    row = await repository.delivery(session, found.id, delivery_id)
    if row is None:
        raise UnknownDelivery(f"subscription {name!r} has no delivery {delivery_id}")
    if not await repository.revive(session, delivery_id, now):
        raise DeliveryNotDead(
            f"delivery {delivery_id} is {row['state']}; only a dead delivery is retried"
        )
    revived = await repository.delivery(session, found.id, delivery_id)
    assert revived is not None
    return _delivery(revived)


async def send_test(
    session: AsyncSession, name: str, *, source: str, now: datetime
) -> DeliveryInfo:
    """A test event to this subscription alone, whatever its filters: its delivery, pending
    (the delivery task sends it within its interval)."""
    found = await _subscription(session, name)
    event = Event(
        type=TEST_EVENT,
        subject=f"subscriptions/{name}",
        time=now,
        data={"message": f"A test event for subscription {name}."},
    )
    event_id = await repository.add_event(session, _row(event, source))
    PUBLISHED.labels(TEST_EVENT).inc()
    delivery_id = await repository.deliver_to(
        session, found.id, event_id, subject=event.subject, due_at=now
    )
    row = await repository.delivery(session, found.id, delivery_id)
    assert row is not None
    return _delivery(row)


# --- delivery ---------------------------------------------------------------------------------


def retry_delay(attempts: int) -> timedelta:
    """How long after its `attempts`-th failed attempt a delivery is tried again."""
    doubled: timedelta = FIRST_RETRY * 2 ** min(attempts - 1, 20)
    return min(doubled, LONGEST_RETRY)


def _slack_text(text: str) -> str:
    """Text Slack shows as it is: its control characters escaped (Slack's "Formatting text")."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(body: dict[str, Any], environment: str | None) -> dict[str, Any]:
    """An event as a Slack incoming-webhook message: what happened, where, and the evidence."""
    data = body.get("data") or {}
    where = f" in *{_slack_text(environment)}*" if environment else ""
    text = f"*{_slack_text(body['type'])}*{where}: {_slack_text(body['subject'])}"
    evidence = data.get("evidence_url")
    if isinstance(evidence, str) and evidence.startswith(("https://", "http://")):
        text += f" (<{_slack_text(evidence).replace('|', '%7C')}|evidence>)"
    return {"text": text}


def _request(row: RowMapping) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a delivery in its subscription's format."""
    body: dict[str, Any] = row["body"]
    headers = {"Idempotency-Key": str(body["id"]), "User-Agent": USER_AGENT}
    if row["format"] == "slack":
        content = slack_message(body, row["environment"])
        headers["Content-Type"] = "application/json"
    else:
        content = body
        headers["Content-Type"] = CLOUDEVENTS_JSON
    return json.dumps(content, separators=(",", ":")).encode(), headers


@dataclass(frozen=True, slots=True)
class Outcome:
    state: str
    values: dict[str, Any]


def _outcome(row: RowMapping, answer: Answer, now: datetime, window: timedelta) -> Outcome:
    """What an attempt leaves: delivered, pending until the next try (no sooner than the
    receiver's Retry-After, up to the longest wait), or dead once the retry window has passed
    since the delivery was made (or retried by hand)."""
    values: dict[str, Any] = {
        "last_attempt_at": now,
        "last_status_code": answer.status_code,
        "last_error": answer.error,
    }
    if answer.succeeded:
        return Outcome("delivered", values | {"state": "delivered", "delivered_at": now})
    if now - (row["retried_at"] or row["created_at"]) >= window:
        return Outcome("dead", values | {"state": "dead"})
    retry_at = now + retry_delay(row["attempts"] + 1)
    if answer.retry_at is not None:
        retry_at = max(retry_at, min(answer.retry_at, now + LONGEST_RETRY))
    return Outcome("retried", values | {"next_attempt_at": retry_at})


async def deliver_due(units: Units, settings: HubSettings, clock: Clock) -> Counter[str]:
    """Send the deliveries due, a subject's in event order, each attempt recorded in a unit of
    work of its own once the receiver answered: sent at least once (a crash between the two
    sends again, with the same id). Attempts by outcome: delivered, retried, dead (with the
    deliveries whose window passed while they waited, unsent).

    CONCURRENT attempts go at once, and as each ends the next due delivery takes its place: a
    slow receiver holds up its own subjects' events, not the others'. A delivery being sent
    stays pending, so its subject's next event is not due before it ends."""
    outcomes: Counter[str] = Counter()
    window = settings.event_retry_window
    async with units() as session:
        expired = await repository.expire(session, clock(), window)
    if expired:
        outcomes["dead"] += expired
        DELIVERED.labels("dead").inc(expired)
        log.info("event deliveries expired unsent", deliveries=expired, window=str(window))
    slots = asyncio.Semaphore(CONCURRENT)
    sending: set[int] = set()
    ended = asyncio.Event()

    async def attempt(row: RowMapping, receivers: webhooks.Receivers) -> None:
        try:
            body, headers = _request(row)
            answer = await webhooks.post(
                receivers,
                row["url"],
                body,
                headers=headers,
                secret=row["secret"],
                now=clock(),
                allow_private=settings.webhook_allow_private,
            )
            outcome = _outcome(row, answer, clock(), window)
            async with units() as session:
                await repository.record_attempt(session, row["id"], **outcome.values)
            outcomes[outcome.state] += 1
            DELIVERED.labels(outcome.state).inc()
            if outcome.state != "delivered":
                log.info(
                    "event delivery failed",
                    delivery=row["id"],
                    outcome=outcome.state,
                    status=answer.status_code,
                    error=answer.error,
                )
        finally:
            sending.discard(row["id"])
            slots.release()
            ended.set()

    async with (
        webhooks.Receivers(timeout=settings.webhook_timeout) as receivers,
        asyncio.TaskGroup() as attempts,
    ):
        for _ in range(ROUNDS):
            ended.clear()
            async with units() as session:
                due = await repository.due(session, clock(), DUE_BATCH, sending=sending)
            if not due:
                if not sending:
                    break
                # What ends may make its subject's next event due.
                await ended.wait()
                continue
            for row in due:
                await slots.acquire()
                sending.add(row["id"])
                attempts.create_task(attempt(row, receivers))
    return outcomes


async def prune(session: AsyncSession, *, before: datetime) -> dict[str, int]:
    return await repository.prune(session, before)


@dataclass(frozen=True, slots=True)
class EventCounts:
    """What /metrics reads of the outbox: when the oldest delivery still waiting to be sent
    entered it."""

    oldest_pending: datetime | None


async def event_counts(session: AsyncSession) -> EventCounts:
    return EventCounts(await repository.oldest_pending(session))
