"""Placement is the operator's: a report's claimed environment and cluster type never place or
move a cluster, nor create either; an admin places it (at registration or PUT
/api/v1/clusters/{name}/placement). With FLEETMARK_AGENT_PLACEMENT=first-report a first claim
places an unplaced cluster, into a declared environment only."""

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.harvest import service as harvest_service
from hub.harvest.schemas import RepositoriesFile
from tests.conftest import MakeAgent, MakeClient, RegisterCluster
from tests.support import Agent, FakeClock, bearer, kustomization, samples

# Names a report once created as environments and cluster types.
HOSTILE_NAMES = ["<x>", '"quoted"', "a b", "e" * 64, ""]


async def placement(client: httpx.AsyncClient, token: str, name: str) -> tuple[Any, Any]:
    detail = (await client.get(f"/api/v1/clusters/{name}", headers=bearer(token))).json()
    return detail["environment"], detail["cluster_type"]


async def placed_at(session: AsyncSession, name: str) -> datetime | None:
    """When the cluster was last placed, as the drift job reads it (a round judges the objects
    of the clusters placed since the last)."""
    found: datetime | None = await session.scalar(
        text("SELECT placed_at FROM cluster WHERE name = :name"), {"name": name}
    )
    return found


async def names(session: AsyncSession, table: str) -> list[str]:
    rows = await session.execute(text(f"SELECT name FROM {table} ORDER BY name"))
    return list(rows.scalars())


async def declare_environments(session: AsyncSession, *declared: str) -> None:
    """The repositories file's `environments:`, as each harvest applies it."""
    await harvest_service.sync_repositories_file(
        session, RepositoriesFile(environments=list(declared))
    )
    await session.commit()


@pytest.fixture
async def first_report(
    make_client: MakeClient, register_cluster: RegisterCluster, clock: FakeClock
) -> MakeAgent:
    """Agents of a hub with FLEETMARK_AGENT_PLACEMENT=first-report."""
    client = await make_client(agent_placement="first-report")

    async def make(name: str = "drone-dev-1", **registration: Any) -> Agent:
        token = await register_cluster(name, **registration)
        return Agent(client=client, clock=clock, cluster=name, token=token)

    return make


# --- by default, the operator places --------------------------------------------------------


async def test_a_claim_places_nothing_and_creates_nothing(
    make_agent: MakeAgent, session: AsyncSession, read_token: str
) -> None:
    prod = await make_agent("large-prod-1", environment="prod", cluster_type="large")
    await prod.send_ok([kustomization("app")], environment="prod", cluster_type="large")
    rogue = await make_agent("rogue-1")

    reply = await rogue.send_ok([kustomization("app")], environment="prod", cluster_type="large")
    other = await rogue.send_ok([], environment="qa", cluster_type="tiny")

    assert reply["accepted"] == 1
    assert reply["warnings"] == [
        "claimed prod/large ignored: the cluster is not placed; "
        "an admin places it (fleetmark clusters place)"
    ]
    assert other["warnings"] == [
        "claimed qa/tiny ignored: the cluster is not placed; "
        "an admin places it (fleetmark clusters place)"
    ]
    assert await placement(rogue.client, read_token, "rogue-1") == (None, None)
    assert await names(session, "environment") == ["prod"]
    assert await names(session, "cluster_type") == ["large"]
    listed = await rogue.client.get(
        "/api/v1/clusters", params={"environment": "prod"}, headers=bearer(read_token)
    )
    assert [item["name"] for item in listed.json()["items"]] == ["large-prod-1"]
    fleet = await rogue.client.get(
        "/api/v1/fleet", params={"environment": "prod"}, headers=bearer(read_token)
    )
    assert fleet.json()["totals"]["clusters"] == 1
    # The claim is kept on the cluster, the latest report's.
    detail = (await rogue.client.get("/api/v1/clusters/rogue-1", headers=bearer(read_token))).json()
    assert (detail["claimed_environment"], detail["claimed_cluster_type"]) == ("qa", "tiny")


async def test_registration_wins_over_a_disagreeing_claim(
    make_agent: MakeAgent, read_token: str
) -> None:
    agent = await make_agent("large-stage-1", environment="stage", cluster_type="large")

    reply = await agent.send_ok([], environment="dev", cluster_type="drone")
    agreeing = await agent.send_ok([], environment="stage", cluster_type="large")

    assert reply["warnings"] == [
        "claimed dev/drone ignored: the cluster is placed in stage/large; "
        "an admin places it (fleetmark clusters place)"
    ]
    assert agreeing["warnings"] == []
    assert await placement(agent.client, read_token, agent.cluster) == ("stage", "large")


