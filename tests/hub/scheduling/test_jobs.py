"""Scheduling as a background job of the hub: following the configured control plane on a
schedule, one replica at a time. These tests use a database of their own: the job commits, as
it does in production."""

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import create_async_engine

from hub.app import create_app
from hub.background.runner import run_round
from hub.database import create_sessionmaker, exclusive
from hub.errors import SchedulingRunning
from hub.scheduling import repository, tasks
from hub.scheduling.schemas import ScheduleRequest
from hub.settings import HubSettings
from tests.conftest import DatabaseServer, hub_settings
from tests.hub.scheduling.fleet import ControlPlane, Platform
from tests.support import FakeClock


@pytest.fixture
def job_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


def settings_for(
    control_plane: ControlPlane, platform: Platform, tmp_path: Path, **overrides: Any
) -> HubSettings:
    return hub_settings(
        data_dir=tmp_path / "data",
        schedule_control_plane=str(control_plane.path),
        schedule_gitops=str(platform.path),
        **overrides,
    )


async def test_one_replica_schedules_at_a_time(
    job_database: str,
    control_plane: ControlPlane,
    platform: Platform,
    tmp_path: Path,
    clock: FakeClock,
) -> None:
    engine = create_async_engine(job_database)
    sessions = create_sessionmaker(engine)
    settings = settings_for(control_plane, platform, tmp_path)
    request = ScheduleRequest(
        control_plane=str(control_plane.path), gitops=str(platform.path), environments=["dev"]
    )
    try:
        async with exclusive(sessions, repository.SCHEDULE_LOCK) as held:  # another replica's run
            skipped = await run_round(tasks.SCHEDULE, sessions, settings, clock)
            with pytest.raises(SchedulingRunning):
                await tasks.schedule(sessions, settings, request, clock=clock)
        run = await tasks.scheduled_schedule(sessions, settings, clock=clock)
    finally:
        await engine.dispose()

    assert held
    assert skipped == "skipped"
    assert run is not None
    # No environments configured: every one the control plane declares.
    assert [(outcome.environment, outcome.commit) for outcome in run.environments] == [
        ("dev", platform.head("dev")),
        ("stage", platform.head("stage")),
    ]


async def test_hub_schedules_every_interval(
    job_database: str, control_plane: ControlPlane, platform: Platform, tmp_path: Path
) -> None:
    settings = settings_for(
        control_plane,
        platform,
        tmp_path,
        schedule_interval=timedelta(hours=2),
        schedule_environments=["stage"],
    )
    app = create_app(settings, job_database)
    ran: asyncio.Queue[JobExecutionEvent] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async with app.router.lifespan_context(app):
        scheduler = app.state.jobs.scheduler
        job = scheduler.get_job("schedule")
        first_run = job.next_run_time
        # Other jobs run too (the retention job at start): only this one's runs count.
        scheduler.add_listener(
            lambda event: (
                event.job_id == "schedule" and loop.call_soon_threadsafe(ran.put_nowait, event)
            ),
            EVENT_JOB_EXECUTED,
        )
        job.modify(next_run_time=datetime.now(UTC))
        event = await asyncio.wait_for(ran.get(), timeout=60)

    assert event.job_id == "schedule"
    assert event.exception is None
    assert job.trigger.interval == timedelta(hours=2)
    assert timedelta(hours=1, minutes=59) < first_run - datetime.now(UTC) <= timedelta(hours=2)
    assert platform.branches().keys() == {"stage"}


async def test_without_a_control_plane_there_is_no_scheduling_job(job_database: str) -> None:
    app = create_app(hub_settings(), job_database)

    async with app.router.lifespan_context(app):
        job = app.state.jobs.scheduler.get_job("schedule")

    assert job is None


def test_the_control_plane_and_the_gitops_repository_are_configured_together() -> None:
    with pytest.raises(ValidationError, match="are set together"):
        hub_settings(schedule_control_plane="https://git.example.com/platform/control-plane")
