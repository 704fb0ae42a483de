"""`fleetmark status` and `fleetmark history` against a hub served on a real port: what a user
reads in the tables and the page footers, what a script reads in the JSON, and how a refused
token or an unreachable hub ends the command."""

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from click.testing import Result
from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from typer.testing import CliRunner

from hub.cli import app as cli
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.models import Environment
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest
from tests.agent.conftest import LiveHub, free_port
from tests.conftest import TOKEN_SECRET
from tests.support import SHA_A, SHA_B, START, Agent, FakeClock, kustomization

V1 = f"dev@sha1:{SHA_A}"
V2 = f"dev@sha1:{SHA_B}"
CLUSTERS = {
    "drone-dev-1": ("dev", "drone"),
    "drone-dev-2": ("dev", "drone"),
    "large-dev-1": ("dev", "large"),
    "drone-stage-1": ("stage", "drone"),
}


@dataclass(frozen=True)
class Served:
    hub: LiveHub
    token: str

    def options(self) -> list[str]:
        return ["--hub", self.hub.url, "--token", self.token]


@pytest.fixture
async def served(migrated_database: str) -> AsyncIterator[Served]:
    """A hub on a port of its own over a committed database, 15 minutes into this story:

    - drone-dev-1 applied `app` at V1 and `infra` at V1, five minutes later `app` at V2 while
      `infra` began to fail; it reports every few minutes;
    - drone-dev-2 applied `app` at V1 and has been silent since (stale);
    - large-dev-1 is registered but its agent never reported;
    - drone-stage-1 applied `app` at V1 and reports.
    """
    url = migrated_database
    clock = FakeClock()
    engine = create_async_engine(url)
    hub = LiveHub(url, clock)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            tokens = {
                name: (
                    await cluster_service.register(
                        session,
                        ClusterRegistration(
                            name=name, environment=environment, cluster_type=cluster_type
                        ),
                        token_secret=TOKEN_SECRET,
                    )
                ).token
                for name, (environment, cluster_type) in CLUSTERS.items()
            }
            for name, position in (("dev", 0), ("stage", 1)):
                await session.execute(
                    update(Environment).where(Environment.name == name).values(position=position)
                )
            read = await token_service.create(
                session, TokenRequest(name="laptop", scope="read"), token_secret=TOKEN_SECRET
            )
            await session.commit()
        hub.start()
        async with httpx.AsyncClient(base_url=hub.url) as client:
            agents = {name: Agent(client, clock, name, tokens[name]) for name in CLUSTERS}
            await agents["drone-dev-1"].send_ok(
                [kustomization("app", V1), kustomization("infra", V1)], full_snapshot=True
            )
            await agents["drone-dev-2"].send_ok([kustomization("app", V1)], full_snapshot=True)
            await agents["drone-stage-1"].send_ok([kustomization("app", V1)], full_snapshot=True)
            clock.advance(minutes=5)
            failing = kustomization("infra", V1, ready=False, reason="BuildFailed")
            await agents["drone-dev-1"].send_ok(
                [kustomization("app", V2), failing], full_snapshot=True
            )
            clock.advance(minutes=10)
            for name in ("drone-dev-1", "drone-stage-1"):
                await agents[name].send_ok()
        yield Served(hub, read.token)
    finally:
        if hub.running:
            hub.stop()
        await engine.dispose()


async def fleetmark(*args: str, env: dict[str, str] | None = None) -> Result:
    # Wide enough that no table row wraps: each row reads as one line.
    environment = {"COLUMNS": "220"} | (env or {})
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args), env=environment)


def words(text: str) -> str:
    return " ".join(text.split())


def row(output: str, first: str) -> list[str]:
    """The cells of the table line that begins with `first`."""
    for line in output.splitlines():
        cells = line.split()
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no line begins with {first!r} in:\n{output}")


def names(output: str) -> list[str]:
    return [line.split()[0] for line in output.splitlines() if line.split()[:1] in CLUSTER_ROWS]


CLUSTER_ROWS = [[name] for name in CLUSTERS]


