"""The rollouts the rollouts job keeps (`rollout`): each rollout's state, when it entered it and
when it was stalled, as of the DORA job's refresh, on the platform commits' and the versions'
histories of tests/hub/dora_history.py."""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from hub.app import create_app
from hub.background.runner import run_round
from hub.database import create_sessionmaker, exclusive, write_session
from hub.events.service import held
from hub.models import ClusterType, DoraRefresh, DoraRollup, Environment, Rollout
from hub.rollouts import service, tasks
from hub.rollouts.repository import ROLLOUTS_LOCK
from hub.rollouts.service import Kept
from hub.rollouts.tasks import ROLLOUTS_INTERVAL, ROLLOUTS_JOB
from tests.conftest import DatabaseServer, hub_settings
from tests.hub.dora.test_dora_rollup import Played, play
from tests.hub.dora_history import PLATFORM_COMMITS, RELEASES, Timeline, refresh_dora
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.outbox import published
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock

# Short enough that the histories' gaps of five minutes count as stalls.
STALL_AFTER = timedelta(minutes=3)
SOURCE = "https://fleetmark.example.com"


@pytest.fixture(params=[None, WORKLOAD], ids=["platform commits", "workload versions"])
async def played(request: pytest.FixtureRequest, fleet: Fleet, clock: FakeClock) -> Played:
    return await play(fleet, Timeline(clock, clock.now), request.param)


async def keep(
    sessions: async_sessionmaker[AsyncSession], stall_after: timedelta = STALL_AFTER
) -> Kept:
    async with write_session(sessions) as session:
        return await service.keep_rollouts(session, stall_after=stall_after, source=SOURCE)


async def kept_as_of(
    played: Played, sessions: async_sessionmaker[AsyncSession], minutes: float
) -> dict[str, dict[str, Any]]:
    """The kept rollouts of the history's subject, by revision name (c1, 1.1.0, …), once the
    DORA job refreshed at B+`minutes` and the rollouts job ran."""
    await refresh_dora(sessions, played.timeline.at(minutes))
    await keep(sessions)
    async with sessions() as session:
        rows = (
            (
                await session.execute(
                    select(*Rollout.__table__.c).where(
                        Rollout.workload.is_not_distinct_from(played.workload)
                    )
                )
            )
            .mappings()
            .all()
        )
    return {_name(played, row["revision"], row["committed_at"]): dict(row) for row in rows}


def _name(played: Played, revision: str, committed_at: datetime) -> str:
    """c1, c2, c3 by commit time; a version is its own name."""
    if played.workload is not None:
        return revision
    for name, minutes in PLATFORM_COMMITS.items():
        if committed_at == played.timeline.at(minutes):
            return name
    return revision


@dataclass(frozen=True)
class Seen:
    """What a kept rollout says, times in minutes after B."""

    state: str
    since: float
    expected: int
    reached: int
    failed: int
    # The periods it was stalled in, (from, until); until None: still.
    stalls: tuple[tuple[float, float | None], ...] = ()


def seen(played: Played, row: dict[str, Any]) -> Seen:
    base = played.timeline.base

    def minutes(moment: datetime | None) -> float | None:
        return None if moment is None else (moment - base) / timedelta(minutes=1)

    since = minutes(row["state_since"])
    assert since is not None
    return Seen(
        row["state"],
        since,
        row["expected_clusters"],
        row["reached_clusters"],
        row["failed_clusters"],
        tuple((minutes(r.lower) or 0.0, minutes(r.upper)) for r in row["stalled"]),
    )


# (B+minutes of the DORA job's refresh, what the rollout shows then), with a stall-after of
# three minutes, per the timelines of tests/hub/dora_history.py.
PLATFORM = {
    # c1 reached by drone-01 at B+15 and drone-02 at B+20: five minutes between them.
    "c1": [
        (22, Seen("in_progress", 20, 3, 2, 0, ((18, 20),))),
        (24, Seen("stalled", 23, 3, 2, 0, ((18, 20), (23, None)))),
        (30, Seen("converged", 25, 3, 3, 0, ((18, 20), (23, 25)))),
    ],
    # c2 failed on drone-02 at B+70 (a failure is not progress, and ends its stalls), large-01
    # reached it at B+75, drone-02 at B+100; drone-03, which joined after it began, is not
    # expected.
    "c2": [
        (69, Seen("stalled", 68, 3, 1, 0, ((68, None),))),
        (90, Seen("failed", 70, 3, 2, 1, ((68, 70),))),
        (180, Seen("converged", 100, 3, 3, 1, ((68, 70),))),
    ],
    "c3": [(127, Seen("in_progress", 125, 4, 2, 0)), (180, Seen("converged", 130, 4, 4, 0))],
}
VERSIONS = {
    # 1.1.0 failed on large-01 at B+45, after drone-01 reached it at B+40.
    "1.1.0": [
        (42, Seen("in_progress", 40, 3, 1, 0)),
        (47, Seen("failed", 45, 3, 1, 1, ((43, 45),))),
        (180, Seen("converged", 70, 3, 3, 1, ((43, 45),))),
    ],
    "1.2.0": [
        (109, Seen("stalled", 108, 3, 1, 0, ((108, None),))),
        (111, Seen("in_progress", 110, 3, 2, 0, ((108, 110),))),
        (180, Seen("converged", 112, 3, 3, 0, ((108, 110),))),
    ],
}


