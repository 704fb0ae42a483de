"""The delivery task sends published events to a real receiver on loopback: signed, with the
event's id, at least once, in order per subject, retried with backoff until the retry window
has passed, then dead until retried by hand. Deliveries commit, so each test has a database of
its own."""

import json
import re
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

import hub.app
from hub.app import create_app
from hub.database import create_engine, create_sessionmaker, write_session
from hub.events import service, tasks
from hub.events.schemas import DeliveryInfo, SubscriptionRequest
from hub.events.service import Event
from tests.conftest import hub_settings, route_hub_logs
from tests.hub.events.receiver import HOLD_SECONDS, Receiver, receiving
from tests.support import FakeClock, samples

SOURCE = "https://fleetmark.example.com"
HOUR = timedelta(hours=1)
Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture
def hook(receiver: Receiver) -> Receiver:
    receiver.reset()
    return receiver


@pytest.fixture
def clock() -> FakeClock:
    """The hub's clock, from the store's time: a delivery's retry window and its age in the
    outbox count from when the store made it."""
    return FakeClock(datetime.now(UTC))


@pytest.fixture
def plain_logging() -> Iterator[None]:
    """structlog as it comes, for the test's length: a command run in-process by an earlier
    test may have set the hub's logging up (warnings only, loggers bound once)."""
    structlog.reset_defaults()
    route_hub_logs()
    yield
    structlog.reset_defaults()
    route_hub_logs()


@pytest.fixture
async def sessions(migrated_database: str) -> AsyncIterator[Sessions]:
    engine = create_engine(migrated_database, hub_settings())
    try:
        yield create_sessionmaker(engine)
    finally:
        await engine.dispose()


async def subscribe(sessions: Sessions, name: str, url: str, **request: Any) -> str:
    """A subscription (receivers on loopback allowed): its secret."""
    async with write_session(sessions) as session:
        created = await service.create_subscription(
            session, SubscriptionRequest(name=name, url=url, **request), allow_private=True
        )
    return created.secret


async def publish(sessions: Sessions, *events: Event) -> None:
    async with write_session(sessions) as session:
        await service.publish(session, events, source=SOURCE)


async def deliver(sessions: Sessions, clock: FakeClock, **settings: Any) -> int:
    """A round of the delivery task: the attempts made."""
    values = {"webhook_allow_private": True} | settings
    return await tasks.deliver(sessions, hub_settings(**values), clock)


async def deliveries(sessions: Sessions, name: str) -> list[DeliveryInfo]:
    async with write_session(sessions) as session:
        return list(reversed(await service.deliveries(session, name, limit=100)))


def event(
    clock: FakeClock,
    kind: str = "fleetmark.gate.passed",
    subject: str = "gates/prod",
    **values: Any,
) -> Event:
    return Event(type=kind, subject=subject, time=clock(), **values)


def _documented_verify() -> Callable[..., None]:
    """The receiver's check as docs/events.md shows it, run as it is written there."""
    page = (Path(__file__).parents[3] / "docs" / "events.md").read_text()
    [snippet] = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    namespace: dict[str, Any] = {}
    exec(snippet, namespace)
    check: Callable[..., None] = namespace["verify"]
    return check


_VERIFY = _documented_verify()


def verify(secret: str, header: str, body: bytes) -> int:
    """What a receiver does: the documented check (the test's clock is not the wall clock's,
    so any age passes), then the signature's time."""
    _VERIFY(secret, header, body, tolerance=10**10)
    return int(header.split(",")[0].removeprefix("t="))


