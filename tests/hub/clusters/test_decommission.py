"""Decommissioning a cluster on a hub served on a real port: the gate, drift, the environment
diff and the fleet stop expecting it, its token is refused, its history stays and says when it
left; decommissioning again answers the same time; its name comes back by rotating its token."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest
from tests.conftest import TOKEN_SECRET
from tests.hub.conftest import ServedFleet, serve_diff_scenario
from tests.hub.drifting import evaluate
from tests.support import bearer, kustomization, report

# How long the jobs brought forward by a decommissioning may take to run.
JOBS_BOUND = 30.0


class Served:
    def __init__(self, live: ServedFleet, admin: str) -> None:
        self.live = live
        self.admin = admin

    async def get(self, path: str, **params: Any) -> Any:
        async with httpx.AsyncClient(base_url=self.live.hub.url) as client:
            response = await client.get(path, params=params, headers=bearer(self.live.token))
        assert response.status_code == 200, response.text
        return response.json()

    async def decommission(self, name: str, token: str | None = None) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.live.hub.url) as client:
            return await client.post(
                f"/api/v1/clusters/{name}/decommission", headers=bearer(token or self.admin)
            )


@pytest.fixture
async def served(served_fleet: ServedFleet) -> Served:
    """The environment diff's scenario (serve_diff_scenario), judged for drift, and an admin
    token."""
    live = served_fleet
    await serve_diff_scenario(live)
    async with live.sessions() as session:
        await evaluate(session, live.clock)
        admin = await token_service.create(
            session, TokenRequest(name="platform", scope="admin"), token_secret=TOKEN_SECRET
        )
        await session.commit()
    return Served(live, admin.token)


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """The kept results are refreshed by the hub's jobs, brought forward to now."""
    deadline = time.monotonic() + JOBS_BOUND
    while not await check():
        assert time.monotonic() < deadline, "the jobs did not refresh their results in time"
        await asyncio.sleep(0.2)


def _large_stage_cell(diff: Any) -> Any:
    row = next(row for row in diff["rows"]["items"] if row["cluster_type"] == "large")
    return next(cell for cell in row["environments"] if cell["environment"] == "stage")


async def test_a_decommissioned_cluster_is_no_longer_expected(served: Served) -> None:
    gate = {"environment": "stage", "workload": "hello-world-app", "version": "1.0.0"}
    before = await served.get("/api/v1/gates/promotion", **gate)
    assert "large-stage" in [cluster["name"] for cluster in before["clusters"]["items"]]
    drift = await served.get("/api/v1/drift")
    assert "large-stage" in {item["cluster"] for item in drift["items"]}
    diff = await served.get("/api/v1/diff", environment=["dev", "stage"], all="true")
    assert _large_stage_cell(diff)["deployed"]["failing"] == 1

    response = await served.decommission("large-stage")

    assert response.status_code == 200, response.text
    detail = response.json()
    assert detail["name"] == "large-stage"
    assert detail["decommissioned_at"] == served.live.clock.now.isoformat().replace("+00:00", "Z")
    assert detail["token_active"] is False
    after = await served.get("/api/v1/gates/promotion", **gate)
    assert [cluster["name"] for cluster in after["clusters"]["items"]] == ["drone-stage"]
    assert after["counts"]["expected"] == before["counts"]["expected"] - 1
    fleet = await served.get("/api/v1/fleet")
    assert "large-stage" not in [cluster["name"] for cluster in fleet["clusters"]["items"]]

    async def drift_forgets() -> bool:
        drift = await served.get("/api/v1/drift")
        return "large-stage" not in {item["cluster"] for item in drift["items"]}

    async def diff_forgets() -> bool:
        diff = await served.get("/api/v1/diff", environment=["dev", "stage"], all="true")
        deployed = _large_stage_cell(diff)["deployed"]
        return bool(deployed["clusters"] == 0 and deployed["failing"] == 0)

    await eventually(drift_forgets)
    await eventually(diff_forgets)


async def test_its_token_stops_working_and_its_history_stays(served: Served) -> None:
    token = served.live.registered["drone-stage"][0]
    await served.decommission("drone-stage")
    served.live.clock.advance(minutes=1)

    async with httpx.AsyncClient(base_url=served.live.hub.url) as client:
        refused = await client.post(
            "/api/v1/reports",
            json=report(
                "drone-stage",
                sequence=99,
                observed_at=served.live.clock.now,
                objects=[kustomization("app")],
            ),
            headers=bearer(token),
        )
    detail = await served.get("/api/v1/clusters/drone-stage")
    history = await served.get("/api/v1/history", cluster="drone-stage")
    listed = await served.get("/api/v1/clusters")
    everything = await served.get("/api/v1/clusters", decommissioned="true")

    assert refused.status_code == 401
    assert refused.json()["error"] == "not_authenticated"
    assert detail["decommissioned_at"] is not None
    assert detail["objects"], "what it ran when it left stays on record"
    assert history["items"], "its deployments stay in the history"
    assert "drone-stage" not in [item["name"] for item in listed["items"]]
    assert listed["total"] == 2
    kept = {item["name"]: item for item in everything["items"]}
    assert kept["drone-stage"]["decommissioned_at"] == detail["decommissioned_at"]
    assert kept["large-stage"]["decommissioned_at"] is None


async def test_again_answers_the_same_time_and_rotation_brings_it_back(served: Served) -> None:
    first = (await served.decommission("large-stage")).json()["decommissioned_at"]
    served.live.clock.advance(minutes=5)

    again = await served.decommission("large-stage")
    unknown = await served.decommission("no-such-cluster")
    read_only = await served.decommission("drone-stage", token=served.live.token)
    async with httpx.AsyncClient(base_url=served.live.hub.url) as client:
        registered_again = await client.post(
            "/api/v1/clusters",
            json={"name": "large-stage", "environment": "stage"},
            headers=bearer(served.admin),
        )

    assert again.status_code == 200
    assert again.json()["decommissioned_at"] == first
    assert unknown.status_code == 404
    assert unknown.json()["detail"].startswith("cluster 'no-such-cluster' is unknown (known: ")
    assert read_only.status_code == 403
    assert "scope 'admin'" in read_only.json()["detail"]
    assert registered_again.status_code == 409
    assert "was decommissioned at" in registered_again.json()["detail"]
    assert "rotate its token to bring it back into service" in registered_again.json()["detail"]

    async with httpx.AsyncClient(base_url=served.live.hub.url) as client:
        rotated = await client.post(
            "/api/v1/clusters/large-stage/token", headers=bearer(served.admin)
        )
    back = await served.get("/api/v1/clusters/large-stage")
    assert rotated.status_code == 200
    assert back["decommissioned_at"] is None
    assert back["token_active"] is True
