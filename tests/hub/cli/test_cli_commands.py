"""`fleetmark` loads a command's module when the command runs: the list of commands comes from
hub.cli.COMMANDS, which must say what the modules register, and shell completion still
completes command names, options and their values, as a shell asks it (a process each)."""

import importlib
import os
import subprocess

import pytest

from hub.cli import COMMANDS
from hub.cli.lazy import registered
from tests.served import FLEETMARK

MODULES = sorted({lazy.module for lazy in COMMANDS.values()})


def first_paragraph(text: str | None) -> str:
    return " ".join((text or "").split("\n\n")[0].split())


@pytest.mark.parametrize("module_name", MODULES)
def test_each_module_registers_the_commands_listed_with_their_help(module_name: str) -> None:
    module = importlib.import_module(f"hub.cli.{module_name}")
    commands = registered(module.register)

    assert {name: first_paragraph(command.help) for name, command in commands.items()} == {
        name: lazy.help for name, lazy in COMMANDS.items() if lazy.module == module_name
    }


def complete(words: str) -> list[str]:
    """What bash completion offers for the last of `words` (an empty one: all)."""
    environment = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    result = subprocess.run(
        [FLEETMARK],
        env=environment
        | {
            "_FLEETMARK_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split(" ")) - 1),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.split()


def test_completion_offers_command_names_options_and_their_values() -> None:
    names = complete("fleetmark d")
    options = complete("fleetmark drift --re")
    reasons = complete("fleetmark drift --reason ")
    subcommands = complete("fleetmark clusters ")

    assert sorted(names) == ["dashboards", "db", "demo", "diff", "dora", "drift"]
    assert options == ["--reason"]
    assert "behind" in reasons
    assert "live_drift" in reasons
    assert {"register", "place", "list", "decommission"} <= set(subcommands)
