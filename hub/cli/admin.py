"""`fleetmark clusters …`, `fleetmark tokens …` and `fleetmark repositories …`: registration,
tokens and the repositories to harvest, through the hub's API (or, on the hub's host, its
database: hub/cli/target.py)."""

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.text import Text

from hub.cli.output import (
    Cell,
    Output,
    OutputOption,
    Rows,
    console,
    fail,
    rows_table,
    show,
    show_token,
    validation_failure,
    when,
)
from hub.cli.remote import ClusterTypeFilter, EnvironmentFilter
from hub.cli.target import Target, act, administers, answered, do
from hub.client.schemas.clusters import ClusterDetail, ClusterPage, RegisteredCluster
from hub.client.schemas.repositories import CredentialsReference as GitCredentials
from hub.client.schemas.repositories import RepositoryList, RepositoryStatus
from hub.client.schemas.tokens import CreatedToken, TokenList
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterPlacement, ClusterRegistration
from hub.harvest import service as harvest_service
from hub.harvest.schemas import CredentialsReference, RepositoryConfig, Role
from hub.tokens import service as token_service
from hub.tokens.schemas import Scope, TokenRequest

clusters = typer.Typer(help="Register clusters and manage their tokens.", no_args_is_help=True)
tokens = typer.Typer(
    help="API tokens for people, scripts and CI (admin or read).", no_args_is_help=True
)
repositories = typer.Typer(
    help="The GitOps repositories the hub harvests (those added through the API).",
    no_args_is_help=True,
)


def _now() -> datetime:
    return datetime.now(UTC)


