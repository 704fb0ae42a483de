"""`fleetmark` loads a command's module when the command runs: the list of commands comes from
hub.cli.COMMANDS, which must say what the modules register, and shell completion still
completes command names, options and their values, as a shell asks it."""

import importlib

import pytest
from typer.testing import CliRunner

from hub.cli import COMMANDS
from hub.cli import app as cli
from hub.cli.lazy import registered

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
    """What bash completion offers for the last of `words` (an empty one: all), asked as the
    script of `fleetmark --show-completion bash` asks it."""
    asked = {
        "_FLEETMARK_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
        "COLUMNS": None,
    }
    result = CliRunner().invoke(cli, [], prog_name="fleetmark", env=asked)
    assert result.exit_code == 0, result.output
    return result.stdout.split()


def test_completion_offers_command_names_options_and_their_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Read as typer builds the command: --show-completion then takes the shell's name.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    script = CliRunner().invoke(cli, ["--show-completion", "bash"], prog_name="fleetmark")
    names = complete("fleetmark d")
    command = complete("fleetmark dri")
    options = complete("fleetmark drift --re")
    reasons = complete("fleetmark drift --reason ")
    formats = complete("fleetmark drift --output ")
    subcommands = complete("fleetmark clusters ")
    gate = complete("fleetmark gate ")

    assert script.exit_code == 0, script.output
    assert "complete -o default -F _fleetmark_completion fleetmark" in script.stdout
    assert sorted(names) == ["dashboards", "db", "demo", "diff", "dora", "drift"]
    assert command == ["drift"]
    assert options == ["--reason"]
    assert "behind" in reasons
    assert "live_drift" in reasons
    assert formats == ["table", "json", "csv"]
    assert {"register", "place", "list", "decommission"} <= set(subcommands)
    assert "wait" in gate
