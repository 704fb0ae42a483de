"""The timeline (GET /api/v1/timeline) over the platform history of tests/hub/dora_history.py:
the commits c1-c3 of dev, their rollouts as the rollouts job kept them, drone-02's failure on c2
and its recovery, the fleet gone stale at B+180 and drone-01 back at B+190, large-01
decommissioned at B+195."""

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.clusters import service as clusters
from hub.database import write_session
from hub.drift.service import Announcing, evaluate_drift
from hub.models import Cluster
from hub.rollouts.service import keep_rollouts
from hub.timeline.tasks import REREAD, bucket_of, keep_readiness
from tests.hub.dora.test_dora_rollup import Played, play
from tests.hub.dora_history import FAILURE, Timeline, commit_at, refresh_dora
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import Harvest
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock

STALL_AFTER = timedelta(minutes=3)
STALE_AFTER = timedelta(minutes=30)
SOURCE = "https://fleetmark.example.com"
URL = "/api/v1/timeline"


async def judge(sessions: async_sessionmaker[AsyncSession], now: datetime) -> None:
    """The drift job's evaluation as of `now`: it announces clusters gone stale and back."""
    async with write_session(sessions) as session:
        await evaluate_drift(
            session,
            now=now,
            stale_after=STALE_AFTER,
            announcing=Announcing(grace=timedelta(hours=1), source=SOURCE),
        )


@pytest.fixture
async def played(
    fleet: Fleet,
    harvest: Harvest,
    clock: FakeClock,
    client: httpx.AsyncClient,
    read_token: str,
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
) -> Played:
    client.headers["Authorization"] = f"Bearer {read_token}"
    played = await play(fleet, Timeline(clock, clock.now), None)
    timeline = played.timeline
    await refresh_dora(sessions, timeline.at(180))
    async with write_session(sessions) as writing:
        await keep_rollouts(writing, stall_after=STALL_AFTER, source=SOURCE)
    await judge(sessions, timeline.at(180))
    # A commit whose reconciler.yaml is not YAML: a harvest error.
    broken = scenario.assignment("dev", "drone", "functional-test", "a: [\n")
    commit_at(fleet.platform, "dev", "Break dev", broken, timeline.at(182))
    timeline.go(183)
    await harvest()
    timeline.go(190)
    await fleet.report("drone-01")
    await judge(sessions, timeline.at(190))
    async with write_session(sessions) as writing:
        await clusters.decommission(
            writing, "large-01", now=timeline.at(195), stale_after=STALE_AFTER
        )
        await writing.execute(
            update(Cluster).where(Cluster.name == "drone-02").values(labels={"tier": "gold"})
        )
    return played


def minutes(played: Played, row: dict[str, Any]) -> float:
    moment = datetime.fromisoformat(row["at"])
    return (moment - played.timeline.base) / timedelta(minutes=1)


async def page(client: httpx.AsyncClient, played: Played, **params: Any) -> dict[str, Any]:
    """A page of B-5 to B+200 (unless asked otherwise)."""
    asked = {
        "since": played.timeline.at(-5).isoformat(),
        "until": played.timeline.at(200).isoformat(),
        "limit": 1000,
    } | params
    response = await client.get(URL, params=asked)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def seen(played: Played, rows: list[dict[str, Any]]) -> list[tuple[float, str, int | None]]:
    """Each row as (minutes after B, kind, clusters), in the order given."""
    return [(minutes(played, row), row["kind"], row["clusters"]) for row in rows]


def bucket(played: Played, at: float) -> float:
    """The minutes after B at which the health bucket (five minutes) holding B+`at` starts."""
    moment = played.timeline.at(at)
    into = moment - datetime(2000, 1, 1, tzinfo=UTC)
    return at - (into % timedelta(minutes=5)) / timedelta(minutes=1)


