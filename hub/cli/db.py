"""`fleetmark db`: the store's own administration, on the hub's database directly."""

from typing import Annotated

import typer

from hub import store
from hub.cli.common import DataDirOption, load_settings, run_in_session
from hub.cli.output import console

db = typer.Typer(
    help="Administer the store (directly on the hub's database).", no_args_is_help=True
)


@db.command("grant-readonly")
def grant_readonly(
    role: Annotated[str, typer.Argument(help="An existing PostgreSQL role (e.g. grafana).")],
    data_dir: DataDirOption = None,
) -> None:
    """Let ROLE read the dashboards' views (schema grafana) and nothing else, those that
    later migrations add too, with JIT compilation off for its sessions in this database.
    Creates nothing; granting again changes nothing."""
    settings = load_settings(data_dir)
    left = run_in_session(settings, lambda session: store.grant_readonly(session, role))
    console.print(
        f"{role} may read schema {store.DASHBOARD_SCHEMA} (its views, and those added later)",
        highlight=False,
    )
    if left is not None:
        console.print(f"[yellow]note:[/] {left}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(db, name="db")
