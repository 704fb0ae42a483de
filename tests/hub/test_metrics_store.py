"""What /metrics reads from the store: the background jobs' rounds, recorded by the replica
that did them, shown on any replica, only the newest of each job and outcome kept; and the
last snapshot served while the store cannot be read.

These tests use a database of their own: the jobs commit, as they do in production."""

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
from fastapi import FastAPI
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from hub.app import create_app
from hub.background.repository import KEPT_RUNS
from hub.background.runner import record_job_run
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.database import create_sessionmaker, exclusive
from hub.drift.repository import DRIFT_LOCK
from hub.models import JobRun
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.support import FakeClock, samples

JOBS = "fleetmark_job_"


@pytest.fixture
def job_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@asynccontextmanager
async def replica(
    url: str, tmp_path: Path, clock: FakeClock, **settings: object
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """A hub replica over the store, with its jobs' schedule, and a client for it."""
    app = create_app(
        hub_settings(data_dir=tmp_path / "data", metrics_refresh_interval=0, **settings),
        url,
        clock=clock,
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hub") as client,
    ):
        yield app, client


async def run_now(app: FastAPI, job: str) -> JobExecutionEvent:
    """Runs the replica's `job` now and waits until that round is over."""
    ran: asyncio.Queue[JobExecutionEvent] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    scheduler = app.state.jobs.scheduler

    def listener(event: JobExecutionEvent) -> None:
        if event.job_id == job:
            loop.call_soon_threadsafe(ran.put_nowait, event)

    scheduler.add_listener(listener, EVENT_JOB_EXECUTED)
    try:
        scheduler.get_job(job).modify(next_run_time=datetime.now(UTC))
        return await asyncio.wait_for(ran.get(), timeout=60)
    finally:
        scheduler.remove_listener(listener)


async def scrape(client: httpx.AsyncClient, prefix: str) -> dict[tuple[str, ...], float]:
    """The samples of a scrape whose names start with `prefix`: by (metric, label values in
    the order of the labels' names)."""
    response = await client.get("/metrics")
    assert response.status_code == 200
    return {
        (name, *(value for _, value in sorted(labels))): found
        for (name, labels), found in samples(response.text).items()
        if name.startswith(prefix)
    }


async def label_names(client: httpx.AsyncClient, prefix: str) -> set[tuple[str, str]]:
    """(label, metric) of every label of the scrape's samples whose names start with `prefix`."""
    response = await client.get("/metrics")
    return {
        (label, name)
        for (name, labels) in samples(response.text)
        if name.startswith(prefix)
        for label, _ in labels
    }


async def test_a_round_shows_on_every_replica(job_database: str, tmp_path: Path) -> None:
    # Each replica's clock is its own, so each round's times say which replica did it.
    ran_by, other = FakeClock(), FakeClock(datetime(2026, 12, 1, tzinfo=UTC))
    hour = {"drift_interval": timedelta(hours=1)}
    async with (
        replica(job_database, tmp_path / "a", ran_by, **hour) as (first, _),
        replica(job_database, tmp_path / "b", other, **hour) as (_, second),
    ):
        engine = create_async_engine(job_database)
        sessions = create_sessionmaker(engine)
        try:
            async with exclusive(sessions, DRIFT_LOCK) as held:  # a third replica's round
                ran_by.advance(minutes=1)
                skipped = await run_now(first, "drift")
            skipped_only = await scrape(second, JOBS)
            ran_by.advance(minutes=1)
            succeeded = await run_now(first, "drift")
        finally:
            await engine.dispose()
        after = await scrape(second, JOBS)
        after_labels = await label_names(second, JOBS)

    assert held
    assert (skipped.exception, succeeded.exception) == (None, None)
    skipped_at = (ran_by.now - timedelta(minutes=1)).timestamp()
    assert skipped_only[("fleetmark_job_last_run_timestamp_seconds", "drift", "skipped")] == (
        skipped_at
    )
    # A skipped round is not a run.
    assert ("fleetmark_job_last_success_timestamp_seconds", "drift") not in skipped_only
    assert after[("fleetmark_job_last_success_timestamp_seconds", "drift")] == (
        ran_by.now.timestamp()
    )
    assert after[("fleetmark_job_last_success_duration_seconds", "drift")] == 0
    assert after[("fleetmark_job_last_run_timestamp_seconds", "drift", "succeeded")] == (
        ran_by.now.timestamp()
    )
    assert after[("fleetmark_job_last_run_timestamp_seconds", "drift", "skipped")] == skipped_at
    # A job is named by `job_name`: Prometheus keeps `job` for its scrape job (and `instance`),
    # and would rename the label of a series that brought its own.
    assert {name for name, _ in after_labels} == {"job_name", "outcome"}


async def test_a_failed_round_keeps_its_error(job_database: str, tmp_path: Path) -> None:
    broken = tmp_path / "repositories.yaml"
    broken.write_text("repositories: []\n")
    clock = FakeClock()
    async with replica(job_database, tmp_path, clock, repositories_file=broken) as (app, client):
        # The hub refuses to start on a broken file; one broken after the start fails a round.
        broken.write_text("repositories: [\n")
        event = await run_now(app, "harvest")
        samples = await scrape(client, JOBS)
    engine = create_async_engine(job_database)
    try:
        async with engine.connect() as connection:
            errors = (
                await connection.scalars(select(JobRun.error).where(JobRun.job == "harvest"))
            ).all()
    finally:
        await engine.dispose()

    assert event.exception is None  # the jobs' wrapper took it: the schedule goes on
    assert samples[("fleetmark_job_last_run_timestamp_seconds", "harvest", "failed")] == (
        clock.now.timestamp()
    )
    assert ("fleetmark_job_last_success_timestamp_seconds", "harvest") not in samples
    assert len(errors) == 1
    assert errors[0].startswith("InvalidConfiguration: ")
    assert "invalid YAML" in errors[0]


async def test_only_the_newest_rounds_are_kept(job_database: str) -> None:
    engine = create_async_engine(job_database)
    sessions = create_sessionmaker(engine)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    try:
        await record_job_run(
            sessions, job="dora", started_at=start, finished_at=start, outcome="succeeded"
        )
        for minute in range(1, KEPT_RUNS + 6):
            at = start + timedelta(minutes=minute)
            await record_job_run(
                sessions, job="dora", started_at=at, finished_at=at, outcome="skipped"
            )
        async with sessions() as session:
            kept = (
                await session.execute(
                    select(JobRun.outcome, func.count(), func.min(JobRun.finished_at))
                    .where(JobRun.job == "dora")
                    .group_by(JobRun.outcome)
                )
            ).all()
    finally:
        await engine.dispose()

    # The success stays however many skipped rounds come after it.
    assert sorted(kept) == [
        ("skipped", KEPT_RUNS, start + timedelta(minutes=6)),
        ("succeeded", 1, start),
    ]


async def test_the_last_snapshot_is_served_while_the_store_cannot_be_read(
    job_database: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    engine = create_async_engine(job_database)
    never_reported = ("fleetmark_clusters", "drone", "dev", "never_reported")
    taken = ("fleetmark_fleet_snapshot_timestamp_seconds",)
    try:
        async with create_sessionmaker(engine)() as session:
            registration = ClusterRegistration(
                name="drone-dev", environment="dev", cluster_type="drone"
            )
            await cluster_service.register(session, registration, token_secret=TOKEN_SECRET)
            await session.commit()
        async with replica(job_database, tmp_path, clock) as (_, client):
            before = await scrape(client, "fleetmark_")
            async with engine.begin() as connection:  # the clusters out of reach
                await connection.execute(text("ALTER TABLE cluster RENAME TO cluster_away"))
            clock.advance(minutes=1)
            during = await scrape(client, "fleetmark_")
            async with engine.begin() as connection:
                await connection.execute(text("ALTER TABLE cluster_away RENAME TO cluster"))
            clock.advance(minutes=1)
            after = await scrape(client, "fleetmark_")
    finally:
        await engine.dispose()

    assert (before[never_reported], during[never_reported], after[never_reported]) == (1, 1, 1)
    # The snapshot served while the store could not be read is the one taken before.
    assert during[taken] == before[taken] == (clock.now - timedelta(minutes=2)).timestamp()
    assert after[taken] == clock.now.timestamp()
