"""Fixtures of the scheduler's tests in the hub: the reference fleet's repositories made on the
spot, and scheduling runs in the test's rolled-back transaction (each unit of work a savepoint)."""

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.scheduling import tasks
from hub.scheduling.schemas import EnvironmentOutcome, ScheduleRequest
from hub.settings import HubSettings
from tests.conftest import hub_settings
from tests.hub.harvest.conftest import sessions
from tests.hub.scheduling.fleet import ControlPlane, Platform, reference_fleet
from tests.support import FakeClock

__all__ = ["sessions"]

Schedule = Callable[..., Awaitable[EnvironmentOutcome]]


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[ControlPlane, Platform]:
    return reference_fleet(tmp_path / "remotes")


@pytest.fixture
def control_plane(fleet: tuple[ControlPlane, Platform]) -> ControlPlane:
    return fleet[0]


@pytest.fixture
def platform(fleet: tuple[ControlPlane, Platform]) -> Platform:
    return fleet[1]


@pytest.fixture
def scheduling_settings(tmp_path: Path) -> HubSettings:
    return hub_settings(data_dir=tmp_path / "data")


@pytest.fixture
def schedule(
    sessions: async_sessionmaker[AsyncSession],
    scheduling_settings: HubSettings,
    clock: FakeClock,
    control_plane: ControlPlane,
    platform: Platform,
) -> Schedule:
    """Schedules one environment as `fleetmark schedule` does (minus the lock), a minute later
    each time; returns what happened to it."""

    async def run(environment: str, **options: Any) -> EnvironmentOutcome:
        clock.advance(minutes=1)
        request = ScheduleRequest(
            control_plane=str(control_plane.path),
            gitops=str(platform.path),
            environments=[environment],
            **options,
        )
        result = await tasks.run_schedule(sessions, scheduling_settings, request, clock=clock)
        [outcome] = result.environments
        return outcome

    return run