async def test_each_rollout_is_in_progress_stalled_failed_then_converged(
    played: Played, sessions: async_sessionmaker[AsyncSession]
) -> None:
    expected = PLATFORM if played.workload is None else VERSIONS
    moments = sorted({minutes for shown in expected.values() for minutes, _ in shown})

    shown: dict[str, list[tuple[float, Seen]]] = {}
    for minutes in moments:
        kept = await kept_as_of(played, sessions, minutes)
        for name, row in kept.items():
            # Judged as of the refresh; a converged one as of the refresh that found it so.
            if row["state"] == "converged":
                assert row["evaluated_at"] <= played.timeline.at(minutes)
            else:
                assert row["evaluated_at"] == played.timeline.at(minutes)
            assert row["stall_after"] == STALL_AFTER
            if name in expected and any(at == minutes for at, _ in expected[name]):
                shown.setdefault(name, []).append((minutes, seen(played, row)))

    assert shown == expected


# The events each rollout of the histories publishes, refreshed at the moments above: started
# once, then each state but in_progress as it is entered, stalled once (c1 stalled first
# between two refreshes, 18 to 20, seen in retrospect: its second stall is the one announced).
ANNOUNCED = {
    "c1": ["started", "stalled", "converged"],
    "c2": ["started", "stalled", "failed", "converged"],
    "c3": ["started", "converged"],
    "1.1.0": ["started", "failed", "converged"],
    "1.2.0": ["started", "stalled", "converged"],
}


async def test_each_rollout_announces_its_changes_of_state_once(
    played: Played, sessions: async_sessionmaker[AsyncSession]
) -> None:
    expected = PLATFORM if played.workload is None else VERSIONS
    moments = sorted({minutes for shown in expected.values() for minutes, _ in shown})
    for minutes in [*moments, 181, 182]:
        kept = await kept_as_of(played, sessions, minutes)
    async with sessions() as session:
        events = await published(session, "fleetmark.rollout.")

    for name in expected:
        row = kept[name]
        target = [played.workload, row["revision"]] if played.workload else [row["revision"]]
        subject = "/".join(["rollouts", row["environment"], *target])
        announced = [e for e in events if e["subject"] == subject]
        assert [e["type"].removeprefix("fleetmark.rollout.") for e in announced] == ANNOUNCED[name]
        last = announced[-1]["data"]
        assert (last["expected_clusters"], last["reached_clusters"], last["state"]) == (
            row["expected_clusters"],
            row["reached_clusters"],
            "converged",
        )
        assert announced[0]["data"]["previous_state"] is None


async def test_a_rollout_to_five_thousand_clusters_is_a_handful_of_events(
    session: AsyncSession,
) -> None:
    """Reached by 500 clusters a minute, then by none for ten minutes, then by the rest."""
    began = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    await session.execute(insert(DoraRefresh).values(workload="", refreshed_at=began))
    rollout = await session.scalar(
        insert(DoraRollup).values(
            workload="", environment="prod", revision="b" * 40, commit_sha="b" * 40,
            committed_at=began, started_at=began, expected_clusters=5000,
            reached_clusters=0, failed_clusters=0, reached_times=[], failure_times=[],
        ).returning(DoraRollup.id)
    )  # fmt: skip
    reached: list[datetime] = []
    moments = [*range(1, 6), *range(15, 21)]
    for minute in moments:
        at = began + timedelta(minutes=minute)
        if minute not in (15,):
            reached += [at - timedelta(seconds=second / 10) for second in range(500)]
        done = len(reached) >= 5000
        await session.execute(
            text(
                "UPDATE dora_rollup SET reached_times = :times, reached_clusters = :count, "
                "completed_at = :done WHERE id = :id"
            ),
            {"times": reached, "count": len(reached), "done": at if done else None, "id": rollout},
        )
        await session.execute(text("UPDATE dora_refresh SET refreshed_at = :at"), {"at": at})
        await service.keep_rollouts(session, stall_after=STALL_AFTER, source=SOURCE)
    events = await published(session, "fleetmark.rollout.")

    assert len(reached) == 5000
    assert [(e["type"], e["data"]["reached_clusters"]) for e in events] == [
        ("fleetmark.rollout.started", 500),
        ("fleetmark.rollout.stalled", 2500),
        ("fleetmark.rollout.converged", 5000),
    ]