async def test_a_published_event_arrives_signed_with_its_id(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    secret = await subscribe(sessions, "ops", hook.url)
    await publish(sessions, event(clock, data={"verdict": "passed"}, environment="prod"))

    assert await deliver(sessions, clock) == 1

    [received] = hook.received
    document = received.document
    assert document["specversion"] == "1.0"
    assert document["type"] == "fleetmark.gate.passed"
    assert document["subject"] == "gates/prod"
    assert document["source"] == SOURCE
    assert document["data"] == {"verdict": "passed"}
    assert received.headers["Idempotency-Key"] == document["id"]
    assert received.headers["Content-Type"] == "application/cloudevents+json"
    signed_at = verify(secret, received.headers["X-Fleetmark-Signature"], received.body)
    assert signed_at == int(clock().timestamp())
    with pytest.raises(ValueError, match="bad signature"):
        verify("another secret", received.headers["X-Fleetmark-Signature"], received.body)
    [delivery] = await deliveries(sessions, "ops")
    assert (delivery.state, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 200)
    assert str(delivery.event_id) == document["id"]
    # Delivered once: the next round sends nothing.
    assert await deliver(sessions, clock) == 0
    assert len(hook.received) == 1


async def test_a_failed_delivery_is_retried_after_a_backoff_until_acknowledged(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    await subscribe(sessions, "ops", hook.url)
    await publish(sessions, event(clock))
    hook.answer(500)

    assert await deliver(sessions, clock) == 1
    [delivery] = await deliveries(sessions, "ops")
    assert (delivery.state, delivery.attempts, delivery.last_status_code) == ("pending", 1, 500)
    assert delivery.next_attempt_at == clock() + service.FIRST_RETRY
    # Not before the backoff has passed.
    assert await deliver(sessions, clock) == 0

    clock.advance(seconds=service.FIRST_RETRY.total_seconds())
    assert await deliver(sessions, clock) == 1
    [delivery] = await deliveries(sessions, "ops")
    assert (delivery.state, delivery.attempts, delivery.last_status_code) == ("delivered", 2, 200)
    first, second = hook.received
    assert first.document["id"] == second.document["id"]
    assert first.body == second.body


async def test_a_subjects_later_event_waits_for_the_earlier_one(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    await subscribe(sessions, "ops", hook.url)
    await publish(sessions, event(clock, "fleetmark.gate.pending"))
    await publish(
        sessions,
        event(clock, "fleetmark.gate.passed"),
        event(clock, "fleetmark.cluster.stale", subject="environments/dev"),
    )
    hook.answer(503, subject="gates/prod")

    await deliver(sessions, clock)
    sent = sorted(
        (received.document["subject"], received.document["type"]) for received in hook.received
    )
    # The gate's first event failed; its second waits, another subject's goes.
    assert sent == [
        ("environments/dev", "fleetmark.cluster.stale"),
        ("gates/prod", "fleetmark.gate.pending"),
    ]

    clock.advance(minutes=1)
    await deliver(sessions, clock)
    sent = [received.document["type"] for received in hook.received[2:]]
    assert sent == ["fleetmark.gate.pending", "fleetmark.gate.passed"]
    assert {delivery.state for delivery in await deliveries(sessions, "ops")} == {"delivered"}


async def test_a_delivery_is_dead_after_the_retry_window_and_retried_by_hand(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    window = timedelta(hours=24)
    await subscribe(sessions, "ops", hook.url)
    await publish(sessions, event(clock, "fleetmark.gate.failed"), event(clock))
    hook.answer(*[500] * 100, subject="gates/prod")

    started = clock()
    while clock() - started <= window + service.LONGEST_RETRY:
        await deliver(sessions, clock, event_retry_window=window)
        clock.advance(minutes=15)

    failed, passed = await deliveries(sessions, "ops")
    assert failed.state == "dead"
    assert failed.last_status_code == 500
    # Backoff doubles from 30 s to an hour: 12 attempts in the first 8 hours, then one an hour.
    assert 30 <= failed.attempts <= 40
    assert failed.last_attempt_at is not None
    assert failed.last_attempt_at - started >= window
    # The later event's window, from when it was published, passed while it waited: dead too,
    # unsent, so the subject does not wait for ever.
    assert (passed.state, passed.attempts, passed.last_attempt_at) == ("dead", 0, None)
    assert passed.last_error is not None
    assert "not sent within the retry window" in passed.last_error
    assert {received.document["type"] for received in hook.received} == {"fleetmark.gate.failed"}

    # Retried by hand, each has a window of its own from now: a failure is tried again.
    hook.reset()
    hook.answer(503, subject="gates/prod")
    async with write_session(sessions) as session:
        retried = await service.retry(session, "ops", failed.id, now=clock())
        await service.retry(session, "ops", passed.id, now=clock())
    assert (retried.state, retried.attempts) == ("pending", 0)
    await deliver(sessions, clock, event_retry_window=window)
    failed, passed = await deliveries(sessions, "ops")
    assert (failed.state, failed.attempts, failed.last_status_code) == ("pending", 1, 503)
    assert passed.state == "pending"
    clock.advance(seconds=service.FIRST_RETRY.total_seconds())
    await deliver(sessions, clock, event_retry_window=window)
    sent = [received.document["type"] for received in hook.received]
    assert sent == ["fleetmark.gate.failed", "fleetmark.gate.failed", "fleetmark.gate.passed"]
    assert [delivery.state for delivery in await deliveries(sessions, "ops")] == [
        "delivered",
        "delivered",
    ]


async def test_subscriptions_get_the_events_their_filters_pass(
    sessions: Sessions, clock: FakeClock
) -> None:
    url = "https://hooks.example.com/"
    await subscribe(sessions, "everything", url)
    await subscribe(sessions, "gates", url, event_types=["fleetmark.gate.passed"])
    await subscribe(sessions, "prod", url, environments=["prod"])
    await subscribe(sessions, "prod-and-unplaced", url, environments=["prod"], include_missing=True)
    await subscribe(sessions, "payments", url, workloads=["payments"])
    await subscribe(sessions, "edge", url, cluster_types=["edge"], include_missing=True)
    await subscribe(sessions, "edge-or-gpu", url, cluster_types=["gpu", "edge"])
    await publish(
        sessions,
        event(
            clock,
            subject="a",
            environment="prod",
            workload="payments",
            cluster_types=["core", "edge"],
        ),
        event(clock, "fleetmark.cluster.stale", subject="b", environment="dev"),
        event(clock, "fleetmark.harvest.failing", subject="c"),
        event(clock, subject="d", environment="prod", cluster_types=["core"]),
    )

    async def subjects(name: str) -> list[str]:
        return [delivery.subject for delivery in await deliveries(sessions, name)]

    assert await subjects("everything") == ["a", "b", "c", "d"]
    assert await subjects("gates") == ["a", "d"]
    assert await subjects("prod") == ["a", "d"]
    assert await subjects("prod-and-unplaced") == ["a", "c", "d"]
    assert await subjects("payments") == ["a"]
    assert await subjects("edge") == ["a", "b", "c"]
    assert await subjects("edge-or-gpu") == ["a"]


async def test_a_subscription_gets_only_the_events_published_while_it_exists(
    sessions: Sessions, clock: FakeClock
) -> None:
    await publish(sessions, event(clock, subject="before"))
    await subscribe(sessions, "ops", "https://hooks.example.com/")
    await publish(sessions, event(clock, subject="after"))
    assert [delivery.subject for delivery in await deliveries(sessions, "ops")] == ["after"]


async def test_a_loopback_receiver_is_refused_at_delivery_unless_private_ones_are_allowed(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    # A name passes when the subscription is made: it is checked as resolved, at each delivery.
    async with write_session(sessions) as session:
        await service.create_subscription(
            session,
            SubscriptionRequest(name="ops", url=f"https://localhost:{hook.port}/hook"),
            allow_private=False,
        )
    await publish(sessions, event(clock))

    await deliver(sessions, clock, webhook_allow_private=False)

    assert hook.received == []
    [delivery] = await deliveries(sessions, "ops")
    assert (delivery.state, delivery.last_status_code) == ("pending", None)
    assert delivery.last_error is not None
    assert "localhost resolves to" in delivery.last_error
    assert "loopback address" in delivery.last_error


async def test_plain_http_is_refused_at_delivery_unless_private_ones_are_allowed(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    await subscribe(sessions, "ops", hook.url)
    await publish(sessions, event(clock))

    await deliver(sessions, clock, webhook_allow_private=False)
    assert hook.received == []
    [delivery] = await deliveries(sessions, "ops")
    assert delivery.last_error is not None
    assert "is not https" in delivery.last_error

    clock.advance(minutes=1)
    await deliver(sessions, clock, webhook_allow_private=True)
    assert len(hook.received) == 1


async def test_slack_gets_a_message_naming_the_environment_and_linking_the_evidence(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    secret = await subscribe(sessions, "chat", hook.url, format="slack")
    evidence = "https://fleetmark.example.com/pages/gates?environment=prod"
    await publish(
        sessions,
        event(clock, environment="prod", data={"evidence_url": evidence}),
        event(clock, "fleetmark.harvest.failing", subject="repositories/platform"),
    )

    await deliver(sessions, clock)

    by_subject = sorted(hook.received, key=lambda received: received.document["text"])
    with_evidence, without = (received.document for received in by_subject)
    assert with_evidence == {
        "text": f"*fleetmark.gate.passed* in *prod*: gates/prod (<{evidence}|evidence>)"
    }
    assert without == {"text": "*fleetmark.harvest.failing*: repositories/platform"}
    received = by_subject[0]
    assert received.headers["Content-Type"] == "application/json"
    verify(secret, received.headers["X-Fleetmark-Signature"], received.body)
    assert json.loads(received.body) == with_evidence


async def test_retention_prunes_finished_deliveries_and_their_events(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    await subscribe(sessions, "ops", hook.url)
    await subscribe(sessions, "down", "https://hooks.example.com/")
    await publish(sessions, event(clock))
    await deliver(sessions, clock, webhook_allow_private=True)

    async def rows() -> tuple[int, int]:
        async with sessions() as session:
            events = await session.scalar(text("SELECT count(*) FROM outbox_event"))
            kept = await session.scalar(text("SELECT count(*) FROM event_delivery"))
        return int(events or 0), int(kept or 0)

    clock.advance(days=30)
    await tasks.prune_events(sessions, hub_settings(), clock)
    # The delivery to hooks.example.com is pending still (it cannot resolve here, or is
    # refused): it keeps its event; the delivered one goes.
    assert await rows() == (1, 1)


def counted() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The event counters of this process, as they stand."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for counter in service.METRICS
        for family in counter.collect()
        for sample in family.samples
    }


async def test_metrics_count_events_and_deliveries_and_show_the_oldest_waiting(
    migrated_database: str, sessions: Sessions, hook: Receiver, clock: FakeClock, tmp_path: Path
) -> None:
    before = counted()
    await subscribe(sessions, "ops", hook.url)
    # Judged an hour before it was published.
    judged = Event(type="fleetmark.gate.pending", subject="gates/prod", time=clock() - HOUR)
    await publish(sessions, judged)
    clock.advance(minutes=1)
    await publish(sessions, event(clock), event(clock, "fleetmark.cluster.stale", subject="dev"))
    hook.answer(500, subject="gates/prod")
    await deliver(sessions, clock)
    clock.advance(hours=2)
    # Retention prunes the delivered one and its event: what was counted stays counted.
    await tasks.prune_events(sessions, hub_settings(event_retention=HOUR), clock)
    async with sessions() as session:
        made = await session.scalar(
            text("SELECT min(created_at) FROM event_delivery WHERE state = 'pending'")
        )
        kept = await session.scalar(text("SELECT count(*) FROM event_delivery"))
    assert made is not None

    settings = hub_settings(data_dir=tmp_path, metrics_refresh_interval=0, harvest_enabled=False)
    app = create_app(settings, migrated_database, clock=clock)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hub") as client,
    ):
        scraped = samples((await client.get("/metrics")).text)

    def added(metric: str, **labels: str) -> float:
        key = (metric, frozenset(labels.items()))
        return scraped[key] - before.get(key, 0.0)

    assert added("fleetmark_events_total", type="fleetmark.gate.pending") == 1
    assert added("fleetmark_events_total", type="fleetmark.gate.passed") == 1
    assert added("fleetmark_events_total", type="fleetmark.cluster.stale") == 1
    # The gate's first event failed once and waits, its second behind it; the other went.
    assert added("fleetmark_event_deliveries_total", outcome="retried") == 1
    assert added("fleetmark_event_deliveries_total", outcome="delivered") == 1
    assert added("fleetmark_event_deliveries_total", outcome="dead") == 0
    assert kept == 2
    # Waiting since the store made the first delivery, whatever time the event names.
    age = scraped[("fleetmark_event_outbox_oldest_pending_age_seconds", frozenset())]
    assert age == (clock() - made).total_seconds()
    assert age < (clock() - judged.time - HOUR / 2).total_seconds()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost, made by openssl, and its key."""
    directory = tmp_path_factory.mktemp("tls")
    certificate, key = directory / "localhost.pem", directory / "localhost.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
         "-keyout", str(key), "-out", str(certificate)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return certificate, key


async def test_https_goes_to_the_resolved_address_keeping_the_name_for_host_and_tls(
    sessions: Sessions,
    clock: FakeClock,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # httpx trusts the certificate through SSL_CERT_FILE, as a hub would trust a private CA.
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    with receiving(tls=certificate) as tls_hook:
        await subscribe(sessions, "ops", tls_hook.https_url)
        await publish(sessions, event(clock))

        assert await deliver(sessions, clock) == 1

    [received] = tls_hook.received
    # The connection went to an address localhost resolved to; the certificate was checked
    # for the name, which the request kept.
    assert received.headers["Host"] == f"localhost:{tls_hook.port}"
    assert tls_hook.server_names == ["localhost"]
    [delivery] = await deliveries(sessions, "ops")
    assert (delivery.state, delivery.last_status_code) == ("delivered", 200)


async def test_a_connection_made_for_one_host_carries_no_other_hosts_requests(
    sessions: Sessions, hook: Receiver, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One attempt at a time, so that a connection kept alive would be there to be reused.
    monkeypatch.setattr(service, "CONCURRENT", 1)
    await subscribe(sessions, "by-name", f"http://localhost:{hook.port}/hook")
    await subscribe(sessions, "by-address", hook.url)
    await publish(sessions, event(clock, subject="a"), event(clock, subject="b"))

    assert await deliver(sessions, clock) == 4

    connections: dict[str, set[tuple[str, int]]] = {"localhost": set(), "127.0.0.1": set()}
    for received in hook.received:
        connections[received.headers["Host"].rpartition(":")[0]].add(received.connection)
    # Both names reach the same address: each kept its connection alive, for itself alone.
    assert len(connections["localhost"]) == len(connections["127.0.0.1"]) == 1
    assert connections["localhost"].isdisjoint(connections["127.0.0.1"])


@pytest.mark.parametrize(
    ("status", "retry_after", "wait"),
    [
        (429, "600", timedelta(minutes=10)),
        (503, "Sun, 06 Nov 1994 08:49:37 GMT", service.FIRST_RETRY),
        (503, "86400", service.LONGEST_RETRY),
        (500, "600", service.FIRST_RETRY),
    ],
)
async def test_a_receivers_retry_after_sets_the_next_attempt(
    sessions: Sessions,
    hook: Receiver,
    clock: FakeClock,
    status: int,
    retry_after: str,
    wait: timedelta,
) -> None:
    await subscribe(sessions, "ops", hook.url)
    await publish(sessions, event(clock))
    hook.answer(status, headers={"Retry-After": retry_after})

    await deliver(sessions, clock)

    [delivery] = await deliveries(sessions, "ops")
    assert (delivery.state, delivery.last_status_code) == ("pending", status)
    assert delivery.next_attempt_at == clock() + wait


async def test_a_retry_after_date_is_read_as_the_time_it_names(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    await subscribe(sessions, "ops", hook.url)
    await publish(sessions, event(clock))
    named = (clock() + timedelta(minutes=20)).replace(microsecond=0)
    hook.answer(503, headers={"Retry-After": named.strftime("%a, %d %b %Y %H:%M:%S GMT")})

    await deliver(sessions, clock)

    [delivery] = await deliveries(sessions, "ops")
    assert delivery.next_attempt_at == named


async def test_a_slow_receiver_does_not_hold_up_the_others(
    sessions: Sessions, hook: Receiver, clock: FakeClock
) -> None:
    await subscribe(sessions, "slow", f"{hook.url}/held", event_types=["fleetmark.gate.failed"])
    await subscribe(sessions, "fast", hook.url, event_types=["fleetmark.gate.passed"])
    await publish(
        sessions,
        event(clock, "fleetmark.gate.failed", subject="gates/slow"),
        event(clock, subject="gates/prod", data={"n": 1}),
    )
    await publish(sessions, event(clock, subject="gates/prod", data={"n": 2}))
    # The slow receiver answers once the fast one has the second of its subject's events,
    # which goes once the first was answered, while the slow one is still waited for (else it
    # times out).
    hook.release_on = lambda received: received.document["data"] == {"n": 2}

    await deliver(sessions, clock, webhook_timeout=HOLD_SECONDS / 2)

    assert [delivery.state for delivery in await deliveries(sessions, "slow")] == ["delivered"]
    assert [delivery.state for delivery in await deliveries(sessions, "fast")] == [
        "delivered",
        "delivered",
    ]


async def test_a_slack_webhooks_secret_path_is_shown_in_no_answer_error_or_log(
    sessions: Sessions,
    hook: Receiver,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    plain_logging: None,
) -> None:
    url = hook.url.replace("/hook", "/services/T0A/B0B/ZyXwVuTsRqPoNmLkJiHgFeDc")
    await subscribe(sessions, "chat", url, format="slack")
    await publish(sessions, event(clock))
    hook.answer(404)

    with structlog.testing.capture_logs() as logs:
        # A logger first used here: the module's may be bound to an earlier set-up.
        monkeypatch.setattr(service, "log", structlog.get_logger("fleetmark.events"))
        await deliver(sessions, clock)

    [delivery] = await deliveries(sessions, "chat")
    assert (delivery.last_status_code, delivery.last_error) == (404, "no hook at /***")
    [failed] = [line for line in logs if line["event"] == "event delivery failed"]
    assert failed["error"] == "no hook at /***"
    async with write_session(sessions) as session:
        shown = await service.subscription(session, "chat")
        [listed] = await service.list_subscriptions(session)
    assert shown.url == listed.url == f"http://127.0.0.1:{hook.port}/***"


@pytest.mark.parametrize(
    ("mode", "public_url", "warnings"),
    [("production", None, 1), ("production", SOURCE, 0), ("development", None, 0)],
)
async def test_a_production_hub_without_a_public_url_warns_at_start(
    migrated_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    plain_logging: None,
    mode: str,
    public_url: str | None,
    warnings: int,
) -> None:
    settings = hub_settings(
        mode=mode, public_url=public_url, data_dir=tmp_path, harvest_enabled=False
    )
    app = create_app(settings, migrated_database)
    with structlog.testing.capture_logs() as logs:
        # A logger first used here: the module's may be bound to an earlier set-up.
        monkeypatch.setattr(hub.app, "log", structlog.get_logger("fleetmark.app"))
        async with app.router.lifespan_context(app):
            pass
    warned = [
        line
        for line in logs
        if line["log_level"] == "warning" and "FLEETMARK_PUBLIC_URL" in line["event"]
    ]
    assert len(warned) == warnings
    if warned:
        assert warned[0]["address"] == f"http://{settings.host}:{settings.port}"
