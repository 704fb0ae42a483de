"""Fixtures of the correlation tests (gate, drift, environment diff, DORA): the harvester's
(real git repositories harvested in the test's transaction) and a simulated fleet on top of
them."""

from collections.abc import Awaitable, Callable

import pytest

from tests.conftest import MakeAgent
from tests.correlation.fleet import Fleet
from tests.harvest.conftest import (
    Harvest,
    MakeRepo,
    configure,
    harvest,
    harvest_settings,
    make_repo,
    sessions,
)

__all__ = ["configure", "harvest", "harvest_settings", "make_repo", "sessions"]


@pytest.fixture
async def fleet(
    make_repo: MakeRepo,
    harvest: Harvest,
    make_agent: MakeAgent,
    configure: Callable[..., Awaitable[int]],
) -> Fleet:
    """platform-gitops and app-gitops as in the scenario's step 1, harvested; no cluster yet."""
    built = Fleet(
        make_repo("platform-gitops"), make_repo("app-gitops"), harvest, make_agent, configure
    )
    await built.start()
    return built
