"""Runs asked for through the API: each answers by its id for 24 hours (the periodic rounds
sharing the table keep KEPT_RUNS of each outcome), at most
MAX_REQUESTED_RUNS of a job are kept, and past that a request is answered 429 with Retry-After.

A database of its own: the runs complete on the jobs' thread and commit, as in production."""

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from hub.app import create_app
from hub.database import create_sessionmaker, write_session
from hub.runs.service import MAX_REQUESTED_RUNS, REQUESTED_RUNS_KEPT
from hub.security import API_TOKEN_PREFIX
from hub.tokens import service as token_service
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.support import FakeClock, bearer

WAIT = 60.0


@pytest.fixture
def runs_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@asynccontextmanager
async def hub(url: str, tmp_path: Path, clock: FakeClock) -> AsyncIterator[httpx.AsyncClient]:
    """A hub with its jobs over the store, and a client with an admin token for it."""
    engine = create_async_engine(url)
    token = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        async with write_session(create_sessionmaker(engine)) as session:
            await token_service.create_first_admin(session, token=token, token_secret=TOKEN_SECRET)
    finally:
        await engine.dispose()
    app = create_app(hub_settings(data_dir=tmp_path / "data"), url, clock=clock)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://hub", headers=bearer(token)
        ) as client,
    ):
        yield client


async def finished(client: httpx.AsyncClient, run_ids: list[int]) -> list[httpx.Response]:
    """Each run once none is running any more (or the wait is over)."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while True:
        answers = [await client.get(f"/api/v1/runs/{run_id}") for run_id in run_ids]
        running = [a for a in answers if a.status_code == 200 and a.json()["outcome"] == "running"]
        if not running or asyncio.get_running_loop().time() > deadline:
            return answers
        await asyncio.sleep(0.2)


async def test_every_run_of_a_burst_answers_by_its_id(runs_database: str, tmp_path: Path) -> None:
    async with hub(runs_database, tmp_path, FakeClock()) as client:
        accepted = [await client.post("/api/v1/runs/harvest", json={}) for _ in range(60)]
        assert [response.status_code for response in accepted] == [202] * 60
        answers = await finished(client, [response.json()["id"] for response in accepted])

    # Many more of one outcome than the KEPT_RUNS rounds of each a periodic job keeps.
    assert [answer.status_code for answer in answers] == [200] * 60
    assert {answer.json()["outcome"] for answer in answers} <= {"succeeded", "failed"}


async def test_past_the_bound_a_run_is_refused_until_the_oldest_expires(
    runs_database: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    oldest = clock.now - REQUESTED_RUNS_KEPT + timedelta(minutes=30)
    engine = create_async_engine(runs_database)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO job_run (job, started_at, finished_at, outcome, requested) "
                    "SELECT 'harvest', :oldest + n * interval '1 second', "
                    "       :oldest + n * interval '1 second', 'succeeded', true "
                    "FROM generate_series(0, :kept - 1) AS n"
                ),
                {"oldest": oldest, "kept": MAX_REQUESTED_RUNS},
            )
            first_id = await connection.scalar(text("SELECT min(id) FROM job_run"))
    finally:
        await engine.dispose()

    async with hub(runs_database, tmp_path, clock) as client:
        refused = await client.post("/api/v1/runs/harvest", json={})
        kept = await client.get(f"/api/v1/runs/{first_id}")
        clock.advance(minutes=30)
        accepted = await client.post("/api/v1/runs/harvest", json={})
        expired = await client.get(f"/api/v1/runs/{first_id}")
        second = await client.get(f"/api/v1/runs/{first_id + 1}")
        again = await client.post("/api/v1/runs/harvest", json={})

    assert refused.status_code == 429, refused.text
    assert refused.json()["error"] == "too_many_runs"
    assert refused.headers["retry-after"] == str(30 * 60)
    assert kept.status_code == 200
    assert accepted.status_code == 202, accepted.text
    assert expired.status_code == 404
    assert second.status_code == 200
    # Only the oldest expired: the bound is met again, until the second expires in a second.
    assert again.status_code == 429
    assert again.headers["retry-after"] == "1"
