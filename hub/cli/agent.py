"""`fleetmark agent run`: the cluster agent, started from the hub's command line.

The one place the hub reaches into the agent (the agent never imports the hub). The agent is
imported when the command runs, so other subcommands do not load the Kubernetes client.
"""

import typer

from hub.cli.output import missing_extra

agent = typer.Typer(
    help="The cluster agent (configured by FLEETMARK_AGENT_* variables).", no_args_is_help=True
)


@agent.command("run")
def run() -> None:
    """Run the agent in the foreground until SIGTERM or Ctrl-C, as `python -m agent` does."""
    try:
        from agent.runner import main
    except ModuleNotFoundError as exc:
        raise missing_extra("agent run", "agent", exc) from exc

    raise typer.Exit(code=main())


def register(app: typer.Typer) -> None:
    app.add_typer(agent, name="agent")
