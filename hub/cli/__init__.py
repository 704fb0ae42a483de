"""The `fleetmark` command line: one entry point with subcommands, each loaded when it runs.

The plain install has the commands that ask a hub over HTTP; the hub's commands need
`fleetmark[hub]`, the agent `fleetmark[agent]`, and without them say which extra to install.
"""

from typing import Annotated

import typer

import hub
from hub.cli.exits import EXIT_CODES
from hub.cli.lazy import Lazy, LazyGroup

# Every command but `version`, in the order `fleetmark --help` lists them: the module that
# registers it, the first paragraph of its help (a test keeps both in step with the module),
# and the extra its module needs.
COMMANDS = {
    "serve": Lazy(
        "server",
        "Run the hub. Without FLEETMARK_DATABASE_URL it starts an embedded PostgreSQL.",
        "hub",
    ),
    "migrate": Lazy(
        "server", "Upgrade the schema to the newest revision (or downgrade with --down).", "hub"
    ),
    "harvest": Lazy(
        "harvest", "Harvest the configured and discovered GitOps repositories now.", "hub"
    ),
    "schedule": Lazy(
        "schedule",
        "Schedule an environment and write one commit to the platform GitOps repository.",
        "hub",
    ),
    "demo": Lazy(
        "demo",
        "Show fleetmark at work: the reference scenario's repositories, a hub, a simulated fleet.",
        "hub",
    ),
    "dora": Lazy(
        "dora",
        "DORA figures per environment: deployment frequency, lead time (commit to Ready on "
        "every expected cluster), change failure rate and time to restore.",
    ),
    "rollouts": Lazy(
        "rollouts",
        "The current rollout per environment and workload: clusters converged, time to "
        "converge (p50, p95, max) and failures.",
    ),
    "drift": Lazy(
        "drift",
        "Drifted reconciler objects and why: behind the harvested head (by how many commits, "
        "for how long), diverged, failing, stale agent, config mismatch, live drift.",
    ),
    "diff": Lazy(
        "diff",
        "How environments differ: per workload and cluster type, the desired and deployed "
        "versions side by side, the config keys that differ, and why.",
    ),
    "status": Lazy(
        "query",
        "The fleet now: clusters reporting, stale or never heard of, and their reconciler "
        "objects by state, per environment and cluster type; then a page of clusters.",
    ),
    "history": Lazy(
        "query", "Every change of the revision a reconciler object applied, newest first."
    ),
    "timeline": Lazy(
        "timeline",
        "What happened to the fleet, newest first: commits, scheduling runs, rollouts, health "
        "regressions, drift, silences, decommissions and harvest failures.",
    ),
    "simulate": Lazy(
        "simulate", "Register a small simulated fleet and keep it reporting until stopped."
    ),
    "clusters": Lazy("admin", "Register clusters and manage their tokens.", "hub"),
    "tokens": Lazy("admin", "API tokens for people, scripts and CI (admin or read).", "hub"),
    "repositories": Lazy(
        "admin",
        "The GitOps repositories the hub harvests (those added through the API).",
        "hub",
    ),
    "subscriptions": Lazy(
        "subscriptions",
        "Where the hub sends its events: webhooks in CloudEvents or Slack format (admin).",
    ),
    "db": Lazy("db", "Administer the store (directly on the hub's database).", "hub"),
    "dashboards": Lazy("dashboards", "fleetmark's Grafana dashboards.", "hub"),
    "gate": Lazy("gate", "The promotion gate, for CI pipelines."),
    "suspect": Lazy(
        "suspect",
        "Suspects: the commits and versions applied in an environment, ranked by how much more "
        "often clusters regressed after them than clusters that had not.",
    ),
    "agent": Lazy("agent", "The cluster agent (configured by FLEETMARK_AGENT_* variables)."),
}

# The modules of the hub's commands (fleetmark[hub]) and the commands each registers.
HUB_COMMANDS = {
    module: tuple(name for name, lazy in COMMANDS.items() if lazy.module == module)
    for module in dict.fromkeys(lazy.module for lazy in COMMANDS.values() if lazy.extra == "hub")
}


class Fleetmark(LazyGroup):
    lazy = COMMANDS


app = typer.Typer(
    name="fleetmark",
    cls=Fleetmark,
    help="Deployment observability hub for GitOps fleets.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.command()
def version() -> None:
    """Print the fleetmark version."""
    typer.echo(f"fleetmark {hub.__version__}")


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


def main() -> None:
    app()