async def test_status_counts_clusters_and_objects_per_environment_and_cluster_type(
    served: Served,
) -> None:
    result = await fleetmark("status", *served.options())

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "fleet at 2026-11-22 12:17:30, stale after 10m of silence" in words(out)
    # clusters, reporting, stale, never reported; objects, ready, progressing, suspended; drift
    # as `fleetmark drift` counts it (no evaluation yet: the silent clusters' objects, or one
    # for a cluster without any): drifted, behind, failing, stale, live drift, other
    assert row(out, "dev") == ["dev", *"3111", *"3200", *"200200"]
    assert row(out, "large") == ["large", *"1001", *"0000", *"100100"]
    assert row(out, "stage") == ["stage", *"1100", *"1100", *"000000"]
    assert row(out, "all") == ["all", *"4211", *"4300", *"200200"]
    # The page of clusters, in promotion order, each with its agent's state and last report.
    assert row(out, "drone-dev-1") == [
        *("drone-dev-1", "dev", "drone", "reporting", "0s", "ago"),
        *"2100",
        *"000000",
    ]
    assert row(out, "drone-dev-2")[3:6] == ["stale", "15m", "ago"]
    assert row(out, "large-dev-1")[3:7] == ["never", "reported", "-", "0"]
    assert names(out) == ["drone-dev-1", "drone-dev-2", "large-dev-1", "drone-stage-1"]
    assert out.rstrip().endswith("page 1 of 1 · clusters 1-4 of 4 · last page")


async def test_status_pages_and_filters(served: Served) -> None:
    env = {"FLEETMARK_HUB_URL": served.hub.url, "FLEETMARK_TOKEN": served.token}

    first = await fleetmark("status", "--limit", "2", env=env)
    second = await fleetmark("status", "--limit", "2", "--offset", "2", env=env)
    stage = await fleetmark("status", "--environment", "stage", env=env)
    drones = await fleetmark("status", "-t", "drone", "--offset", "9", env=env)

    assert first.exit_code == second.exit_code == stage.exit_code == drones.exit_code == 0
    assert names(first.stdout) == ["drone-dev-1", "drone-dev-2"]
    assert first.stdout.rstrip().endswith("page 1 of 2 · clusters 1-2 of 4 · next: --offset 2")
    assert names(second.stdout) == ["large-dev-1", "drone-stage-1"]
    assert second.stdout.rstrip().endswith("page 2 of 2 · clusters 3-4 of 4 · last page")
    # The counts follow the filter: only stage's row and its cluster type remain.
    assert row(stage.stdout, "all") == ["all", *"1100", *"1100", *"000000"]
    assert "dev" not in [line.split()[:1] for line in stage.stdout.splitlines()]
    assert names(stage.stdout) == ["drone-stage-1"]
    # Past the last page: no table of clusters, and the footer says how many there are.
    assert names(drones.stdout) == []
    assert drones.stdout.rstrip().endswith("no clusters from --offset 9 (3 in all)")


async def test_status_as_json_is_the_hubs_answer(served: Served) -> None:
    result = await fleetmark("status", "--limit", "3", "-o", "json", *served.options())

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["totals"]["clusters"] == 4
    assert body["totals"]["objects"]["failing"] == 1
    assert [item["name"] for item in body["environments"]] == ["dev", "stage"]
    page = body["clusters"]
    assert (page["total"], page["limit"], page["offset"]) == (4, 3, 0)
    assert [(item["name"], item["agent"]) for item in page["items"]] == [
        ("drone-dev-1", "reporting"),
        ("drone-dev-2", "stale"),
        ("large-dev-1", "never_reported"),
    ]


def deployments(output: str) -> list[list[str]]:
    """History rows as [time, cluster, environment/type, object, applied, before, ready...]."""
    return [
        line.split()[1:]
        for line in output.splitlines()
        if line.split()[:1] == [START.date().isoformat()]
    ]


