"""`fleetmark clusters …` and `fleetmark tokens …`: registration and tokens from the shell."""

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from hub.cli.common import DataDirOption, load_settings, run_in_session
from hub.cli.output import Output, OutputOption, console, fail, print_json, show_token
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.tokens import service as token_service
from hub.tokens.schemas import Scope, TokenRequest

clusters = typer.Typer(help="Register clusters and manage their tokens.", no_args_is_help=True)
tokens = typer.Typer(
    help="API tokens for people, scripts and CI (admin or read).", no_args_is_help=True
)


def _labels(pairs: list[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise fail(f"--label {pair!r}: expected KEY=VALUE")
        labels[key] = value
    return labels


@clusters.command("register")
def register_cluster(
    name: str,
    environment: Annotated[
        str | None, typer.Option(help="Environment the cluster runs in.")
    ] = None,
    cluster_type: Annotated[str | None, typer.Option(help="Cluster type it backs.")] = None,
    label: Annotated[list[str], typer.Option(help="KEY=VALUE, repeatable.")] = [],  # noqa: B006
    data_dir: DataDirOption = None,
) -> None:
    """Register a cluster and print its token (only a hash is stored)."""
    settings = load_settings(data_dir)
    try:
        registration = ClusterRegistration(
            name=name, environment=environment, cluster_type=cluster_type, labels=_labels(label)
        )
    except ValueError as exc:
        raise fail(str(exc)) from exc
    registered = run_in_session(
        settings,
        lambda session: cluster_service.register(
            session, registration, token_secret=settings.token_secret.get_secret_value()
        ),
    )
    show_token(registered.name, registered.token, "Registered cluster")


@clusters.command("rotate")
def rotate_cluster_token(name: str, data_dir: DataDirOption = None) -> None:
    """Give a cluster a new token; the old one stops working at once."""
    settings = load_settings(data_dir)
    rotated = run_in_session(
        settings,
        lambda session: cluster_service.rotate_token(
            session,
            name,
            token_secret=settings.token_secret.get_secret_value(),
            now=datetime.now(UTC),
        ),
    )
    show_token(rotated.name, rotated.token, "New token for cluster")


@clusters.command("revoke")
def revoke_cluster_token(name: str, data_dir: DataDirOption = None) -> None:
    """Revoke a cluster's token; its agent is refused from the next report on."""
    settings = load_settings(data_dir)
    run_in_session(
        settings,
        lambda session: cluster_service.revoke_token(session, name, now=datetime.now(UTC)),
    )
    console.print(f"Revoked the token of cluster [bold]{name}[/].", highlight=False)


@clusters.command("decommission")
def decommission_cluster(
    name: str, output: OutputOption = Output.table, data_dir: DataDirOption = None
) -> None:
    """Take a cluster out of service: its token stops working; the gate, drift, the
    environment diff and the dashboards stop expecting it; its history stays. Again: no change.
    Rotating its token brings it back."""
    settings = load_settings(data_dir)
    detail = run_in_session(
        settings,
        lambda session: cluster_service.decommission(
            session,
            name,
            now=datetime.now(UTC),
            stale_after=timedelta(seconds=settings.stale_after_seconds),
        ),
    )
    if output is Output.json:
        print_json(detail)
        return
    assert detail.decommissioned_at is not None
    console.print(
        f"Cluster [bold]{escape(name)}[/] decommissioned at "
        f"{detail.decommissioned_at.isoformat(timespec='seconds')}; its token no longer works, "
        "its history stays.",
        highlight=False,
    )


@clusters.command("list")
def list_clusters(
    environment: Annotated[str | None, typer.Option()] = None,
    cluster_type: Annotated[str | None, typer.Option()] = None,
    decommissioned: Annotated[
        bool, typer.Option("--decommissioned", help="List decommissioned clusters too.")
    ] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 1000,
    offset: Annotated[int, typer.Option(min=0)] = 0,
    output: OutputOption = Output.table,
    data_dir: DataDirOption = None,
) -> None:
    """List registered clusters with their last report and object counts."""
    settings = load_settings(data_dir)
    page = run_in_session(
        settings,
        lambda session: cluster_service.list_clusters(
            session,
            environment=environment,
            cluster_type=cluster_type,
            decommissioned=decommissioned,
            limit=limit,
            offset=offset,
            now=datetime.now(UTC),
            stale_after=timedelta(seconds=settings.stale_after_seconds),
        ),
    )
    if output is Output.json:
        print_json(page)
        return
    table = Table(
        "cluster",
        "environment",
        "cluster type",
        "last seen",
        "objects",
        "ready",
        "failing",
        "token",
    )
    for item in page.items:
        last_seen = (
            item.last_seen_at.isoformat(timespec="seconds") if item.last_seen_at else "never"
        )
        table.add_row(
            item.name,
            item.environment or "-",
            item.cluster_type or "-",
            f"[yellow]{last_seen}[/]" if item.stale else last_seen,
            str(item.objects),
            str(item.ready),
            f"[red]{item.failing}[/]" if item.failing else "0",
            _token_state(item.token_active, item.decommissioned_at),
        )
    console.print(table)
    console.print(f"{len(page.items)} of {page.total} clusters", style="dim")


def _token_state(active: bool, decommissioned_at: datetime | None) -> str:
    if decommissioned_at is not None:
        return f"[dim]decommissioned {decommissioned_at.isoformat(timespec='seconds')}[/]"
    return "active" if active else "[red]revoked[/]"


@tokens.command("create")
def create_token(
    name: str,
    scope: Annotated[Scope, typer.Option(help="admin: everything; read: queries only.")] = "read",
    data_dir: DataDirOption = None,
) -> None:
    """Create an API token and print it once."""
    settings = load_settings(data_dir)
    try:
        request = TokenRequest(name=name, scope=scope)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    created = run_in_session(
        settings,
        lambda session: token_service.create(
            session, request, token_secret=settings.token_secret.get_secret_value()
        ),
    )
    show_token(created.name, created.token, f"Created {created.scope} token")


@tokens.command("revoke")
def revoke_token(name: str, data_dir: DataDirOption = None) -> None:
    """Revoke an API token; it is refused from the next request on."""
    settings = load_settings(data_dir)
    run_in_session(
        settings, lambda session: token_service.revoke(session, name, now=datetime.now(UTC))
    )
    console.print(f"Revoked API token [bold]{name}[/].", highlight=False)


@tokens.command("list")
def list_tokens(output: OutputOption = Output.table, data_dir: DataDirOption = None) -> None:
    """List API tokens (never their values)."""
    settings = load_settings(data_dir)
    items = run_in_session(settings, token_service.list_tokens)
    if output is Output.json:
        print_json(list(items))
        return
    table = Table("name", "scope", "created", "revoked")
    for item in items:
        table.add_row(
            item.name,
            item.scope,
            item.created_at.isoformat(timespec="seconds"),
            item.revoked_at.isoformat(timespec="seconds") if item.revoked_at else "-",
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(clusters, name="clusters")
    app.add_typer(tokens, name="tokens")
