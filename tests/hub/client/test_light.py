"""The plain install (`pip install fleetmark`, no extra): the Python API and the commands that
ask a hub import nothing of the server, and run where the hub's packages are not installed.

Each probe is a process of its own in which the packages fleetmark[hub] adds are made missing
(as tests/hub/cli/test_extras.py does); it lists the modules it ended with: of fleetmark's, only
hub.client, the command line's light modules and the command run; none of the hub extra's.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hub.cli.test_extras import HUB_PACKAGES
from tests.served import free_port

PROBE = """
import importlib.abc, json, sys

missing = set(sys.argv[1].split(","))
listed = sys.argv[2]


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in missing:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
if sys.argv[3] == "import":
    import hub.client
else:
    sys.argv = ["fleetmark", *sys.argv[4:]]
    from hub.cli import main

    try:
        main()
    except SystemExit:
        pass
with open(listed, "w") as sink:
    json.dump(sorted(sys.modules), sink)
"""

# What the command line loads before any command: the entry point, the exit codes, the lazy
# commands.
ENTRY = {"hub", "hub.cli", "hub.cli.exits", "hub.cli.lazy"}
# What a command that asks a hub loads beside its own module.
ASKING = {"hub.cli.output", "hub.cli.remote", "hub.cli.secret_files"}


def modules(tmp_path: Path, how: str, *args: str) -> set[str]:
    """The modules a process ended with: `import` imports hub.client, `run` runs
    `fleetmark ARGS`."""
    listed = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(HUB_PACKAGES), str(listed), how, *args],
        capture_output=True,
        timeout=60,
        check=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )
    found: list[str] = json.loads(listed.read_text())
    return set(found)


def fleetmarks(found: set[str]) -> set[str]:
    return {name for name in found if name.split(".")[0] in ("hub", "agent", "scheduler_core")}


def test_the_python_api_imports_nothing_of_the_server(tmp_path: Path) -> None:
    found = modules(tmp_path, "import")

    assert {name for name in fleetmarks(found) if not name.startswith("hub.client")} == {"hub"}
    assert "hub.client.client" in found
    assert not {name.split(".")[0] for name in found} & set(HUB_PACKAGES)


@pytest.mark.parametrize("args", [["--version"], ["--help"], []], ids=" ".join)
def test_version_and_help_load_no_command(tmp_path: Path, args: list[str]) -> None:
    found = modules(tmp_path, "run", *args)

    assert fleetmarks(found) == ENTRY
    assert "pydantic" not in found
    assert "httpx" not in found


NOWHERE = ["--hub", f"http://127.0.0.1:{free_port()}", "--token", "t"]
COMMANDS = {
    "status": (["status", *NOWHERE], {"hub.cli.query"}),
    "history": (["history", *NOWHERE], {"hub.cli.query"}),
    "drift": (["drift", "--history", *NOWHERE], {"hub.cli.drift"}),
    "diff": (["diff", "dev", "stage", *NOWHERE], {"hub.cli.diff"}),
    "dora": (["dora", *NOWHERE], {"hub.cli.dora"}),
    "gate wait": (
        ["gate", "wait", "-e", "dev", "--commit", "1f2e3d4", "--timeout", "0s", *NOWHERE],
        {"hub.cli.gate"},
    ),
    "simulate": (["simulate", "--help"], {"hub.cli.simulate", "hub.simulation"}),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_that_asks_a_hub_loads_the_client_and_itself_alone(
    tmp_path: Path, command: str
) -> None:
    args, own = COMMANDS[command]

    found = modules(tmp_path, "run", *args)

    assert {name for name in fleetmarks(found) if not name.startswith("hub.client")} == (
        ENTRY | ASKING | own
    )
    assert not {name.split(".")[0] for name in found} & set(HUB_PACKAGES)


DATAFRAME = """
import importlib.abc, sys


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
from hub.client.schemas.tokens import TokenList

TokenList.model_validate([]).to_dataframe()
"""


def test_a_dataframe_without_pandas_says_which_extra_to_install() -> None:
    result = subprocess.run(
        [sys.executable, "-c", DATAFRAME], capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 1
    assert "to_dataframe() needs pandas (No module named 'pandas')" in result.stderr
    assert "pip install 'fleetmark[pandas]'" in result.stderr
