"""The timeline (GET /api/v1/timeline) over the platform history of tests/hub/dora_history.py:
the commits c1-c3 of dev, their rollouts as the rollouts job kept them, drone-02's failure on c2
and its recovery, the fleet gone stale at B+180 and drone-01 back at B+190, large-01
decommissioned at B+195."""

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.clusters import service as clusters
from hub.database import write_session
from hub.drift.service import Announcing, evaluate_drift
from hub.models import Cluster
from hub.rollouts.service import keep_rollouts
from tests.hub.dora.test_dora_rollup import Played, play
from tests.hub.dora_history import FAILURE, Timeline, refresh_dora
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


async def rows(
    client: httpx.AsyncClient, played: Played, **params: Any
) -> list[dict[str, Any]]:
    """Every row of B-5 to B+200, page after page."""
    asked = {
        "since": played.timeline.at(-5).isoformat(),
        "until": played.timeline.at(200).isoformat(),
    } | params
    found: list[dict[str, Any]] = []
    while True:
        response = await client.get(URL, params=asked)
        assert response.status_code == 200, response.text
        page = response.json()
        found += page["items"]
        if page["next"] is None:
            return found
        asked["cursor"] = page["next"]


async def test_dump(client: httpx.AsyncClient, played: Played) -> None:
    for row in await rows(client, played):
        print(round(minutes(played, row), 1), row["kind"], row["clusters"], row["summary"])
    assert False
