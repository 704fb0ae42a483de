"""Commands loaded when they run: `fleetmark --version`, `--help` and name completion import none.

Each command is listed with its module and its `--help` line; running it, or completing its
options, imports the module. A hub command whose extra is missing says which one to install.
"""

import importlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar

import typer

# typer carries its own click (typer._click), which its groups and commands are made of.
from typer import _click as click
from typer.core import TyperCommand, TyperGroup

# Packages of fleetmark itself: a module of theirs that is missing is a bug, not an extra.
_OWN = {"hub", "agent", "scheduler_core", "dashboards", "migrations"}


@dataclass(frozen=True, slots=True)
class Lazy:
    """A command: the module of hub.cli that registers it, its line in the list of commands
    (the first paragraph of its help; a test keeps them in step), and the extra whose
    packages its module imports."""

    module: str
    help: str
    extra: str | None = None


class LazyCommands(MutableMapping[str, click.Command]):
    """The commands by name; a command's module is imported when the command is looked up."""

    def __init__(self, loaded: Mapping[str, click.Command], lazy: Mapping[str, Lazy]) -> None:
        self._loaded = dict(loaded)
        self._lazy = lazy

    def listed(self, name: str) -> click.Command | None:
        """The command as the list of commands shows it, loaded or not."""
        if name in self._loaded:
            return self._loaded[name]
        lazy = self._lazy.get(name)
        return None if lazy is None else TyperCommand(name, help=lazy.help)

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded and name in self._lazy:
            self._load(self._lazy[name])
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._loaded, *self._lazy]))

    def __len__(self) -> int:
        return len(dict.fromkeys([*self._loaded, *self._lazy]))

    def _load(self, lazy: Lazy) -> None:
        names = [name for name, other in self._lazy.items() if other.module == lazy.module]
        try:
            module = importlib.import_module(f"hub.cli.{lazy.module}")
        except ModuleNotFoundError as exc:
            if lazy.extra is None or exc.name is None or exc.name.split(".")[0] in _OWN:
                raise
            self._loaded |= {name: _needs(name, lazy.extra, exc) for name in names}
            return
        self._loaded |= registered(module.register)


def registered(register: Callable[[typer.Typer], None]) -> dict[str, click.Command]:
    """The commands `register(app)` adds to an app, by name."""
    app = typer.Typer()
    app.callback()(_nothing)
    register(app)
    group = typer.main.get_group(app)
    return dict(group.commands)


def _nothing() -> None:
    """A callback, so that an app of one command is still a group of commands."""


def _needs(name: str, extra: str, exc: ModuleNotFoundError) -> click.Command:
    """In place of a command whose packages are missing: says to install fleetmark[extra]."""

    def command() -> None:
        from hub.cli.output import missing_extra

        raise missing_extra(name, extra, exc)

    app = typer.Typer()
    app.callback()(_nothing)
    app.command(
        name,
        help=f"Needs fleetmark[{extra}].",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(command)
    return typer.main.get_group(app).commands[name]


class LazyGroup(TyperGroup):
    """A group whose `lazy` commands are loaded when they run (subclassed with its table)."""

    lazy: ClassVar[Mapping[str, Lazy]] = {}

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.commands: LazyCommands = LazyCommands(self.commands, self.lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.commands.listed(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] in self.lazy:
            self.commands[args[0]]  # loaded now: it runs, or its options are completed
        return super().resolve_command(ctx, args)
