"""The drift evaluation as a background job of the hub: every `drift_interval`, on one replica
at a time, committing its verdicts.

These tests use a database of their own: the job commits, as it does in production."""

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine

from hub.app import create_app
from hub.background.runner import run_round
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.database import create_sessionmaker, exclusive
from hub.drift import repository, tasks
from hub.models import DriftEvaluation, DriftPeriod
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.hub.drifting import drift
from tests.support import FakeClock


@pytest.fixture
def job_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


async def test_one_replica_evaluates_at_a_time(
    job_database: str, tmp_path: Path, clock: FakeClock
) -> None:
    engine = create_async_engine(job_database)
    sessions = create_sessionmaker(engine)
    settings = hub_settings(data_dir=tmp_path / "data")
    try:
        async with sessions() as session:
            await cluster_service.register(
                session, ClusterRegistration(name="drone-01"), token_secret=TOKEN_SECRET
            )
            await session.commit()
        async with exclusive(sessions, repository.DRIFT_LOCK) as held:  # another replica's run
            skipped = await run_round(tasks.DRIFT, sessions, settings, clock)
        async with sessions() as session:
            before = await drift(session, clock)
        evaluation = await tasks.scheduled_drift(sessions, settings, clock=clock)
        async with sessions() as session:
            evaluated_at = await session.scalar(select(DriftEvaluation.evaluated_at))
            periods = (await session.execute(select(DriftPeriod.started_at))).scalars().all()
    finally:
        await engine.dispose()

    assert held
    assert skipped == "skipped"
    # Not judged yet: the answer says so, and lists the silent cluster all the same.
    assert before.evaluated_at is None
    assert [(item.cluster, item.agent) for item in before.items] == [("drone-01", "never_reported")]
    assert evaluation is not None
    assert evaluation.periods_opened == 1
    # Committed: a cluster that never reported is drifted from the first evaluation on.
    assert (evaluated_at, periods) == (clock.now, [clock.now])


async def test_hub_evaluates_drift_every_interval(job_database: str, tmp_path: Path) -> None:
    settings = hub_settings(data_dir=tmp_path / "data", drift_interval=timedelta(minutes=5))
    app = create_app(settings, job_database)
    ran: asyncio.Queue[JobExecutionEvent] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async with app.router.lifespan_context(app):
        scheduler = app.state.jobs.scheduler
        job = scheduler.get_job("drift")
        first_run = job.next_run_time
        # Other jobs run too (the retention job at start): only this one's runs count.
        scheduler.add_listener(
            lambda event: (
                event.job_id == "drift" and loop.call_soon_threadsafe(ran.put_nowait, event)
            ),
            EVENT_JOB_EXECUTED,
        )
        job.modify(next_run_time=datetime.now(UTC))
        event = await asyncio.wait_for(ran.get(), timeout=60)

    assert job.trigger.interval == timedelta(minutes=5)
    assert timedelta(minutes=4, seconds=59) < first_run - datetime.now(UTC) <= timedelta(minutes=5)
    assert event.exception is None
    engine = create_async_engine(job_database)
    try:
        async with engine.connect() as connection:
            evaluated = await connection.scalar(select(DriftEvaluation.evaluated_at))
    finally:
        await engine.dispose()
    assert evaluated is not None
