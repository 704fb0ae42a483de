"""Fixtures of the harvester's tests: git repositories made on the spot, and a harvest that
runs in the test's rolled-back transaction (each unit of work a savepoint)."""

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.harvest import service, tasks
from hub.harvest.schemas import HarvestReport, RepositoryConfig
from hub.settings import HubSettings
from tests.conftest import hub_settings
from tests.hub.harvest.gitrepo import GitServer, WorkRepo
from tests.support import FakeClock

Harvest = Callable[..., Awaitable[HarvestReport]]
MakeRepo = Callable[..., WorkRepo]


@pytest.fixture
def make_repo(tmp_path: Path) -> MakeRepo:
    def make(name: str, branch: str = "dev") -> WorkRepo:
        return WorkRepo(tmp_path / "remotes" / name, branch)

    return make


GIT_TOKEN = "s3cr3t-t0ken-value"


@pytest.fixture
def served_git(tmp_path: Path) -> Iterator[Callable[[], GitServer]]:
    """Starts remotes over HTTP on loopback that take GIT_TOKEN; stopped after the test."""
    servers: list[GitServer] = []

    def start() -> GitServer:
        servers.append(GitServer(tmp_path / f"served-{len(servers)}", token=GIT_TOKEN))
        servers[-1].thread.start()
        return servers[-1]

    yield start
    for server in servers:
        server.server.shutdown()
        server.server.server_close()


@pytest.fixture
def sessions(session: AsyncSession) -> async_sessionmaker[AsyncSession]:
    """Sessions joining the test's transaction: a harvest's commits become savepoints."""
    assert session.bind is not None
    return async_sessionmaker(
        bind=session.bind,
        join_transaction_mode="create_savepoint",
        expire_on_commit=False,
        autoflush=False,
    )


@pytest.fixture
def harvest_settings(tmp_path: Path) -> HubSettings:
    return hub_settings(data_dir=tmp_path / "data")


@pytest.fixture
def harvest(
    sessions: async_sessionmaker[AsyncSession], harvest_settings: HubSettings, clock: FakeClock
) -> Harvest:
    """Runs a harvest as the scheduled job would (minus the lock), one minute later each time."""

    async def run(**options: Any) -> HarvestReport:
        clock.advance(minutes=1)
        return await tasks.run_harvest(sessions, harvest_settings, clock=clock, **options)

    return run


@pytest.fixture
def configure(session: AsyncSession, clock: FakeClock) -> Callable[..., Awaitable[int]]:
    """Adds a repository as the admin API does; returns its id."""

    async def add(url: str, role: str, **fields: Any) -> int:
        config = RepositoryConfig(url=url, role=role, **fields)  # type: ignore[arg-type]
        status = await service.add_repository(
            session, config, credentials_dir=None, allow_local=True, now=clock.now
        )
        await session.commit()
        return status.id

    return add
