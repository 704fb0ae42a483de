"""The drift job's events: an environment's drift announced once a cluster's drift outlives the
grace and again when it ends, clusters newly stale (or recovered) once per evaluation, in
simulated time."""

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from hub.drift import service
from hub.events import service as events_service
from hub.events.schemas import SubscriptionRequest
from hub.models import Cluster, Environment, EventState
from tests.hub.drifting import ANNOUNCING, STALE_AFTER, drift, evaluate
from tests.hub.outbox import published
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock


async def promote_to_drone_02(fleet: Fleet) -> str:
    """A new dev head that drone-02 runs and drone-01 is behind on."""
    newer = fleet.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await fleet.harvest()
    fleet.clusters["drone-02"].run_platform(newer)
    await fleet.report()
    return newer


def fail(fleet: Fleet, name: str) -> None:
    """The cluster runs the platform head, its root reconciler failing its health checks."""
    fleet.clusters[name].run_platform(
        fleet.platform_heads["dev"], ready=False, reason="HealthCheckFailed"
    )


def heal(fleet: Fleet, name: str) -> None:
    fleet.clusters[name].run_platform(fleet.platform_heads["dev"])


async def test_drift_that_outlives_the_grace_starts_once_and_resolves_once(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    fail(dev, "drone-01")
    await dev.report()
    await evaluate(session, clock)
    seen_at = clock.now
    clock.advance(minutes=3)
    await dev.report()
    await evaluate(session, clock)
    within = await published(session, "fleetmark.drift.")
    clock.advance(minutes=2)
    await dev.report()
    await evaluate(session, clock)
    clock.advance(minutes=1)
    await dev.report()
    await evaluate(session, clock)
    started = await published(session, "fleetmark.drift.")
    heal(dev, "drone-01")
    await dev.report()
    await evaluate(session, clock)
    clock.advance(minutes=1)
    await dev.report()
    await evaluate(session, clock)
    events = await published(session, "fleetmark.drift.")

    assert within == []
    evidence = f"{ANNOUNCING.source}/drift?environment=dev"
    assert [
        (e["type"], e["subject"], e["environment"], e["cluster_types"], e["data"]) for e in started
    ] == [
        (
            "fleetmark.drift.started",
            "environments/dev/drift",
            "dev",
            ["drone"],
            {
                "environment": "dev",
                "since": seen_at.isoformat().replace("+00:00", "Z"),
                "clusters": ["drone-01"],
                "count": 1,
                "evidence_url": evidence,
            },
        )
    ]
    assert [
        (e["type"], e["data"]["since"], e["data"]["count"], e["cluster_types"]) for e in events[1:]
    ] == [("fleetmark.drift.resolved", started[0]["data"]["since"], 0, ["drone"])]
    assert await session.scalar(select(func.count()).select_from(EventState)) == 0


async def test_the_grace_counts_per_cluster(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    fail(dev, "drone-01")
    await dev.report()
    await evaluate(session, clock)
    clock.advance(minutes=4)
    fail(dev, "drone-02")
    await dev.report()
    await evaluate(session, clock)
    clock.advance(minutes=1)
    await dev.report()
    await evaluate(session, clock)

    [started] = await published(session, "fleetmark.drift.")
    assert (started["data"]["clusters"], started["data"]["count"]) == (["drone-01"], 1)


async def test_a_cluster_behind_during_a_rollout_is_no_drift_until_it_outlives_the_grace(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    newer = await promote_to_drone_02(dev)
    await evaluate(session, clock)
    clock.advance(minutes=4)
    await dev.report()
    behind = await drift(session, clock, reasons=["behind"])
    await evaluate(session, clock)
    within = await published(session, "fleetmark.drift.")
    clock.advance(minutes=2)
    await dev.report()
    await evaluate(session, clock)
    stuck = await published(session, "fleetmark.drift.")
    dev.clusters["drone-01"].run_platform(newer)
    await dev.report()
    await evaluate(session, clock)
    caught_up = await published(session, "fleetmark.drift.")

    assert [item.cluster for item in behind.items] == ["drone-01"]
    assert within == []
    assert [(e["type"], e["data"]["clusters"]) for e in stuck] == [
        ("fleetmark.drift.started", ["drone-01"])
    ]
    assert [e["type"] for e in caught_up[1:]] == ["fleetmark.drift.resolved"]


async def test_drift_reaches_the_subscriptions_of_its_clusters_types(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    for name, types in (("drones", ["drone"]), ("edges", ["edge"]), ("any", [])):
        await events_service.create_subscription(
            session,
            SubscriptionRequest(name=name, url="https://hooks.example.com/", cluster_types=types),
            allow_private=False,
        )
    fail(dev, "drone-01")
    for _ in range(2):
        await dev.report()
        await evaluate(session, clock)
        clock.advance(minutes=5)

    async def received(name: str) -> list[str]:
        deliveries = await events_service.deliveries(session, name, limit=10)
        return [delivery.subject for delivery in deliveries]

    assert await received("drones") == ["environments/dev/drift"]
    assert await received("edges") == []
    assert await received("any") == ["environments/dev/drift"]


async def test_drift_that_flaps_inside_the_grace_announces_nothing(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    for _ in range(3):
        fail(dev, "drone-01")
        await dev.report()
        await evaluate(session, clock)
        clock.advance(minutes=4)
        await dev.report()
        await evaluate(session, clock)
        heal(dev, "drone-01")
        await dev.report()
        await evaluate(session, clock)
        clock.advance(minutes=1)

    assert await published(session, "fleetmark.drift.") == []
    assert await session.scalar(select(func.count()).select_from(EventState)) == 0


async def test_clusters_newly_stale_are_announced_once_and_their_recovery_too(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    # drone-01 falls silent past stale_after; drone-02 reports on.
    for _ in range(3):
        clock.advance(minutes=5)
        await dev.report("drone-02")
        await evaluate(session, clock)
    stale = await published(session, "fleetmark.cluster.")
    clock.advance(minutes=5)
    await dev.report("drone-02")
    await evaluate(session, clock)
    again = await published(session, "fleetmark.cluster.")
    await dev.report()
    await evaluate(session, clock)
    await evaluate(session, clock)
    events = await published(session, "fleetmark.cluster.")

    seconds = int(STALE_AFTER.total_seconds())
    assert [(e["type"], e["subject"], e["cluster_types"], e["data"]) for e in stale] == [
        (
            "fleetmark.cluster.stale",
            "environments/dev/clusters",
            ["drone"],
            {
                "environment": "dev",
                "clusters": ["drone-01"],
                "count": 1,
                "stale_after_seconds": seconds,
                "evidence_url": f"{ANNOUNCING.source}/?environment=dev",
            },
        )
    ]
    assert again == stale
    assert [(e["type"], e["data"]["clusters"]) for e in events[1:]] == [
        ("fleetmark.cluster.recovered", ["drone-01"])
    ]


async def test_a_rolled_back_evaluation_leaves_no_event_and_holds_nothing(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await promote_to_drone_02(dev)
    clock.advance(minutes=20)
    await dev.report("drone-02")

    async with session.begin_nested() as evaluation:
        await service.evaluate_drift(
            session, now=clock.now, stale_after=STALE_AFTER, announcing=ANNOUNCING
        )
        assert await published(session) != []
        await evaluation.rollback()

    assert await published(session) == []
    assert await session.scalar(select(func.count()).select_from(EventState)) == 0


async def test_two_thousand_clusters_going_silent_are_one_event(
    session: AsyncSession, clock: FakeClock
) -> None:
    prod = await session.scalar(insert(Environment).values(name="prod").returning(Environment.id))
    seen = clock.now
    await session.execute(
        insert(Cluster),
        [
            {"name": f"edge-{n:04}", "environment_id": prod, "last_seen_at": seen}
            for n in range(2000)
        ],
    )
    await evaluate(session, clock)
    clock.advance(minutes=11)
    await evaluate(session, clock)
    await session.execute(update(Cluster).values(last_seen_at=clock.now))
    await evaluate(session, clock)

    events = await published(session, "fleetmark.cluster.")
    assert [(e["type"], e["data"]["count"], len(e["data"]["clusters"])) for e in events] == [
        ("fleetmark.cluster.stale", 2000, 100),
        ("fleetmark.cluster.recovered", 2000, 100),
    ]
    assert events[0]["data"]["clusters"][:2] == ["edge-0000", "edge-0001"]
