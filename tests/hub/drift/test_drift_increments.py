"""The drift job's rounds judge what changed since the last one: what reports wrote, what the
harvest moved, clusters decommissioned or placed elsewhere; staleness, which only time changes,
is read anew every round. Each test ends with a full pass at the same time, which finds nothing
the round had not found: the verdicts, the counts, the periods and the events stay as they
were."""

import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.background import pacing
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterPlacement
from hub.drift import repository, service
from hub.placement import repository as placement_repository
from hub.simulation import ROOT
from tests.conftest import TOKEN_SECRET
from tests.hub.drifting import STALE_AFTER, drift, evaluate, reasons, rows
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, past_the_overlap

# What the drift job keeps; drift_total is written anew each round, its ids with it.
KEPT = ("object_drift", "cluster_drift", "cluster_drift_reasons", "drift_total", "drift_period")


async def kept(session: AsyncSession) -> dict[str, list[str]]:
    found = {}
    for table in KEPT:
        result = await session.execute(text(f"SELECT to_jsonb(t) - 'id' FROM {table} t"))
        found[table] = sorted(json.dumps(row, sort_keys=True) for row in result.scalars())
    return found


async def full_pass_finds_nothing(
    session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = await kept(session)
    with monkeypatch.context() as patch:
        patch.setattr(service, "FULL_PASS_EVERY", timedelta(0))
        evaluation = await evaluate(session, clock)
    assert evaluation.full
    assert evaluation.judged == evaluation.objects
    assert (evaluation.changed, evaluation.periods_opened, evaluation.periods_closed) == (0, 0, 0)
    assert evaluation.events == 0
    assert await kept(session) == before


@pytest.fixture
async def steady(dev: Fleet, session: AsyncSession, clock: FakeClock) -> Fleet:
    """dev (conftest) a while later: its agents reported again, with nothing new, and a round
    judged them, so that what the first reports wrote lies before the next round's overlap."""
    past_the_overlap(clock)
    await dev.report()
    evaluation = await evaluate(session, clock)
    assert not evaluation.full
    return dev


async def test_a_round_judges_the_objects_reports_changed(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.advance(minutes=1)
    steady.clusters["drone-02"].run_platform(steady.platform_heads["dev"], ready=False)
    await steady.report()

    evaluation = await evaluate(session, clock)
    report = await drift(session, clock)

    assert (evaluation.full, evaluation.judged, evaluation.changed) == (False, 1, 1)
    assert (evaluation.objects, evaluation.drifted) == (2, 1)
    assert reasons(report) == {("drone-02", f"Kustomization/{ROOT}"): ["failing"]}
    await full_pass_finds_nothing(session, clock, monkeypatch)


async def test_what_changed_judged_an_object_at_a_time_adds_up(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A part per object: every object that changed is judged by a statement of its own.
    monkeypatch.setattr(placement_repository, "PART_OBJECTS", 1)
    monkeypatch.setattr(pacing, "PART_PACE", 0)
    clock.advance(minutes=1)
    for name in ("drone-01", "drone-02"):
        steady.clusters[name].run_platform(steady.platform_heads["dev"], ready=False)
    await steady.report()

    evaluation = await evaluate(session, clock)
    report = await drift(session, clock)

    assert (evaluation.full, evaluation.judged, evaluation.changed) == (False, 2, 2)
    assert (evaluation.objects, evaluation.drifted) == (2, 2)
    assert reasons(report) == {
        ("drone-01", f"Kustomization/{ROOT}"): ["failing"],
        ("drone-02", f"Kustomization/{ROOT}"): ["failing"],
    }
    await full_pass_finds_nothing(session, clock, monkeypatch)


async def test_a_cluster_gone_silent_is_stale_though_nothing_was_written(
    dev: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # drone-02 reports no more; drone-01 reports what it reported before.
    last_report = clock.now
    past_the_overlap(clock)
    await dev.report("drone-01")
    await evaluate(session, clock)
    clock.advance(minutes=5)
    await dev.report("drone-01")
    assert STALE_AFTER < clock.now - last_report < service.FULL_PASS_EVERY

    evaluation = await evaluate(session, clock)
    report = await drift(session, clock)

    assert (evaluation.full, evaluation.judged, evaluation.changed) == (False, 0, 0)
    # A period for the cluster and one for its object; fleetmark.cluster.stale.
    assert (evaluation.periods_opened, evaluation.events) == (2, 1)
    assert reasons(report) == {("drone-02", f"Kustomization/{ROOT}"): ["stale"]}
    await full_pass_finds_nothing(session, clock, monkeypatch)


async def test_a_cluster_back_and_silent_again_has_its_periods_follow(
    dev: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # drone-02's root fails throughout and its app runs in sync; nothing it reports changes,
    # so only its staleness says which of its periods open and close. A part per cluster: the
    # rounds list each cluster alone.
    monkeypatch.setattr(service, "FULL_PASS_EVERY", timedelta(hours=1))
    monkeypatch.setattr(placement_repository, "PART_CLUSTERS", 1)
    monkeypatch.setattr(pacing, "PART_PACE", 0)
    drone = dev.clusters["drone-02"]
    drone.run_platform(dev.platform_heads["dev"], ready=False)
    drone.run_app("functional-test", dev.app_heads["dev"])
    await dev.report()
    await evaluate(session, clock)
    silent: list[service.Evaluation] = []
    for _ in range(2):
        clock.advance(minutes=11)
        await dev.report("drone-01")
        silent.append(await evaluate(session, clock))
        clock.advance(minutes=1)
        await dev.report()
        back = await evaluate(session, clock)
        # Back: the period of the object that only its silence drifted closes; the failing
        # root's stays open, and so does the cluster's.
        assert (back.full, back.judged, back.periods_opened, back.periods_closed) == (
            False,
            0,
            0,
            1,
        )
        await full_pass_finds_nothing(session, clock, monkeypatch)

    # Silent each time: the app's period opens again, the second time too, though an open
    # period of the cluster still says it was stale once.
    assert [(e.full, e.periods_opened) for e in silent] == [(False, 1)] * 2
    assert silent[1].judged == 0
    report = await drift(session, clock)
    assert reasons(report) == {("drone-02", f"Kustomization/{ROOT}"): ["failing"]}


async def test_a_round_sees_a_stale_after_shorter_than_the_last_rounds(
    dev: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above: drone-02's root fails throughout, its app runs in sync, and it was stale once,
    # so an open period of the cluster says so. Then it falls silent for 20 minutes, under a
    # setting of an hour: a round finds it reporting. The next, under STALE_AFTER (10 minutes)
    # again, finds it stale, though its last report came before that round's overlap (5
    # minutes) and STALE_AFTER together: its app drifts from then on.
    monkeypatch.setattr(service, "FULL_PASS_EVERY", timedelta(hours=1))
    drone = dev.clusters["drone-02"]
    drone.run_platform(dev.platform_heads["dev"], ready=False)
    drone.run_app("functional-test", dev.app_heads["dev"])
    await dev.report()
    await evaluate(session, clock)
    clock.advance(minutes=11)
    await dev.report("drone-01")
    await evaluate(session, clock)
    clock.advance(minutes=1)
    await dev.report()
    await evaluate(session, clock)
    clock.advance(minutes=20)
    await dev.report("drone-01")

    longer = await evaluate(session, clock, stale_after=timedelta(hours=1))
    clock.advance(minutes=1)
    await dev.report("drone-01")
    shorter = await evaluate(session, clock)

    assert [(e.full, e.periods_opened) for e in (longer, shorter)] == [(False, 0), (False, 1)]
    report = await drift(session, clock)
    app = rows(report)[("drone-02", "Kustomization/hello-world-app-functional-test")]
    assert [reason.reason.value for reason in app.reasons] == ["stale"]
    assert app.drifted_since == clock.now
    await full_pass_finds_nothing(session, clock, monkeypatch)


async def test_a_round_judges_the_objects_following_a_branch_the_harvest_moved(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    steady.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await steady.harvest()

    evaluation = await evaluate(session, clock)
    report = await drift(session, clock)

    assert (evaluation.full, evaluation.judged, evaluation.changed) == (False, 2, 2)
    assert reasons(report) == {
        ("drone-01", f"Kustomization/{ROOT}"): ["behind"],
        ("drone-02", f"Kustomization/{ROOT}"): ["behind"],
    }
    await full_pass_finds_nothing(session, clock, monkeypatch)


async def test_a_round_drops_the_verdicts_of_a_decommissioned_cluster(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    steady.clusters["drone-02"].run_platform(steady.platform_heads["dev"], ready=False)
    await steady.report()
    await evaluate(session, clock)
    past_the_overlap(clock)
    await steady.report()
    await evaluate(session, clock)
    clock.advance(minutes=1)
    await cluster_service.decommission(session, "drone-02", now=clock.now, stale_after=STALE_AFTER)

    evaluation = await evaluate(session, clock)
    report = await drift(session, clock, include_in_sync=True)

    assert (evaluation.full, evaluation.judged, evaluation.changed) == (False, 0, 1)
    assert (evaluation.objects, evaluation.drifted) == (1, 0)
    # Its drift ends: its period closes, and dev's drift is resolved.
    assert evaluation.periods_closed == 2
    assert set(rows(report)) == {("drone-01", f"Kustomization/{ROOT}")}
    await full_pass_finds_nothing(session, clock, monkeypatch)


async def placed_elsewhere(session: AsyncSession, clock: FakeClock) -> None:
    await cluster_service.place(
        session,
        "drone-02",
        ClusterPlacement(environment="dev", cluster_type="large"),
        now=clock.now,
        stale_after=STALE_AFTER,
    )


async def test_a_round_judges_the_objects_of_a_cluster_placed_elsewhere(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.advance(minutes=1)
    await steady.report()
    await placed_elsewhere(session, clock)

    evaluation = await evaluate(session, clock)

    assert (evaluation.full, evaluation.judged) == (False, 1)
    await full_pass_finds_nothing(session, clock, monkeypatch)


async def back_in_service(session: AsyncSession, clock: FakeClock) -> None:
    await cluster_service.rotate_token(
        session, "drone-02", token_secret=TOKEN_SECRET, now=clock.now
    )


@pytest.mark.parametrize("change", [placed_elsewhere, back_in_service])
async def test_a_cluster_placed_during_a_round_is_judged_by_the_next(
    steady: Fleet,
    session: AsyncSession,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[AsyncSession, FakeClock], Awaitable[None]],
) -> None:
    if change is back_in_service:
        await cluster_service.decommission(
            session, "drone-02", now=clock.now, stale_after=STALE_AFTER
        )
        await evaluate(session, clock)
    count_per_cluster = repository.count_per_cluster

    async def changed_before_the_count(*args: Any) -> None:
        # Committed after the round looked for what changed, before it counted.
        await change(session, clock)
        await count_per_cluster(*args)

    clock.advance(minutes=1)
    with monkeypatch.context() as patch:
        patch.setattr(repository, "count_per_cluster", changed_before_the_count)
        during = await evaluate(session, clock)
    clock.advance(minutes=1)

    evaluation = await evaluate(session, clock)

    assert (during.full, during.judged) == (False, 0)
    assert (evaluation.full, evaluation.judged) == (False, 1)
    await full_pass_finds_nothing(session, clock, monkeypatch)


async def test_a_cluster_placed_elsewhere_and_back_has_its_drift_periods_again(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    steady.clusters["drone-02"].run_platform(steady.platform_heads["dev"], ready=False)
    await steady.report()
    drifting = await evaluate(session, clock)
    past_the_overlap(clock)
    await steady.report()
    await evaluate(session, clock)
    # Placed elsewhere and back between two rounds: its periods end, and its object is judged
    # again, to the verdict it had.
    for cluster_type in ("large", "drone"):
        clock.advance(seconds=1)
        await cluster_service.place(
            session,
            "drone-02",
            ClusterPlacement(environment="dev", cluster_type=cluster_type),
            now=clock.now,
            stale_after=STALE_AFTER,
        )
    clock.advance(minutes=1)

    evaluation = await evaluate(session, clock)

    assert drifting.periods_opened == 2
    assert (evaluation.full, evaluation.judged, evaluation.changed) == (False, 1, 0)
    assert evaluation.periods_opened == 2
    await full_pass_finds_nothing(session, clock, monkeypatch)


async def test_every_object_is_judged_again_once_the_last_full_pass_is_old(
    steady: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    clock.advance(minutes=1)
    await steady.report()
    meanwhile = await evaluate(session, clock)
    # The fixture's first round was the last full pass.
    clock.advance(seconds=service.FULL_PASS_EVERY.total_seconds())
    await steady.report()

    again = await evaluate(session, clock)
    after = await evaluate(session, clock)

    assert (meanwhile.full, meanwhile.judged) == (False, 0)
    assert (again.full, again.judged, again.changed) == (True, 2, 0)
    assert (after.full, after.judged) == (False, 0)


async def test_the_first_round_on_a_store_without_a_kept_stale_after_is_a_full_pass(
    steady: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    # As a store upgraded from before the rounds kept their setting.
    await session.execute(text("UPDATE drift_evaluation SET stale_after = NULL"))
    await session.commit()
    clock.advance(minutes=1)
    await steady.report()

    first = await evaluate(session, clock)
    after = await evaluate(session, clock)

    assert (first.full, first.judged, first.changed) == (True, 2, 0)
    assert (after.full, after.judged) == (False, 0)
