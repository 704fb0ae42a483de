"""The `fleetmark` command line: one entry point with subcommands."""

import typer

from hub.cli import (
    admin,
    agent,
    dashboards,
    db,
    diff,
    dora,
    drift,
    gate,
    harvest,
    query,
    schedule,
    server,
)

app = typer.Typer(
    name="fleetmark",
    help="Deployment observability hub for GitOps fleets.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
server.register(app)
app.add_typer(admin.clusters, name="clusters")
app.add_typer(admin.tokens, name="tokens")
app.add_typer(db.db, name="db")
agent.register(app)
harvest.register(app)
gate.register(app)
dora.register(app)
drift.register(app)
diff.register(app)
schedule.register(app)
query.register(app)
dashboards.register(app)


def main() -> None:
    app()
