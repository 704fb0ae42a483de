"""The DORA rollup the job keeps answers as the raw judgement from the transitions does: the
endpoints before and after the first refresh, and `dora_rolled_up` against `dora_rollout` for
ranges cutting through rollouts; a refresh judges again what can still change."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tests.hub.dora.test_dora_api import iso
from tests.hub.dora_history import (
    LATE_CLUSTER,
    PLATFORM_CLUSTERS,
    WORKLOAD_CLUSTERS,
    Timeline,
    commit_at,
    commit_platform,
    commit_releases,
    play_platform,
    play_releases,
    refresh_dora,
    run_everything,
)
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock

DORA = "/api/v1/dora"
DEPLOYMENTS = "/api/v1/dora/deployments"


@dataclass(frozen=True)
class Played:
    timeline: Timeline
    # None: the platform commits' history; else the workload whose versions were released.
    workload: str | None


async def play(fleet: Fleet, timeline: Timeline, workload: str | None) -> Played:
    """A history of tests/hub/dora_history.py played up to B+180, not rolled up."""
    if workload is None:
        for name, cluster_type in PLATFORM_CLUSTERS.items():
            await fleet.add(name, cluster_type)
        for cluster in fleet.clusters.values():
            cluster.run_platform(fleet.platform_heads["dev"])
        await fleet.report()
        commits = commit_platform(fleet.platform, timeline)
        await fleet.harvest()
        late = await fleet.add(*LATE_CLUSTER)
        await play_platform(timeline, fleet.clusters, commits, late)
    else:
        for name, cluster_type in WORKLOAD_CLUSTERS.items():
            await fleet.add(name, cluster_type)
        run_everything(fleet.clusters, fleet.platform_heads["dev"], fleet.app_heads["dev"])
        await fleet.report()
        releases = {"1.0.0": fleet.app_heads["dev"]} | commit_releases(fleet.app, timeline)
        await fleet.harvest()
        await play_releases(timeline, fleet.clusters, releases)
    timeline.go(180)
    return Played(timeline, workload)


@pytest.fixture(params=[None, WORKLOAD], ids=["platform commits", "workload versions"])
async def played(
    request: pytest.FixtureRequest,
    fleet: Fleet,
    clock: FakeClock,
    client: httpx.AsyncClient,
    read_token: str,
) -> Played:
    client.headers["Authorization"] = f"Bearer {read_token}"
    return await play(fleet, Timeline(clock, clock.now), request.param)


# (since, until) in minutes after B; None: the default. The ends cut through rollouts: the
# platform's c1 reached by two of three clusters (22), c2 failing and unrestored (90), c3 half
# reached (127); the versions' 1.1.0 failed on one cluster and reached by one (47), by two (60).
RANGES = [(None, None), (-60, 22), (-60, 47), (5, 60), (5, 90), (30, 127), (61, 150)]


def asked(played: Played, since: float | None, until: float | None) -> dict[str, Any]:
    params: dict[str, Any] = {} if played.workload is None else {"workload": played.workload}
    if since is not None and until is not None:
        params |= {
            "since": played.timeline.at(since).isoformat(),
            "until": played.timeline.at(until).isoformat(),
        }
    return params


async def answers(client: httpx.AsyncClient, played: Played) -> list[dict[str, Any]]:
    """The figures and the rollouts behind them for every range, all environments and dev."""
    found = []
    for since, until in RANGES:
        for environments in ({}, {"environment": "dev"}):
            for url in (DORA, DEPLOYMENTS):
                params = asked(played, since, until) | environments
                response = await client.get(url, params=params)
                assert response.status_code == 200, response.text
                found.append(response.json())
    return found


async def test_the_endpoints_answer_from_the_rollup_as_from_the_transitions(
    played: Played, client: httpx.AsyncClient, sessions: async_sessionmaker[AsyncSession]
) -> None:
    live = await answers(client, played)
    await refresh_dora(sessions, played.timeline.clock.now)
    rolled_up = await answers(client, played)

    assert {answer["evaluated_at"] for answer in live} == {None}
    assert {answer["evaluated_at"] for answer in rolled_up} == {iso(played.timeline.at(180))}
    assert [answer | {"evaluated_at": None} for answer in rolled_up] == live
    # The ranges cut through rollouts: some are in progress, some failed and unrestored.
    dev = [item for answer in live if "environments" in answer for item in answer["environments"]]
    assert any(item["in_progress"] for item in dev)
    assert any(item["unrestored"] for item in dev)


async def rows(
    session: AsyncSession, function: str, workload: str | None, start: datetime, end: datetime
) -> list[dict[str, Any]]:
    found = await session.execute(
        text(
            f"SELECT * FROM {function}(NULL, CAST(:workload AS text), "
            "CAST(:window_start AS timestamptz), CAST(:as_of AS timestamptz))"
        ),
        {"workload": workload, "window_start": start, "as_of": end},
    )
    return [dict(row) for row in found.mappings()]


async def test_dashboards_get_the_raw_judgement_from_the_rollup_for_any_window(
    played: Played, session: AsyncSession, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """dora_rolled_up against dora_rollout with windows that start after some commits and end
    before some rollouts completed: the same rows."""
    at = played.timeline.at
    await refresh_dora(sessions, at(180))
    compared = []
    for start in (at(-60), at(35), at(61), at(101)):
        for end in (at(22), at(47), at(60), at(68), at(90), at(111), at(127), at(180), at(400)):
            if start < end:
                raw = await rows(session, "dora_rollout", played.workload, start, min(end, at(180)))
                rolled_up = await rows(session, "dora_rolled_up", played.workload, start, end)
                assert rolled_up == raw, (start, end)
                compared += raw

    cut = {(row["reached_clusters"], row["expected_clusters"]) for row in compared}
    assert any(reached < expected for reached, expected in cut)
    assert any(row["failed_at"] and row["restored_at"] is None for row in compared)


async def test_a_rollout_in_progress_at_one_refresh_is_judged_again_by_the_next(
    fleet: Fleet,
    clock: FakeClock,
    client: httpx.AsyncClient,
    read_token: str,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """At B+80 c1 has completed (at 25) and settled, c2 has failed (at 70) and is still in
    progress; by B+180 c2 completed and was restored at 100, and c3 came and completed."""
    client.headers["Authorization"] = f"Bearer {read_token}"
    timeline = (await play(fleet, Timeline(clock, clock.now), None)).timeline
    settle = timedelta(minutes=30)
    window = {"environment": "dev", "since": timeline.at(5).isoformat()}

    first = await refresh_dora(sessions, timeline.at(80), settle)
    before = (await client.get(DEPLOYMENTS, params=window)).json()
    second = await refresh_dora(sessions, timeline.at(180), settle)
    after = (await client.get(DEPLOYMENTS, params=window)).json()

    at = timeline.at
    # The platform commits and the workload, first judged in full: the dev head's rollout
    # (complete at B+0), c1 and c2.
    assert (first.judged_in_full, first.written) == (2, 3)
    assert before["evaluated_at"] == iso(at(80))
    [c2, c1] = before["items"]
    assert (c1["completed_at"], c2["completed_at"]) == (iso(at(25)), None)
    assert (c2["failed_at"], c2["restored_at"], c2["reached_clusters"]) == (iso(at(70)), None, 2)
    # c2 judged again, c3 new; c1 and the dev head's rollout kept.
    assert (second.judged_in_full, second.written) == (0, 2)
    assert after["evaluated_at"] == iso(at(180))
    [c3, c2_now, c1_now] = after["items"]
    assert c1_now == c1
    assert (c2_now["completed_at"], c2_now["restored_at"]) == (iso(at(100)), iso(at(100)))
    assert c3["completed_at"] == iso(at(130))


async def verdicts(sessions: async_sessionmaker[AsyncSession]) -> dict[str, tuple[Any, ...]]:
    """The rollup's platform rollouts by commit: expected and reached clusters, completion,
    failure (when, on how many clusters) and restoration."""
    async with sessions() as session:
        found = await session.execute(
            text(
                "SELECT revision, expected_clusters, reached_clusters, completed_at, failed_at, "
                "failed_clusters, restored_at FROM dora_rollup WHERE workload = ''"
            )
        )
    return {revision: tuple(row) for revision, *row in found}


async def test_a_force_push_does_not_rewrite_the_rollouts_that_happened(
    fleet: Fleet, clock: FakeClock, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """At B+185 c3 is rewritten away as c3' on c2; drone-01 runs c3' at B+188, the others at
    B+200. Until they do they run c3, off the branch, and only drone-01 takes part: c3' is
    judged so (complete as soon as drone-01 runs it), but judged so again, c2 would expect
    drone-01 alone and have no failure, and c3 would not be found."""
    timeline = (await play(fleet, Timeline(clock, clock.now), None)).timeline
    await refresh_dora(sessions, timeline.at(180))
    before = await verdicts(sessions)
    c2, c3 = fleet.platform.head("dev~1"), fleet.platform.head("dev")
    fleet.platform.reset(c2)
    rewritten = commit_at(
        fleet.platform, "dev", "Promote dev: c3'", {"drone/README.md": "c3'\n"}, timeline.at(185)
    )
    await fleet.harvest()
    timeline.go(188)
    fleet.clusters["drone-01"].run_platform(rewritten)
    await fleet.report("drone-01")
    await refresh_dora(sessions, timeline.at(190))
    during = await verdicts(sessions)
    timeline.go(200)
    for cluster in fleet.clusters.values():
        cluster.run_platform(rewritten)
    await fleet.report()
    await refresh_dora(sessions, timeline.at(230))
    after = await verdicts(sessions)

    at = timeline.at
    assert before[c2] == (3, 3, at(100), at(70), 1, at(100))
    assert before[c3] == (4, 4, at(130), None, 0, None)
    assert during == before | {rewritten: (1, 1, at(188), None, 0, None)}
    assert after == before | {rewritten: (4, 4, at(200), None, 0, None)}