async def test_the_cluster_page_and_list_say_unplaced_and_what_was_claimed(
    make_agent: MakeAgent, read_token: str
) -> None:
    placed = await make_agent("large-prod-1", environment="prod", cluster_type="large")
    await placed.send_ok([], environment="stage", cluster_type="large")
    unplaced = await make_agent("rogue-1")
    await unplaced.send_ok([], environment="prod")

    page = (await placed.client.get("/clusters/large-prod-1")).text
    assert "claimed stage/large by its agent, ignored" in page
    page = (await placed.client.get("/clusters/rogue-1")).text
    assert "unplaced: an admin places it" in page
    assert "claimed prod/- by its agent, ignored" in page
    fleet = (await placed.client.get("/")).text
    assert '<tr data-cluster="rogue-1">' in fleet
    row = fleet.split('<tr data-cluster="rogue-1">')[1].split("</tr>")[0]
    assert "<td>unplaced</td>" in row


@pytest.mark.parametrize("mode", ["operator", "first-report"])
@pytest.mark.parametrize("hostile", HOSTILE_NAMES)
async def test_a_claim_outside_the_registration_grammar_is_ignored_with_a_warning(
    make_client: MakeClient,
    register_cluster: RegisterCluster,
    clock: FakeClock,
    session: AsyncSession,
    read_token: str,
    hostile: str,
    mode: str,
) -> None:
    client = await make_client(agent_placement=mode)
    await register_cluster("drone-dev-1", environment="dev", cluster_type="drone")
    await declare_environments(session, "dev")
    agent = Agent(client, clock, "rogue-1", await register_cluster("rogue-1"))

    reply = await agent.send_ok([kustomization("app")], environment=hostile, cluster_type=hostile)

    assert reply["accepted"] == 1
    shown = hostile if len(hostile) <= 63 else hostile[:63] + "…"
    rule = "(lowercase letters, digits and '-', at most 63 characters)"
    assert reply["warnings"] == [
        f"cluster.environment {shown!r} ignored: not a name registration takes {rule}",
        f"cluster.cluster_type {shown!r} ignored: not a name registration takes {rule}",
    ]
    assert await names(session, "environment") == ["dev"]
    assert await names(session, "cluster_type") == ["drone"]
    detail = (await client.get("/api/v1/clusters/rogue-1", headers=bearer(read_token))).json()
    assert (detail["environment"], detail["claimed_environment"]) == (None, None)
    metrics = samples((await client.get("/metrics", headers=bearer(read_token))).text)
    labels = {value for _, labelled in metrics for key, value in labelled if key == "environment"}
    assert labels <= {"dev", ""}
    # The gate's and the diff's lists of environments name dev alone.
    gate = await client.get(
        "/api/v1/gates/promotion",
        params={"environment": hostile or "-", "commit": "1f2e3d4c"},
        headers=bearer(read_token),
    )
    assert gate.status_code == 404, gate.text
    assert gate.json()["detail"].endswith("(known: dev)")
    diff = await client.get(
        "/api/v1/diff", params={"environment": ["dev", hostile or "-"]}, headers=bearer(read_token)
    )
    assert diff.status_code == 404, diff.text
    assert diff.json()["detail"].endswith("(known: dev)")


# --- PUT /api/v1/clusters/{name}/placement ----------------------------------------------------


async def test_an_admin_places_a_cluster_and_its_agent_then_agrees(
    make_agent: MakeAgent, admin_token: str, read_token: str
) -> None:
    agent = await make_agent("rogue-1")
    await agent.send_ok([], environment="stage", cluster_type="large")

    response = await agent.client.put(
        "/api/v1/clusters/rogue-1/placement",
        json={"environment": "stage", "cluster_type": "large"},
        headers=bearer(admin_token),
    )

    assert response.status_code == 200, response.text
    detail = response.json()
    assert (detail["environment"], detail["cluster_type"]) == ("stage", "large")
    assert (await agent.send_ok([], environment="stage", cluster_type="large"))["warnings"] == []
    listed = await agent.client.get(
        "/api/v1/clusters", params={"environment": "stage"}, headers=bearer(read_token)
    )
    assert [item["name"] for item in listed.json()["items"]] == ["rogue-1"]


