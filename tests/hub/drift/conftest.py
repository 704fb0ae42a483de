"""What the drift job's tests start from: two drones in dev, judged in sync (a module that
starts elsewhere names its own `dev`)."""

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from tests.hub.drifting import evaluate
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock


@pytest.fixture
async def dev(fleet: Fleet, session: AsyncSession, clock: FakeClock) -> Fleet:
    """Two drones in dev running the platform head, judged in sync."""
    for name in ("drone-01", "drone-02"):
        cluster = await fleet.add(name, "drone")
        cluster.run_platform(fleet.platform_heads["dev"])
    await fleet.report()
    await evaluate(session, clock)
    return fleet
