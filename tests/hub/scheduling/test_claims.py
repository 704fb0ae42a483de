"""FLEETMARK_AGENT_PLACEMENT=first-report with a control plane: a first claim places a cluster
only into an environment the control plane declares, and only as one of the cluster types it
declares there."""

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from tests.conftest import MakeClient, RegisterCluster
from tests.hub.scheduling.conftest import Schedule
from tests.support import Agent, FakeClock, bearer


async def test_a_claim_places_only_into_what_the_control_plane_declares(
    schedule: Schedule,
    make_client: MakeClient,
    register_cluster: RegisterCluster,
    clock: FakeClock,
    read_token: str,
    session: AsyncSession,
) -> None:
    await schedule("dev")
    client = await make_client(agent_placement="first-report")

    async def claim(name: str, **claimed: str) -> dict[str, Any]:
        agent = Agent(client, clock, name, await register_cluster(name))
        return await agent.send_ok([], **claimed)

    async def placement(name: str) -> tuple[Any, Any]:
        response = await client.get(f"/api/v1/clusters/{name}", headers=bearer(read_token))
        detail = response.json()
        return detail["environment"], detail["cluster_type"]

    declared = await claim("large-dev-1", environment="dev", cluster_type="large")
    undeclared_type = await claim("huge-dev-1", environment="dev", cluster_type="huge")
    undeclared = await claim("large-stage-1", environment="stage", cluster_type="large")

    assert declared["warnings"] == []
    assert await placement("large-dev-1") == ("dev", "large")
    assert undeclared_type["warnings"] == [
        "claimed dev/huge ignored: the cluster is placed in dev, and a claim names only a "
        "cluster type the control plane declares there; an admin places it (fleetmark "
        "clusters place)"
    ]
    assert await placement("huge-dev-1") == ("dev", None)
    assert undeclared["warnings"][0].startswith("claimed stage/large ignored: a claim places")
    assert await placement("large-stage-1") == (None, None)
    types = await session.execute(text("SELECT name FROM cluster_type ORDER BY name"))
    assert list(types.scalars()) == ["large"]