async def test_a_placement_change_ends_the_open_drift_periods(
    make_agent: MakeAgent, session: AsyncSession, clock: FakeClock, admin_token: str
) -> None:
    agent = await make_agent("drone-1", environment="dev", cluster_type="drone")
    await agent.send_ok([kustomization("app")])
    [cluster_id] = (await session.execute(text("SELECT id FROM cluster"))).scalars()
    began = clock.now - timedelta(hours=1)
    await session.execute(
        text(
            "INSERT INTO drift_period (cluster_id, started_at, reasons) "
            "VALUES (:cluster, :began, '{behind}'), (:cluster, :began, '{failing}')"
        ),
        {"cluster": cluster_id, "began": began},
    )
    await session.commit()

    async def place(environment: str) -> None:
        response = await agent.client.put(
            "/api/v1/clusters/drone-1/placement",
            json={"environment": environment, "cluster_type": "drone"},
            headers=bearer(admin_token),
        )
        assert response.status_code == 200, response.text

    async def ended() -> list[Any]:
        rows = await session.execute(text("SELECT ended_at FROM drift_period ORDER BY id"))
        return list(rows.scalars())

    await place("dev")  # no change: the periods stay open
    assert await ended() == [None, None]
    moved_at = clock.advance(minutes=5)
    await place("stage")
    assert await ended() == [moved_at, moved_at]


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ({"environment": "prod"}, 404, "cluster 'nowhere' is unknown"),
        ({"environment": "<x>"}, 422, "environment"),
        ({"environment": "prod", "cluster_type": "a b"}, 422, "cluster_type"),
        ({"cluster_type": "large"}, 422, "environment"),
    ],
)
async def test_placement_errors_name_what_is_wrong(
    client: httpx.AsyncClient, admin_token: str, body: dict[str, str], status: int, detail: str
) -> None:
    response = await client.put(
        "/api/v1/clusters/nowhere/placement", json=body, headers=bearer(admin_token)
    )

    assert response.status_code == status
    assert {"error", "detail"} <= set(response.json())
    assert detail in response.json()["detail"]


async def test_placement_needs_an_admin_token(make_agent: MakeAgent, read_token: str) -> None:
    agent = await make_agent("rogue-1")

    response = await agent.client.put(
        "/api/v1/clusters/rogue-1/placement",
        json={"environment": "prod"},
        headers=bearer(read_token),
    )

    assert response.status_code == 403
    assert set(response.json()) == {"error", "detail"}


# --- FLEETMARK_AGENT_PLACEMENT=first-report -------------------------------------------------


async def test_a_first_claim_places_into_a_declared_environment_only(
    first_report: MakeAgent, session: AsyncSession, read_token: str
) -> None:
    await declare_environments(session, "dev", "stage")
    await first_report("large-prod-1", environment="prod", cluster_type="large")
    declared = await first_report("drone-dev-1")
    undeclared = await first_report("rogue-1")

    placed = await declared.send_ok([], environment="dev", cluster_type="drone")
    refused = await undeclared.send_ok([], environment="prod", cluster_type="large")
    unknown = await undeclared.send_ok([], environment="qa", cluster_type="large")

    assert placed["warnings"] == []
    assert await placement(declared.client, read_token, "drone-dev-1") == ("dev", "drone")
    warning = (
        "ignored: a claim places a cluster only into a declared environment (the repositories "
        "file's environments or the control plane); an admin places it (fleetmark clusters place)"
    )
    assert refused["warnings"] == [f"claimed prod/large {warning}"]
    assert unknown["warnings"] == [f"claimed qa/large {warning}"]
    assert await placement(declared.client, read_token, "rogue-1") == (None, None)
    assert await names(session, "environment") == ["dev", "prod", "stage"]


async def test_a_later_claim_never_moves_a_cluster(
    first_report: MakeAgent, session: AsyncSession, read_token: str, clock: FakeClock
) -> None:
    await declare_environments(session, "dev", "stage")
    agent = await first_report()
    await agent.send_ok([], environment="dev", cluster_type="drone")
    placed = clock.now
    clock.advance(minutes=1)

    reply = await agent.send_ok([], environment="stage", cluster_type="large")

    assert reply["warnings"] == [
        "claimed stage/large ignored: the cluster is placed in dev/drone; "
        "an admin places it (fleetmark clusters place)"
    ]
    assert await placement(agent.client, read_token, agent.cluster) == ("dev", "drone")
    assert await placed_at(session, agent.cluster) == placed


async def test_a_claim_names_the_cluster_type_a_registration_left_open(
    first_report: MakeAgent, session: AsyncSession, read_token: str, clock: FakeClock
) -> None:
    agent = await first_report("drone-dev-1", environment="dev")

    other = await agent.send_ok([], environment="stage", cluster_type="large")
    unplaced = await placed_at(session, agent.cluster)
    clock.advance(minutes=1)
    reply = await agent.send_ok([], environment="dev", cluster_type="drone")

    assert other["warnings"] != []
    assert reply["warnings"] == []
    assert await placement(agent.client, read_token, agent.cluster) == ("dev", "drone")
    assert (unplaced, await placed_at(session, agent.cluster)) == (None, clock.now)


async def test_a_duplicate_report_places_nothing(
    first_report: MakeAgent, session: AsyncSession, read_token: str
) -> None:
    await declare_environments(session, "dev")
    agent = await first_report()
    await agent.send_ok([], sequence=1)

    reply = await agent.send_ok([], sequence=1, environment="dev", cluster_type="drone")

    assert reply["duplicate"] is True
    assert await placement(agent.client, read_token, agent.cluster) == (None, None)
