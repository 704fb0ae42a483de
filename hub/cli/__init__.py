"""The `fleetmark` command line: one entry point with subcommands.

The plain install has the commands that ask a hub over HTTP (gate, status, history, drift,
diff, dora, simulate): what a pipeline or a laptop needs. The hub's own commands need
`fleetmark[hub]`, the agent `fleetmark[agent]`; where their packages are missing the commands
are still listed, and each says which extra to install.
"""

import importlib
from typing import Annotated

import typer

import hub
from hub.cli import diff, dora, drift, gate, query, simulate
from hub.cli.exits import EXIT_CODES
from hub.cli.output import console, missing_extra

app = typer.Typer(
    name="fleetmark",
    help="Deployment observability hub for GitOps fleets.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# The modules of the hub's commands (fleetmark[hub]) and the commands each registers; a test
# keeps the names in step with what the modules register.
HUB_COMMANDS = {
    "server": ("serve", "migrate"),
    "admin": ("clusters", "tokens", "repositories"),
    "db": ("db",),
    "harvest": ("harvest",),
    "schedule": ("schedule",),
    "demo": ("demo",),
    "dashboards": ("dashboards",),
}


@app.command()
def version() -> None:
    """Print the fleetmark version."""
    console.print(f"fleetmark {hub.__version__}", highlight=False)


def _version_option(given: bool) -> None:
    if given:
        version()
        raise typer.Exit()


@app.callback()
def options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_option,
            is_eager=True,
            help="Print the fleetmark version and exit.",
        ),
    ] = False,
) -> None:
    """Deployment observability hub for GitOps fleets."""


def _needs_hub(name: str, exc: ModuleNotFoundError) -> None:
    """In place of a hub command whose packages are missing: says to install fleetmark[hub]."""

    def command() -> None:
        raise missing_extra(name, "hub", exc)

    app.command(
        name,
        help="Needs fleetmark[hub].",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(command)


for module_name, names in HUB_COMMANDS.items():
    try:
        module = importlib.import_module(f"hub.cli.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] in {"hub", "agent", "scheduler_core"}:
            raise
        for name in names:
            _needs_hub(name, exc)
    else:
        module.register(app)

for client_module in (gate, dora, drift, diff, query, simulate):
    client_module.register(app)
importlib.import_module("hub.cli.agent").register(app)


def main() -> None:
    app()
