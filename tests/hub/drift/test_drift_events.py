"""The drift job's events: an environment's drift announced once it outlives the grace and
again when it ends, clusters newly stale (or recovered) once per evaluation, in simulated time."""

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from hub.drift import service
from hub.models import Cluster, Environment, EventState
from tests.hub.drifting import ANNOUNCING, STALE_AFTER, evaluate
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


async def test_drift_that_outlives_the_grace_starts_once_and_resolves_once(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    newer = await promote_to_drone_02(dev)
    await evaluate(session, clock)
    seen_at = clock.now
    clock.advance(minutes=3)
    await evaluate(session, clock)
    within = await published(session, "fleetmark.drift.")
    clock.advance(minutes=2)
    await evaluate(session, clock)
    clock.advance(minutes=1)
    await evaluate(session, clock)
    started = await published(session, "fleetmark.drift.")
    dev.clusters["drone-01"].run_platform(newer)
    await dev.report()
    await evaluate(session, clock)
    clock.advance(minutes=1)
    await dev.report()
    await evaluate(session, clock)
    events = await published(session, "fleetmark.drift.")

    assert within == []
    assert [(e["type"], e["subject"], e["environment"], e["data"]) for e in started] == [
        (
            "fleetmark.drift.started",
            "environments/dev/drift",
            "dev",
            {
                "environment": "dev",
                "since": seen_at.isoformat().replace("+00:00", "Z"),
                "clusters": ["drone-01"],
                "count": 1,
            },
        )
    ]
    assert [(e["type"], e["data"]["since"], e["data"]["count"]) for e in events[1:]] == [
        ("fleetmark.drift.resolved", started[0]["data"]["since"], 0)
    ]


async def test_drift_that_flaps_inside_the_grace_announces_nothing(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    drone = dev.clusters["drone-01"]
    for _ in range(3):
        drone.run_platform(head, ready=False, reason="HealthCheckFailed")
        await dev.report()
        await evaluate(session, clock)
        clock.advance(minutes=4)
        await dev.report()
        await evaluate(session, clock)
        drone.run_platform(head)
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
    assert [(e["type"], e["subject"], e["data"]) for e in stale] == [
        (
            "fleetmark.cluster.stale",
            "environments/dev/clusters",
            {
                "environment": "dev",
                "clusters": ["drone-01"],
                "count": 1,
                "stale_after_seconds": seconds,
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
