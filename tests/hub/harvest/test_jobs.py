"""The harvest as a background job of the hub: on a schedule, one replica at a time.

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
from hub.database import create_sessionmaker, exclusive
from hub.errors import HarvestRunning
from hub.harvest import repository, tasks
from hub.models import GitBranch
from hub.settings import HubSettings
from tests.conftest import DatabaseServer, hub_settings
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import MakeRepo
from tests.support import FakeClock


@pytest.fixture
def job_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


@pytest.fixture
def configured(make_repo: MakeRepo, tmp_path: Path) -> Path:
    app = make_repo("app-gitops")
    app.commit("Manifests", {"uat-test/deployment.yaml": scenario.deployment("1.0.0")})
    file = tmp_path / "repositories.yaml"
    file.write_text(f"repositories:\n- url: {app.url}\n  role: app\n  branches: [dev]\n")
    return file


def settings_for(configured: Path, tmp_path: Path, **overrides: object) -> HubSettings:
    return hub_settings(data_dir=tmp_path / "data", repositories_file=configured, **overrides)


async def test_one_replica_harvests_at_a_time(
    job_database: str, configured: Path, tmp_path: Path, clock: FakeClock
) -> None:
    engine = create_async_engine(job_database)
    sessions = create_sessionmaker(engine)
    settings = settings_for(configured, tmp_path)
    try:
        async with exclusive(sessions, repository.HARVEST_LOCK) as held:  # another replica's run
            skipped = await run_round(tasks.HARVEST, sessions, settings, clock)
            with pytest.raises(HarvestRunning):
                await tasks.harvest(sessions, settings, clock=clock)
        report = await tasks.scheduled_harvest(sessions, settings, clock=clock)
    finally:
        await engine.dispose()

    assert held
    assert skipped == "skipped"
    assert [b.new_commits for b in report.repositories[0].branches] == [1]


async def test_hub_harvests_every_interval(
    job_database: str, configured: Path, tmp_path: Path
) -> None:
    settings = settings_for(configured, tmp_path, harvest_interval=timedelta(hours=2))
    app = create_app(settings, job_database)
    ran: asyncio.Queue[JobExecutionEvent] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async with app.router.lifespan_context(app):
        scheduler = app.state.jobs.scheduler
        job = scheduler.get_job("harvest")
        first_run = job.next_run_time
        # Other jobs run too (the retention job at start): only this one's runs count.
        scheduler.add_listener(
            lambda event: (
                event.job_id == "harvest" and loop.call_soon_threadsafe(ran.put_nowait, event)
            ),
            EVENT_JOB_EXECUTED,
        )
        job.modify(next_run_time=datetime.now(UTC))
        event = await asyncio.wait_for(ran.get(), timeout=60)
        next_run = scheduler.get_job("harvest").next_run_time

    assert job.trigger.interval == timedelta(hours=2)
    assert timedelta(hours=1, minutes=59) < first_run - datetime.now(UTC) <= timedelta(hours=2)
    assert event.exception is None
    assert next_run - datetime.now(UTC) > timedelta(hours=1, minutes=59)
    engine = create_async_engine(job_database)
    try:
        async with engine.connect() as connection:
            harvested = (
                await connection.execute(select(GitBranch.name, GitBranch.harvested_at))
            ).all()
    finally:
        await engine.dispose()
    assert [name for name, at in harvested if at is not None] == ["dev"]


async def test_hub_with_the_harvest_turned_off_never_harvests(
    job_database: str, configured: Path, tmp_path: Path
) -> None:
    app = create_app(settings_for(configured, tmp_path, harvest_enabled=False), job_database)

    async with app.router.lifespan_context(app):
        jobs = [job.id for job in app.state.jobs.scheduler.get_jobs()]

    assert "harvest" not in jobs
    assert jobs  # the other jobs still run
