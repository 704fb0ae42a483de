"""What the query commands print where no one watches a terminal, against a hub served on a
real port: a pipe gets every value whole, `--output csv` a table the csv module reads, and a
value the hub refuses comes back naming the option and the rule, not pydantic's words."""

import asyncio
import csv
import io
import os
import subprocess
from collections.abc import AsyncIterator

import httpx
import pytest
from click.testing import Result
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from typer.testing import CliRunner

from hub.cli import app as cli
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest
from tests.agent.conftest import LiveHub
from tests.conftest import TOKEN_SECRET
from tests.served import FLEETMARK
from tests.support import SHA_A, START, Agent, FakeClock, kustomization

# 60 characters: with the other cells, far past 80 columns.
LONG_NAME = "drone-" + "x" * 46 + "-dev-001"
OBJECT = "platform-configuration-for-the-edge-drones"


@pytest.fixture
async def options(migrated_database: str) -> AsyncIterator[list[str]]:
    """The options that ask a served hub with a read token, where one dev cluster with a long
    name applied a long-named object at SHA_A."""
    url = migrated_database
    clock = FakeClock()
    hub = LiveHub(url, clock)
    engine = create_async_engine(url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            registered = await cluster_service.register(
                session,
                ClusterRegistration(name=LONG_NAME, environment="dev", cluster_type="drone"),
                token_secret=TOKEN_SECRET,
            )
            read = await token_service.create(
                session, TokenRequest(name="ci", scope="read"), token_secret=TOKEN_SECRET
            )
            await session.commit()
        hub.start()
        async with httpx.AsyncClient(base_url=hub.url) as client:
            agent = Agent(client, clock, LONG_NAME, registered.token)
            await agent.send_ok([kustomization(OBJECT)], full_snapshot=True)
        yield ["--hub", hub.url, "--token", read.token]
    finally:
        if hub.running:
            hub.stop()
        await engine.dispose()


async def fleetmark(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


def piped(*args: str) -> subprocess.CompletedProcess[str]:
    """`fleetmark ARGS | …` as a shell runs it: stdout a pipe, no COLUMNS set."""
    environment = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    return subprocess.run(
        [FLEETMARK, *args], capture_output=True, text=True, env=environment, timeout=60
    )


async def test_a_pipe_gets_every_value_whole(options: list[str]) -> None:
    history = await asyncio.to_thread(piped, "history", *options)
    status = await asyncio.to_thread(piped, "status", *options)

    assert history.returncode == 0, history.stderr
    [line] = [line for line in history.stdout.splitlines() if LONG_NAME in line]
    assert f"Kustomization/flux-system/{OBJECT}" in line
    assert SHA_A in line
    assert len(line) > 160, "the row is one line, not cut to 80 columns"
    assert "…" not in history.stdout
    assert status.returncode == 0, status.stderr
    assert any(
        line.split()[:4] == [LONG_NAME, "dev", "drone", "reporting"]
        for line in status.stdout.splitlines()
    ), status.stdout


async def test_csv_has_a_header_row_and_full_values(options: list[str]) -> None:
    history = await fleetmark("history", "--output", "csv", *options)
    status = await fleetmark("status", "-o", "csv", *options)

    assert history.exit_code == 0, history.output
    [row] = list(csv.DictReader(io.StringIO(history.stdout)))
    assert row == {
        "deployed at": START.isoformat(),
        "cluster": LONG_NAME,
        "env/type": "dev/drone",
        "object": f"Kustomization/flux-system/{OBJECT}",
        "applied": SHA_A,
        "before": "",
        "ready": "yes",
    }
    assert status.exit_code == 0, status.output
    [cluster] = list(csv.DictReader(io.StringIO(status.stdout)))
    assert cluster["cluster"] == LONG_NAME
    assert cluster["agent"] == "reporting"
    assert cluster["last report"] == START.isoformat()
    assert (cluster["objects"], cluster["ready"], cluster["failing"]) == ("1", "1", "0")


async def test_values_the_hub_refuses_name_the_option_and_the_rule(options: list[str]) -> None:
    too_long = "e" * 254

    status = await fleetmark("status", "--environment", too_long, *options)
    history = await fleetmark("history", "--object", too_long, *options)
    gate = await fleetmark(
        "gate", "wait", "-e", too_long, "--commit", SHA_A, "--timeout", "0s", *options
    )

    assert status.exit_code == 2
    assert status.stderr.strip() == "error: --environment: must be at most 253 characters"
    assert history.exit_code == 2
    assert history.stderr.strip() == "error: --object: must be at most 253 characters"
    assert gate.exit_code == 2
    assert gate.stderr.strip().endswith("error: --environment: must be at most 253 characters")
    for result in (status, history, gate):
        assert "pydantic" not in result.output
        assert "String should" not in result.output