async def test_a_rollout_announces_one_stall_whichever_it_is_judged_in(
    session: AsyncSession,
) -> None:
    """Judged first in its second stall (the first, 4 to 6, seen in retrospect), then moving
    on, then stalled again, then converged."""
    began = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    prod = await session.scalar(insert(Environment).values(name="prod").returning(Environment.id))
    await session.execute(
        insert(ClusterType), [{"environment_id": prod, "name": name} for name in ("edge", "gpu")]
    )
    await session.execute(insert(DoraRefresh).values(workload="", refreshed_at=began))
    rollout = await session.scalar(
        insert(DoraRollup).values(
            workload="", environment="prod", revision="b" * 40, commit_sha="b" * 40,
            committed_at=began, started_at=began, expected_clusters=3,
            reached_clusters=0, failed_clusters=0, reached_times=[], failure_times=[],
        ).returning(DoraRollup.id)
    )  # fmt: skip
    reached: list[datetime] = []
    for minute, reaching in [(10, [1, 6]), (12, [11]), (20, []), (22, [21])]:
        at = began + timedelta(minutes=minute)
        reached += [began + timedelta(minutes=moment) for moment in reaching]
        done = len(reached) == 3
        await session.execute(
            text(
                "UPDATE dora_rollup SET reached_times = :times, reached_clusters = :count, "
                "completed_at = :done WHERE id = :id"
            ),
            {"times": reached, "count": len(reached), "done": at if done else None, "id": rollout},
        )
        await session.execute(text("UPDATE dora_refresh SET refreshed_at = :at"), {"at": at})
        await service.keep_rollouts(session, stall_after=STALL_AFTER, source=SOURCE)
    events = await published(session, "fleetmark.rollout.")

    assert [(e["type"], e["data"]["reached_clusters"]) for e in events] == [
        ("fleetmark.rollout.started", 2),
        ("fleetmark.rollout.stalled", 2),
        ("fleetmark.rollout.converged", 3),
    ]
    assert {tuple(e["cluster_types"]) for e in events} == {("edge", "gpu")}
    evidence = urlsplit(events[0]["data"]["evidence_url"])
    assert f"{evidence.scheme}://{evidence.netloc}{evidence.path}" == f"{SOURCE}/gate"
    assert parse_qs(evidence.query) == {"environment": ["prod"], "commit": ["b" * 40]}
    assert await held(session, service.STALL_ANNOUNCED) == {}


async def test_a_rolled_back_judgement_publishes_nothing(
    played: Played, sessions: async_sessionmaker[AsyncSession]
) -> None:
    await refresh_dora(sessions, played.timeline.at(180))
    async with sessions() as session, session.begin():
        await service.keep_rollouts(session, stall_after=STALL_AFTER, source=SOURCE)
        assert await published(session, "fleetmark.rollout.") != []
        await session.rollback()
    await keep(sessions)

    async with sessions() as session:
        events = await published(session, "fleetmark.rollout.")
        kept = await session.scalar(text("SELECT count(*) FROM rollout"))
    # Judged again after the rollback, each rollout starts (and converges) once.
    assert 0 < len(events) <= 4 * kept
    assert len([e for e in events if e["type"] == "fleetmark.rollout.started"]) == kept


async def test_a_failed_rollout_names_its_first_failure(
    played: Played, sessions: async_sessionmaker[AsyncSession]
) -> None:
    name = "c2" if played.workload is None else "1.1.0"
    minutes = 90 if played.workload is None else 47

    row = (await kept_as_of(played, sessions, minutes))[name]

    if played.workload is None:
        assert (row["failed_cluster"], row["failure_reason"]) == (
            "drone-02",
            "ReconciliationFailed",
        )
        assert (row["repository"], row["branch"]) != (None, None)
    else:
        assert (row["failed_cluster"], row["failure_reason"]) == ("large-01", "SyncFailed")
        assert (row["repository"], row["branch"]) == (None, None)
    assert row["failed_at"] == played.timeline.at(70 if played.workload is None else 45)
    assert row["converged_at"] is None


