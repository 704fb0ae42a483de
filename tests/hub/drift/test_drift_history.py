"""Drift history: periods opened and closed by the drift job's evaluations, in simulated time,
read as GET /api/v1/drift/history reads them."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from hub.drift import service
from hub.drift.schemas import DriftHistory, Reason
from hub.errors import InvalidInput
from hub.simulation import ROOT
from tests.hub.drifting import evaluate
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock


async def history(session: AsyncSession, clock: FakeClock, **options: Any) -> DriftHistory:
    values: dict[str, Any] = {
        "environment": None,
        "cluster_type": None,
        "cluster": None,
        "level": "cluster",
        "since": None,
        "until": None,
        "open_only": False,
        "limit": 100,
        "offset": 0,
    }
    return await service.drift_history(session, now=clock.now, **(values | options))


def spans(result: DriftHistory) -> dict[str, list[tuple[datetime, datetime | None, float]]]:
    return {
        item.cluster if item.object is None else f"{item.cluster} {item.object.name}": [
            (period.started_at, period.ended_at, period.seconds) for period in item.periods
        ]
        for item in result.items
    }


async def test_a_period_opens_when_a_cluster_drifts_and_closes_when_it_recovers(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    newer = dev.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await dev.harvest()
    dev.clusters["drone-02"].run_platform(newer)
    await dev.report()
    clock.advance(seconds=30)
    await evaluate(session, clock)
    opened_at = clock.now
    clock.advance(minutes=5)
    await evaluate(session, clock)

    drifting = await history(session, clock)
    objects = await history(session, clock, level="object")

    assert spans(drifting) == {"drone-01": [(opened_at, None, 300.0)]}
    [item] = drifting.items
    assert (item.open, item.drifted_seconds, item.periods[0].reasons) == (
        True,
        300.0,
        [Reason.BEHIND],
    )
    assert spans(objects) == {f"drone-01 {ROOT}": [(opened_at, None, 300.0)]}
    assert (await history(session, clock, open_only=True)).total == 1

    dev.clusters["drone-01"].run_platform(newer)
    await dev.report()
    clock.advance(minutes=3)
    await evaluate(session, clock)
    closed_at = clock.now
    clock.advance(minutes=9)
    await dev.report()
    await evaluate(session, clock)

    recovered = await history(session, clock)
    assert spans(recovered) == {"drone-01": [(opened_at, closed_at, 480.0)]}
    assert (recovered.items[0].open, recovered.items[0].drifted_seconds) == (False, 480.0)
    assert (await history(session, clock, open_only=True)).items == []
    # Within a range, only the time inside it counts; the period is shown whole.
    clipped = await history(session, clock, since=opened_at + timedelta(minutes=2), until=closed_at)
    assert clipped.items[0].drifted_seconds == 360.0
    assert clipped.items[0].periods[0].seconds == 480.0
    assert (await history(session, clock, since=closed_at)).items == []


async def test_reasons_seen_during_a_period_add_up_and_staleness_opens_one_too(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    dev.clusters["drone-01"].run_platform(head, ready=False, reason="HealthCheckFailed")
    await dev.report()
    await evaluate(session, clock)
    started = clock.now
    clock.advance(minutes=6)
    # drone-02 reports on; drone-01 falls silent past the threshold with its last state.
    await dev.report("drone-02")
    clock.advance(minutes=5)
    await dev.report("drone-02")
    await evaluate(session, clock)

    result = await history(session, clock)

    [item] = result.items
    assert item.cluster == "drone-01"
    assert item.periods[0].started_at == started
    assert item.periods[0].reasons == [Reason.FAILING, Reason.STALE]
    assert item.drifted_seconds == 660.0


async def test_a_cluster_that_never_reported_is_drifted_from_the_first_evaluation(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await dev.add("drone-03", "drone")
    clock.advance(minutes=1)
    await evaluate(session, clock)
    clock.advance(minutes=1)

    result = await history(session, clock, cluster="drone-03")

    assert spans(result) == {"drone-03": [(clock.now - timedelta(minutes=1), None, 60.0)]}
    assert result.items[0].periods[0].reasons == [Reason.STALE]


async def test_a_range_that_ends_before_it_starts_is_refused(
    dev: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    with pytest.raises(InvalidInput, match=r"^since: .* is not before until "):
        await history(session, clock, since=clock.now, until=clock.now - timedelta(hours=1))
