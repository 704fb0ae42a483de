"""Rules every command of `fleetmark` follows: one meaning per short option, and one table of
exit codes, printed by `fleetmark --help`."""

from collections.abc import Iterator

import typer
from typer.core import TyperGroup, TyperOption

from hub.cli import app as cli

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
