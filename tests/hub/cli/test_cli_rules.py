"""Rules every command of `fleetmark` follows: one meaning per short option; one table of exit
codes, printed by `fleetmark --help`; an unknown name or a refused token is an error (exit 2)
naming what exists, whichever command meets it."""

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import typer
from click.testing import Result
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from hub.cli import app as cli
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest
from tests.agent.conftest import LiveHub
from tests.conftest import TOKEN_SECRET, DatabaseServer
from tests.support import FakeClock

# The parameter each short option stands for, wherever a command takes it.
SHORT_OPTIONS = {
    "environment": "-e",
    "cluster_type": "-t",
    "cluster": "-c",
    "workload": "-w",
    "selector": "-l",
    "output": "-o",
}


def commands(group: TyperGroup, path: str = "fleetmark") -> Iterator[tuple[str, object]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, TyperGroup):
            yield from commands(command, f"{path} {name}")
        else:
            yield f"{path} {name}", command


def test_short_options_mean_the_same_on_every_command() -> None:
    app = typer.main.get_command(cli)
    assert isinstance(app, TyperGroup)
    wrong = []
    checked = set()
    for path, command in commands(app):
        for parameter in getattr(command, "params", ()):
            if not isinstance(parameter, TyperOption):
                continue
            short = {flag for flag in parameter.opts if not flag.startswith("--")}
            expected = SHORT_OPTIONS.get(parameter.name or "")
            if expected is not None:
                checked.add(parameter.name)
                if short != {expected}:
                    wrong.append(f"{path} --{parameter.name}: {sorted(short)}, not {expected}")
            elif short & set(SHORT_OPTIONS.values()):
                wrong.append(f"{path} --{parameter.name} takes {sorted(short)}")
    assert wrong == []
    assert checked == set(SHORT_OPTIONS)


def test_fleetmark_help_prints_the_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["--help"], env={"COLUMNS": "200"})

    assert result.exit_code == 0
    lines = [" ".join(line.strip(" │").split()) for line in result.stdout.splitlines()]
    assert "0 an answer: done, a gate passed, nothing drifted." in lines
    assert (
        "2 no answer: a usage error, an unknown name, an unreachable hub or store, refused "
        "credentials." in lines
    )
    assert "3 still pending: gate wait timed out before the gate passed or failed." in lines


@dataclass(frozen=True)
class Served:
    hub: LiveHub
    read: str
    admin: str


async def _seed(url: str) -> tuple[str, str]:
    """Two clusters in dev and stage; a read and an admin token."""
    engine = create_async_engine(url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            for name, environment in (("drone-dev-1", "dev"), ("drone-stage-1", "stage")):
                registration = ClusterRegistration(
                    name=name, environment=environment, cluster_type="drone"
                )
                await cluster_service.register(session, registration, token_secret=TOKEN_SECRET)
            read, admin = [
                await token_service.create(
                    session, TokenRequest(name=scope, scope=scope), token_secret=TOKEN_SECRET
                )
                for scope in ("read", "admin")
            ]
            await session.commit()
    finally:
        await engine.dispose()
    return read.token, admin.token


@pytest.fixture(scope="module")
def served(database_server: DatabaseServer) -> Iterator[Served]:
    """A hub on a port of its own, for the module: the questions below change nothing."""
    with database_server.migrated_database() as url:
        read, admin = asyncio.run(_seed(url))
        hub = LiveHub(url, FakeClock())
        hub.start()
        try:
            yield Served(hub, read, admin)
        finally:
            hub.stop()


async def fleetmark(*args: str) -> Result:
    return await asyncio.to_thread(
        CliRunner().invoke, cli, list(args), env={"COLUMNS": "250", "FLEETMARK_TOKEN": None}
    )


def words(text: str) -> str:
    return " ".join(text.split())


# Every command that asks the hub, with what it needs besides --hub and --token.
ASKING = [
    ["status"],
    ["history"],
    ["drift"],
    ["diff", "dev", "stage"],
    ["dora"],
    ["rollouts"],
    ["gate", "wait", "-e", "dev", "--commit", "1f2e3d4c5b6a", "--timeout", "0s"],
    ["clusters", "list"],
    ["clusters", "rotate", "drone-dev-1"],
    ["tokens", "list"],
    ["repositories", "list"],
    ["harvest"],
]


@pytest.mark.parametrize("command", ASKING, ids=" ".join)
async def test_a_refused_token_exits_2_on_every_command(served: Served, command: list[str]) -> None:
    result = await fleetmark(*command, "--hub", served.hub.url, "--token", "fma_nope")

    assert result.exit_code == 2, result.output
    assert "the API token is unknown or revoked (HTTP 401)" in words(result.stderr)


UNKNOWN = {
    "status -e": (["status", "-e", "prod"], "environment 'prod' is unknown (known: dev, stage)"),
    "status -t": (
        ["status", "-e", "dev", "-t", "large"],
        "cluster type 'large' is unknown in environment 'dev' (known: drone)",
    ),
    "history -c": (
        ["history", "-c", "nope"],
        "cluster 'nope' is unknown (known: drone-dev-1, drone-stage-1)",
    ),
    "history -e": (["history", "-e", "prod"], "environment 'prod' is unknown (known: dev, stage)"),
    "drift -c": (
        ["drift", "-c", "nope"],
        "cluster 'nope' is unknown (known: drone-dev-1, drone-stage-1)",
    ),
    "diff": (["diff", "dev", "prod"], "environment 'prod' is unknown (known: dev, stage)"),
    "diff -w": (
        ["diff", "dev", "stage", "-w", "nope"],
        "workload 'nope' is unknown (none known yet)",
    ),
    "dora -w": (["dora", "-w", "nope"], "workload 'nope' is unknown (none known yet)"),
    "rollouts -e": (
        ["rollouts", "-e", "prod"],
        "environment 'prod' is unknown (known: dev, stage)",
    ),
    "gate wait -e": (
        ["gate", "wait", "-e", "prod", "--commit", "1f2e3d4c5b6a"],
        "environment 'prod' is unknown (known: dev, stage)",
    ),
    "gate wait -t": (
        ["gate", "wait", "-e", "dev", "-t", "large", "--commit", "1f2e3d4c5b6a"],
        "cluster type 'large' is unknown in environment 'dev' (known: drone)",
    ),
    "gate wait -w": (
        ["gate", "wait", "-e", "dev", "-w", "nope", "--version", "1.0.0"],
        "workload 'nope' is unknown (none known yet)",
    ),
    "clusters list -e": (
        ["clusters", "list", "-e", "prod"],
        "environment 'prod' is unknown (known: dev, stage)",
    ),
    "clusters rotate": (
        ["clusters", "rotate", "nope"],
        "cluster 'nope' is unknown (known: drone-dev-1, drone-stage-1)",
    ),
    "harvest --repo": (
        ["harvest", "--repo", "https://example.com/nope.git"],
        "repository https://example.com/nope is unknown (none known yet)",
    ),
}


@pytest.mark.parametrize("case", UNKNOWN)
async def test_an_unknown_name_exits_2_naming_what_exists(served: Served, case: str) -> None:
    command, said = UNKNOWN[case]
    token = served.admin if command[0] in ("clusters", "harvest") else served.read

    result = await fleetmark(*command, "--hub", served.hub.url, "--token", token)

    assert result.exit_code == 2, result.output
    assert said in words(result.stderr)