def _labels(pairs: list[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise fail(f"--label {pair!r}: expected KEY=VALUE")
        labels[key] = value
    return labels


# --- clusters ---------------------------------------------------------------------------------


@clusters.command("register")
@administers
def register_cluster(
    name: str,
    environment: Annotated[
        str | None,
        typer.Option("--environment", "-e", help="Environment the cluster counts in."),
    ] = None,
    cluster_type: Annotated[
        str | None, typer.Option("--cluster-type", "-t", help="Cluster type it backs.")
    ] = None,
    label: Annotated[list[str], typer.Option(help="KEY=VALUE, repeatable.")] = [],  # noqa: B006
    *,
    where: Target,
) -> None:
    """Register a cluster and print its token (only a hash is stored)."""
    try:
        registration = ClusterRegistration(
            name=name, environment=environment, cluster_type=cluster_type, labels=_labels(label)
        )
    except ValidationError as exc:
        raise fail(validation_failure(exc, {"name": "NAME", "labels": "--label"})) from exc
    registered = act(
        where,
        lambda client: client.register_cluster(
            registration.name,
            environment=registration.environment,
            cluster_type=registration.cluster_type,
            labels=registration.labels,
        ),
        lambda settings, session: cluster_service.register(
            session, registration, token_secret=settings.token_secret.get_secret_value()
        ),
        RegisteredCluster,
    )
    show_token(registered.name, registered.token, "Registered cluster")


@clusters.command("place")
@administers
def place_cluster(
    name: str,
    environment: Annotated[
        str, typer.Option("--environment", "-e", help="Environment the cluster counts in.")
    ],
    cluster_type: Annotated[
        str | None, typer.Option("--cluster-type", "-t", help="Cluster type it backs.")
    ] = None,
    output: OutputOption = Output.table,
    *,
    where: Target,
) -> None:
    """Set or change where a cluster counts; its agent's claim never does. A change counts
    from now: its open drift periods end, its history stays."""
    try:
        placement = ClusterPlacement(environment=environment, cluster_type=cluster_type)
    except ValidationError as exc:
        raise fail(
            validation_failure(
                exc, {"environment": "--environment", "cluster_type": "--cluster-type"}
            )
        ) from exc
    detail = act(
        where,
        lambda client: client.place_cluster(
            name, environment=placement.environment, cluster_type=placement.cluster_type
        ),
        lambda settings, session: cluster_service.place(
            session, name, placement, now=_now(), stale_after=settings.stale_after
        ),
        ClusterDetail,
    )
    if output is not Output.table:
        show(detail, output, _placement_row)
        return
    console.print(
        f"Cluster [bold]{escape(name)}[/] placed in "
        f"{escape(_placement(detail.environment, detail.cluster_type))}.",
        highlight=False,
    )


@clusters.command("rotate")
@administers
def rotate_cluster_token(
    name: str,
    *,
    where: Target,
) -> None:
    """Give a cluster a new token; the old one stops working at once. A decommissioned cluster
    is back in service with it."""
    rotated = act(
        where,
        lambda client: client.rotate_cluster_token(name),
        lambda settings, session: cluster_service.rotate_token(
            session, name, token_secret=settings.token_secret.get_secret_value(), now=_now()
        ),
        RegisteredCluster,
    )
    show_token(rotated.name, rotated.token, "New token for cluster")


@clusters.command("revoke")
@administers
def revoke_cluster_token(
    name: str,
    *,
    where: Target,
) -> None:
    """Revoke a cluster's token; its agent is refused from the next report on."""
    do(
        where,
        lambda client: client.revoke_cluster_token(name),
        lambda _, session: cluster_service.revoke_token(session, name, now=_now()),
    )
    console.print(f"Revoked the token of cluster [bold]{escape(name)}[/].", highlight=False)


@clusters.command("decommission")
@administers
def decommission_cluster(
    name: str,
    output: OutputOption = Output.table,
    *,
    where: Target,
) -> None:
    """Take a cluster out of service: its token stops working; the gate, drift, the
    environment diff and the dashboards stop expecting it; its history stays. Again: no change.
    Rotating its token brings it back."""
    detail = act(
        where,
        lambda client: client.decommission_cluster(name),
        lambda settings, session: cluster_service.decommission(
            session, name, now=_now(), stale_after=settings.stale_after
        ),
        ClusterDetail,
    )
    if output is not Output.table:
        show(detail, output, _cluster_row)
        return
    assert detail.decommissioned_at is not None
    console.print(
        f"Cluster [bold]{escape(name)}[/] decommissioned at "
        f"{detail.decommissioned_at.isoformat(timespec='seconds')}; its token no longer works, "
        "its history stays.",
        highlight=False,
    )


@clusters.command("list")
@administers
def list_clusters(
    environment: EnvironmentFilter = None,
    cluster_type: ClusterTypeFilter = None,
    decommissioned: Annotated[
        bool, typer.Option("--decommissioned", help="List decommissioned clusters too.")
    ] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 1000,
    offset: Annotated[int, typer.Option(min=0)] = 0,
    output: OutputOption = Output.table,
    *,
    where: Target,
) -> None:
    """List registered clusters with their last report and object counts."""
    page = act(
        where,
        lambda client: client.clusters(
            environment=environment,
            cluster_type=cluster_type,
            decommissioned=decommissioned,
            limit=limit,
            offset=offset,
        ),
        lambda settings, session: cluster_service.list_clusters(
            session,
            environment=environment,
            cluster_type=cluster_type,
            decommissioned=decommissioned,
            limit=limit,
            offset=offset,
            now=_now(),
            stale_after=settings.stale_after,
        ),
        ClusterPage,
    )
    show(page, output, _cluster_rows, _show_clusters)


_CLUSTER_HEADERS = (
    "cluster",
    "environment",
    "cluster type",
    "last seen",
    "objects",
    "ready",
    "failing",
    "token",
)


def _cluster_rows(page: ClusterPage) -> Rows:
    return Rows(
        _CLUSTER_HEADERS,
        [
            (
                item.name,
                item.environment or Cell(Text("unplaced", style="yellow"), None),
                item.cluster_type,
                Cell(
                    Text(when(item.last_seen_at), style="yellow" if item.stale else ""),
                    item.last_seen_at,
                )
                if item.last_seen_at
                else "never",
                item.objects,
                item.ready,
                Text(str(item.failing), style="red" if item.failing else ""),
                _token_state(item.token_active, item.decommissioned_at),
            )
            for item in page.items
        ],
    )


def _placement(environment: str | None, cluster_type: str | None) -> str:
    return f"{environment}/{cluster_type}" if cluster_type else str(environment)


def _placement_row(detail: ClusterDetail) -> Rows:
    return Rows(
        ("cluster", "environment", "cluster type"),
        [(detail.name, detail.environment, detail.cluster_type)],
    )


def _cluster_row(detail: ClusterDetail) -> Rows:
    """A decommissioned cluster, for CSV: its name and when it left."""
    return Rows(("cluster", "decommissioned at"), [(detail.name, detail.decommissioned_at)])


def _show_clusters(page: ClusterPage) -> None:
    console.print(rows_table(_cluster_rows(page)))
    console.print(f"{len(page.items)} of {page.total} clusters", style="dim")


def _token_state(active: bool, decommissioned_at: datetime | None) -> Cell | Text | str:
    if decommissioned_at is not None:
        return Cell(
            Text(f"decommissioned {when(decommissioned_at)}", style="dim"),
            f"decommissioned {decommissioned_at.isoformat()}",
        )
    return "active" if active else Text("revoked", style="red")


# --- API tokens -------------------------------------------------------------------------------


@tokens.command("create")
@administers
def create_token(
    name: str,
    scope: Annotated[
        Scope, typer.Option(help="admin: everything; read: queries; metrics: /metrics alone.")
    ] = "read",
    *,
    where: Target,
) -> None:
    """Create an API token and print it once."""
    try:
        request = TokenRequest(name=name, scope=scope)
    except ValidationError as exc:
        raise fail(validation_failure(exc, {"name": "NAME"})) from exc
    created = act(
        where,
        lambda client: client.create_token(request.name, scope=request.scope),
        lambda settings, session: token_service.create(
            session, request, token_secret=settings.token_secret.get_secret_value()
        ),
        CreatedToken,
    )
    show_token(created.name, created.token, f"Created {created.scope} token")


@tokens.command("revoke")
@administers
def revoke_token(
    name: str,
    *,
    where: Target,
) -> None:
    """Revoke an API token; it is refused from the next request on."""
    do(
        where,
        lambda client: client.revoke_token(name),
        lambda _, session: token_service.revoke(session, name, now=_now()),
    )
    console.print(f"Revoked API token [bold]{escape(name)}[/].", highlight=False)


@tokens.command("list")
@administers
def list_tokens(
    output: OutputOption = Output.table,
    *,
    where: Target,
) -> None:
    """List API tokens (never their values)."""
    items = act(
        where,
        lambda client: client.tokens(),
        lambda _, session: token_service.list_tokens(session),
        TokenList,
    )
    show(items, output, _token_rows)


def _token_rows(items: TokenList) -> Rows:
    return Rows(
        ("name", "scope", "created", "revoked"),
        [(item.name, item.scope, item.created_at, item.revoked_at) for item in items],
    )


# --- repositories -----------------------------------------------------------------------------


@repositories.command("add")
@administers
def add_repository(
    url: Annotated[str, typer.Argument(help="The repository's clone URL.")],
    role: Annotated[Role, typer.Option(help="platform: a branch per environment; app: apps.")],
    branch: Annotated[
        list[str],
        typer.Option(help="A branch to harvest, repeatable; default: the environment branches."),
    ] = [],  # noqa: B006
    git_token_env: Annotated[
        str | None,
        typer.Option(help="The hub's variable (FLEETMARK_GIT_*) holding a token for git."),
    ] = None,
    git_ssh_key_file: Annotated[
        Path | None,
        typer.Option(help="An SSH key on the hub's host (in FLEETMARK_GIT_CREDENTIALS_DIR)."),
    ] = None,
    output: OutputOption = Output.table,
    *,
    where: Target,
) -> None:
    """Harvest a repository from the next run on (the repositories file takes precedence)."""
    try:
        credentials = None
        if git_token_env is not None or git_ssh_key_file is not None:
            credentials = CredentialsReference(
                token_env=git_token_env, ssh_key_file=git_ssh_key_file
            )
        config = RepositoryConfig(
            url=url, role=role, branches=branch or None, credentials=credentials
        )
    except ValidationError as exc:
        raise fail(validation_failure(exc, {"url": "URL", "branches": "--branch"})) from exc
    added = act(
        where,
        lambda client: client.add_repository(
            config.url,
            role=config.role,
            branches=config.branches,
            credentials=None
            if config.credentials is None
            else answered(GitCredentials, config.credentials),
        ),
        lambda settings, session: harvest_service.add_repository(
            session,
            config,
            credentials_dir=settings.git_credentials_dir,
            allow_local=settings.local_repositories_allowed,
            now=_now(),
        ),
        RepositoryStatus,
    )
    if output is not Output.table:
        show(added, output, lambda status: _repository_rows([status]))
        return
    console.print(
        f"Added repository {added.id} [bold]{escape(added.url)}[/] ({added.role}); "
        "it is harvested from the next run on.",
        highlight=False,
    )


@repositories.command("list")
@administers
def list_repositories(
    output: OutputOption = Output.table,
    *,
    where: Target,
) -> None:
    """The repositories with their harvest state: branches, last fetch, errors."""
    items = act(
        where,
        lambda client: client.repositories(),
        lambda _, session: harvest_service.list_repositories(session, now=_now()),
        RepositoryList,
    )
    show(items, output, _repository_rows)


def _repository_rows(items: Iterable[RepositoryStatus]) -> Rows:
    return Rows(
        ("id", "repository", "role", "source", "branches", "fetched", "errors"),
        [
            (
                item.id,
                item.url if item.enabled else Text(f"{item.url} (removed)"),
                item.role,
                item.source,
                ", ".join(f"{branch.name}@{branch.head_sha or '-'}" for branch in item.branches)
                or None,
                item.fetched_at,
                Text(str(item.error_count), style="red" if item.error_count else ""),
            )
            for item in items
        ],
    )


@repositories.command("remove")
@administers
def remove_repository(
    repository_id: Annotated[int, typer.Argument(min=1, help="Its id (repositories list).")],
    *,
    where: Target,
) -> None:
    """Stop harvesting a repository added through the API; what was harvested stays."""
    do(
        where,
        lambda client: client.remove_repository(repository_id),
        lambda _, session: harvest_service.remove_repository(session, repository_id),
    )
    console.print(f"Removed repository {repository_id}; what was harvested stays.")


def register(app: typer.Typer) -> None:
    app.add_typer(clusters, name="clusters")
    app.add_typer(tokens, name="tokens")
    app.add_typer(repositories, name="repositories")