async def test_rollouts_are_judged_again_only_when_something_changed(
    played: Played, sessions: async_sessionmaker[AsyncSession]
) -> None:
    await refresh_dora(sessions, played.timeline.at(180))
    first = await keep(sessions)
    async with sessions() as session:
        states = list(await session.scalars(select(Rollout.state)))
    again = await keep(sessions)
    await refresh_dora(sessions, played.timeline.at(181))
    refreshed = await keep(sessions)
    longer = await keep(sessions, stall_after=timedelta(minutes=30))

    # The history's rollouts converged by B+180. Nothing changed until the DORA job's next
    # refresh, after which those not converged are judged again as of it; the converged, not
    # again until the stall-after changes, which judges each anew (none had a 30 minutes'
    # stall).
    assert states.count("converged") >= len(PLATFORM if played.workload is None else RELEASES)
    assert (first.judged, first.written) == (len(states), len(states))
    assert (again.judged, again.written) == (0, 0)
    unfinished = len(states) - states.count("converged")
    assert (refreshed.judged, refreshed.written) == (unfinished, unfinished)
    assert (longer.judged, longer.written) == (len(states), len(states))
    async with sessions() as session:
        stalls = await session.scalars(select(Rollout.stalled))
        assert [list(periods) for periods in stalls] == [[]] * len(states)


async def test_a_rollout_the_dora_job_finds_again_is_not_announced_again(
    played: Played, sessions: async_sessionmaker[AsyncSession]
) -> None:
    kept = await kept_as_of(played, sessions, 180)
    async with sessions() as session:
        before = await published(session, "fleetmark.rollout.")
    # As after the rollup was emptied by hand: the DORA job finds each rollout again, as rows
    # made anew.
    async with write_session(sessions) as session:
        await session.execute(text("DELETE FROM dora_rollup"))
        await session.execute(text("DELETE FROM dora_refresh"))
    again = await kept_as_of(played, sessions, 181)

    async with sessions() as session:
        assert await published(session, "fleetmark.rollout.") == before
    assert {name: row["state"] for name, row in again.items()} == {
        name: row["state"] for name, row in kept.items()
    }
    assert {row["dora_rollup_id"] for row in again.values()}.isdisjoint(
        row["dora_rollup_id"] for row in kept.values()
    )


async def test_a_rollout_the_dora_job_drops_is_dropped(
    played: Played, sessions: async_sessionmaker[AsyncSession]
) -> None:
    await kept_as_of(played, sessions, 180)
    async with write_session(sessions) as session:
        await session.execute(text("DELETE FROM dora_rollup"))

    async with sessions() as session:
        assert await session.scalar(text("SELECT count(*) FROM rollout")) == 0


@pytest.fixture
def job_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


async def test_one_replica_judges_them_at_a_time_and_commits(
    job_database: str, clock: FakeClock
) -> None:
    """In a database of its own: the job commits, as it does in production. The DORA job's
    row is written by hand: a rollout that one of two clusters reached when it began, 40
    minutes before the refresh."""
    engine = create_async_engine(job_database)
    sessions = create_sessionmaker(engine)
    settings = hub_settings()
    refreshed_at = datetime(2026, 11, 22, 12, 40, tzinfo=UTC)
    started_at = refreshed_at - timedelta(minutes=40)
    try:
        async with write_session(sessions) as session:
            await session.execute(
                insert(DoraRefresh).values(workload="", refreshed_at=refreshed_at)
            )
            await session.execute(
                insert(DoraRollup).values(
                    workload="", environment="dev", revision="a" * 40, commit_sha="a" * 40,
                    committed_at=started_at, started_at=started_at, expected_clusters=2,
                    reached_clusters=1, failed_clusters=0, reached_times=[started_at],
                    failure_times=[],
                )
            )  # fmt: skip
        async with exclusive(sessions, ROLLOUTS_LOCK) as held:  # another replica's run
            skipped = await run_round(tasks.ROLLOUTS, sessions, settings, clock)
        ran = await tasks.scheduled_rollouts(sessions, settings)
        async with sessions() as session:
            kept = (await session.execute(select(Rollout.state, Rollout.state_since))).all()
    finally:
        await engine.dispose()

    assert held
    assert skipped == "skipped"
    assert (ran.judged, ran.written) == (1, 1)
    # Stalled 30 minutes (FLEETMARK_ROLLOUT_STALL_AFTER's default) after its start.
    assert settings.rollout_stall_after == timedelta(minutes=30)
    assert kept == [("stalled", started_at + timedelta(minutes=30))]


async def test_the_hub_judges_the_rollouts_every_minute(
    database_url: str, clock: FakeClock
) -> None:
    app = create_app(hub_settings(), database_url, clock=clock)

    async with app.router.lifespan_context(app):
        job = app.state.jobs.scheduler.get_job(ROLLOUTS_JOB)

    assert job.trigger.interval == ROLLOUTS_INTERVAL == timedelta(minutes=1)


async def test_the_hub_judges_the_rollouts_as_often_as_a_quicker_dora_job(
    database_url: str, clock: FakeClock
) -> None:
    app = create_app(hub_settings(dora_interval="10"), database_url, clock=clock)

    async with app.router.lifespan_context(app):
        job = app.state.jobs.scheduler.get_job(ROLLOUTS_JOB)

    assert job.trigger.interval == timedelta(seconds=10)