async def test_history_lists_deployments_newest_first_a_page_at_a_time(served: Served) -> None:
    first = await fleetmark("history", "--limit", "2", *served.options())
    rest = await fleetmark("history", "--limit", "2", "--offset", "2", *served.options())
    last = await fleetmark("history", "--limit", "2", "--offset", "4", *served.options())

    assert first.exit_code == rest.exit_code == last.exit_code == 0, first.output
    # Not a terminal: the commits whole, as a script or a log wants them.
    a, b = SHA_A, SHA_B
    assert deployments(first.stdout) == [
        ["12:07:30", "drone-dev-1", "dev/drone", "Kustomization/flux-system/app", b, a, "yes"],
        ["12:02:30", "drone-dev-1", "dev/drone", "Kustomization/flux-system/app", a, "-", "yes"],
    ]
    assert first.stdout.rstrip().endswith("page 1 · deployments 1-2 · next: --offset 2")
    assert [(cells[1], cells[3]) for cells in deployments(rest.stdout)] == [
        ("drone-dev-1", "Kustomization/flux-system/infra"),
        ("drone-dev-2", "Kustomization/flux-system/app"),
    ]
    assert rest.stdout.rstrip().endswith("page 2 · deployments 3-4 · next: --offset 4")
    assert [cells[1] for cells in deployments(last.stdout)] == ["drone-stage-1"]
    assert last.stdout.rstrip().endswith("page 3 · deployments 5-5 · last page")


async def test_history_filters_by_placement_cluster_object_and_time(served: Served) -> None:
    options = served.options()
    after = (START + timedelta(minutes=1)).isoformat()

    app_on_drone = await fleetmark(
        "history", "--cluster", "drone-dev-1", "--object", "app", "-o", "json", *options
    )
    since = await fleetmark("history", "--since", after, *options)
    until_in_stage = await fleetmark(
        "history", "--until", after, "--environment", "stage", "-t", "drone", *options
    )
    nothing = await fleetmark("history", "--cluster", "large-dev-1", *options)

    assert app_on_drone.exit_code == 0, app_on_drone.output
    body: dict[str, Any] = json.loads(app_on_drone.stdout)
    assert [(item["applied_sha"], item["previous_sha"]) for item in body["items"]] == [
        (SHA_B, SHA_A),
        (SHA_A, None),
    ]
    assert (body["limit"], body["offset"], body["next_offset"]) == (100, 0, None)
    assert [cells[:4] for cells in deployments(since.stdout)] == [
        ["12:07:30", "drone-dev-1", "dev/drone", "Kustomization/flux-system/app"]
    ]
    assert since.stdout.rstrip().endswith("page 1 · deployments 1-1 · last page")
    assert [cells[1:3] for cells in deployments(until_in_stage.stdout)] == [
        ["drone-stage-1", "stage/drone"]
    ]
    assert nothing.exit_code == 0
    assert nothing.stdout.strip() == "no deployments"


async def test_bad_times_are_refused_with_what_is_wrong(served: Served) -> None:
    unreadable = await fleetmark("history", "--since", "yesterday", *served.options())
    backwards = await fleetmark(
        "history",
        "--since",
        "2026-11-22T13:00:00Z",
        "--until",
        "2026-11-22T12:00:00Z",
        *served.options(),
    )

    assert unreadable.exit_code == 2
    assert "error: --since: 'yesterday' is neither a time" in words(unreadable.stderr)
    # The hub's own refusal, in its words.
    assert backwards.exit_code == 2
    assert (
        "error: since: 2026-11-22T13:00:00+00:00 is not before until 2026-11-22T12:00:00+00:00 "
        "(HTTP 422)" in words(backwards.stderr)
    )


async def test_a_refused_or_missing_token_ends_the_command_with_the_hubs_message(
    served: Served,
) -> None:
    wrong = ["--hub", served.hub.url, "--token", "fma_nope"]

    status = await fleetmark("status", *wrong)
    history = await fleetmark("history", "--hub", served.hub.url)

    assert (status.exit_code, status.stdout) == (2, "")
    assert words(status.stderr) == "error: the API token is unknown or revoked (HTTP 401)"
    assert (history.exit_code, history.stdout) == (2, "")
    assert words(history.stderr) == (
        "error: an API token is required (Authorization: Bearer <token>) (HTTP 401); "
        "give an API token with --token, --token-file or FLEETMARK_TOKEN"
    )


async def test_an_unreachable_hub_ends_the_command() -> None:
    silent = f"http://127.0.0.1:{free_port()}"

    status = await fleetmark("status", "--hub", silent)
    history = await fleetmark("history", "--hub", silent, "-o", "json")

    for result in (status, history):
        assert result.exit_code == 2
        assert result.stdout == ""
        assert words(result.stderr).startswith(f"error: the hub at {silent} is unreachable")