def expected(played: Played) -> list[tuple[float, str, int | None]]:
    """The whole history, newest first: the time in minutes after B, the kind, the clusters
    it counts (a rollout's milestone: those that had reached it)."""
    return [
        (195, "cluster.decommissioned", 1),
        (190, "cluster.recovered", 1),
        (184, "harvest.error", None),
        (182, "commit", None),
        (180, "cluster.stale", 4),
        # c3: four clusters expected, the second reached it at B+126.
        (130, "rollout.converged", 4),
        (126, "rollout.half", 2),
        (125, "rollout.first_cluster", 1),
        (125, "rollout.started", 1),
        (120, "commit", None),
        (100, "rollout.converged", 3),
        (bucket(played, 100), "health.recovered", 1),
        (75, "rollout.half", 2),
        (70, "rollout.failed", 1),
        (68, "rollout.stalled", 1),
        (bucket(played, 70), "health.regressed", 1),
        (65, "rollout.first_cluster", 1),
        (65, "rollout.started", 1),
        (60, "commit", None),
        (25, "rollout.converged", 3),
        (23, "rollout.stalled", 2),
        (20, "rollout.half", 2),
        (18, "rollout.stalled", 1),
        (15, "rollout.first_cluster", 1),
        (15, "rollout.started", 1),
        (10, "commit", None),
        # The head the clusters ran at B+0, reached by all three at once.
        (0, "rollout.converged", 3),
        (0, "rollout.half", 3),
        (0, "rollout.first_cluster", 3),
        (0, "rollout.started", 3),
    ]


async def test_every_source_in_time_order_with_its_counts(
    client: httpx.AsyncClient, played: Played
) -> None:
    rows = (await page(client, played))["items"]

    assert seen(played, rows) == expected(played)
    by_kind = {row["kind"]: row for row in rows}
    regressed = by_kind["health.regressed"]
    assert regressed["detail"] == {
        "clusters": 1,
        "failing": 1,
        "reasons": [{"reason": FAILURE[0], "clusters": 1}],
    }
    assert regressed["summary"] == (
        f"1 clusters turned not ready (1 failing) on dev: {FAILURE[0]} 1"
    )
    failed = by_kind["rollout.failed"]
    assert failed["detail"]["failed_cluster"] == "drone-02"
    assert failed["summary"].endswith(f"drone-02 failed ({FAILURE[0]})")
    commits = [row for row in rows if row["kind"] == "commit"]
    assert [row["detail"]["subject"] for row in commits] == [
        "Break dev",
        "Promote dev: c3",
        "Promote dev: c2",
        "Promote dev: c1",
    ]
    assert {row["detail"]["branch"] for row in commits} == {"dev"}
    assert by_kind["cluster.stale"]["summary"] == "4 clusters went stale on dev"
    assert by_kind["cluster.stale"]["detail"]["clusters"] == sorted(
        ["drone-01", "drone-02", "drone-03", "large-01"]
    )
    assert by_kind["harvest.error"]["detail"]["path"].endswith("reconciler.yaml")
    assert by_kind["cluster.decommissioned"]["detail"] == {"cluster": "large-01"}


async def test_pages_follow_each_other_without_gaps_or_repeats_while_rows_arrive(
    client: httpx.AsyncClient, played: Played, sessions: async_sessionmaker[AsyncSession]
) -> None:
    whole = (await page(client, played))["items"]

    paged: list[dict[str, Any]] = []
    cursor = None
    for number in range(20):
        params = {"limit": 4} | ({} if cursor is None else {"cursor": cursor})
        answer = await page(client, played, **params)
        paged += answer["items"]
        cursor = answer["next"]
        if number == 1:
            # A newer row while the pages are read: the later pages do not move.
            async with write_session(sessions) as writing:
                await clusters.decommission(
                    writing, "drone-03", now=played.timeline.at(199), stale_after=STALE_AFTER
                )
        if cursor is None:
            break
    first = await page(client, played, limit=1)

    assert paged == whole
    assert len(whole) == len(expected(played))
    assert seen(played, first["items"]) == [(199, "cluster.decommissioned", 1)]


def kinds_of(
    rows: list[tuple[float, str, int | None]], *kinds: str
) -> list[tuple[float, str, int | None]]:
    return [row for row in rows if row[1].startswith(kinds)]


async def test_filters_keep_the_rows_about_what_they_name(
    client: httpx.AsyncClient, played: Played
) -> None:
    every = expected(played)

    async def rows(**params: str) -> list[tuple[float, str, int | None]]:
        return seen(played, (await page(client, played, **params))["items"])

    # drone-02: the rollouts of its environment, its failure and recovery, its silence; not
    # the commits, the repository's error, others' recovery or decommission.
    drone2 = kinds_of(every, "rollout.", "health.", "cluster.stale")
    assert await rows(cluster="drone-02") == drone2
    assert await rows(selector="tier=gold") == drone2
    assert await rows(selector="tier in (gold),!retired") == drone2
    assert await rows(cluster="large-01") == kinds_of(
        every, "rollout.", "cluster.stale", "cluster.decommissioned"
    )
    # A cluster type: the rows about clusters of the type; drone-01's return is not.
    assert await rows(cluster_type="large") == kinds_of(
        every, "rollout.", "cluster.stale", "cluster.decommissioned"
    )
    assert await rows(selector="tier=silver") == []
    assert await rows(environment="dev") == [row for row in every if row[1] != "harvest.error"]
    assert await rows(environment="stage") == []
    assert await rows(workload=WORKLOAD) == []
    ranged = await rows(
        since=played.timeline.at(60).isoformat(), until=played.timeline.at(100).isoformat()
    )
    assert ranged == [row for row in every if 60 <= row[0] < 100]


