"""Decision bodies of GET /api/v1/gates/decision for a gate that is pending, then passed, then
failed: answered by a real hub over a real database, as an engine polling it would read them."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, bearer

DECISION = "/api/v1/gates/decision"


@dataclass(frozen=True)
class Decisions:
    """One gate's decision bodies at each verdict, and when its clusters first ran the commit."""

    commit: str
    applied_at: datetime
    bodies: dict[str, dict[str, Any]]


async def decide(client: httpx.AsyncClient, token: str, **params: Any) -> dict[str, Any]:
    response = await client.get(DECISION, params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def pending_passed_failed(
    fleet: Fleet, client: httpx.AsyncClient, token: str, clock: FakeClock
) -> Decisions:
    """dev's head on a drone and a large: halfway through the ten-minute soak (pending), after
    it (passed), and after the large failed its health check on it (failed)."""
    head = fleet.platform_heads["dev"]
    await fleet.add("drone-01", "drone")
    await fleet.add("large-01", "large")
    for cluster in fleet.clusters.values():
        cluster.run_platform(head)
    applied_at = clock.now
    await fleet.report()
    bodies = {}
    for verdict, minutes in (("pending", 5), ("passed", 5)):
        clock.advance(minutes=minutes)
        await fleet.report()
        bodies[verdict] = await decide(client, token, environment="dev", commit=head)
    fleet.clusters["large-01"].run_platform(head, ready=False, reason="HealthCheckFailed")
    clock.advance(minutes=1)
    await fleet.report("large-01")
    bodies["failed"] = await decide(client, token, environment="dev", commit=head)
    return Decisions(head, applied_at, bodies)