async def test_health_rows_are_the_same_from_the_kept_readiness_turns(
    client: httpx.AsyncClient,
    played: Played,
    sessions: async_sessionmaker[AsyncSession],
    session: AsyncSession,
) -> None:
    asked: list[dict[str, Any]] = [
        {},
        {"cluster": "drone-02"},
        {"cluster_type": "large"},
        {"selector": "tier=gold"},
        {"environment": "dev"},
        # Bounds inside buckets: a bucket is in the range when its start is.
        {"since": played.timeline.at(68).isoformat(), "until": played.timeline.at(102).isoformat()},
    ]
    live = [await page(client, played, **params) for params in asked]

    # Kept up to between drone-02's regression (B+70) and its recovery (B+100): the timeline
    # reads the one kept and judges the other; then both kept.
    kept = []
    for now in (played.timeline.at(90), played.timeline.at(205)):
        await keep_readiness(sessions, now)
        kept.append([await page(client, played, **params) for params in asked])

    assert kept == [live, live]
    assert kinds_of(seen(played, live[0]["items"]), "health.") == [
        (bucket(played, 100), "health.recovered", 1),
        (bucket(played, 70), "health.regressed", 1),
    ]
    turns = await session.scalars(text("SELECT regressed FROM readiness_turn ORDER BY bucket"))
    assert list(turns) == [True, False]


async def test_a_report_come_in_late_is_counted_when_its_bucket_is_judged_again(
    client: httpx.AsyncClient,
    played: Played,
    fleet: Fleet,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # The job's round at B+215 keeps the buckets before B+215's; drone-01's report of turning
    # not ready at B+203 comes in after it, less than REREAD before the watermark.
    await keep_readiness(sessions, played.timeline.at(215))
    played.timeline.go(203)
    drone1 = fleet.clusters["drone-01"]
    drone1.run_platform(None, ready=False, reason="HealthCheckFailed")
    await drone1.report()
    assert bucket_of(played.timeline.at(203)) >= bucket_of(played.timeline.at(215)) - REREAD
    until = {"until": played.timeline.at(215).isoformat()}
    before = (await page(client, played, **until))["items"]

    await keep_readiness(sessions, played.timeline.at(216))
    after = (await page(client, played, **until))["items"]

    late = (bucket(played, 203), "health.regressed", 1)
    assert late not in seen(played, before)
    assert seen(played, after)[0] == late
    assert after[0]["detail"] == {
        "clusters": 1,
        "failing": 1,
        "reasons": [{"reason": "HealthCheckFailed", "clusters": 1}],
    }


FORGED_NUL = base64.urlsafe_b64encode(b'["2026-11-22T12:00:00+00:00", "a\\u0000b"]').decode()


@pytest.mark.parametrize(
    ("params", "status", "said"),
    [
        ({"cursor": "not-a-cursor"}, 422, "cursor: not a cursor the hub gave"),
        # Read as a cursor is read, but with a NUL in its key no text column can hold.
        ({"cursor": FORGED_NUL}, 422, "cursor: not a cursor the hub gave"),
        ({"selector": "tier in gold"}, 422, "selector: cannot read"),
        (
            {"since": "2026-11-22T12:00:00Z", "until": "2026-11-22T11:00:00Z"},
            422,
            "must be before until",
        ),
        ({"environment": "nowhere"}, 404, "environment 'nowhere' is unknown"),
        ({"cluster": "nowhere"}, 404, "cluster 'nowhere' is unknown"),
        ({"limit": "0"}, 422, "limit"),
    ],
)
async def test_bad_questions_are_refused_saying_what_is_wrong(
    client: httpx.AsyncClient, read_token: str, params: dict[str, str], status: int, said: str
) -> None:
    response = await client.get(
        URL, params=params, headers={"Authorization": f"Bearer {read_token}"}
    )

    assert response.status_code == status, response.text
    assert said in response.text
