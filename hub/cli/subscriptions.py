"""`fleetmark subscriptions …`: where the hub sends its events, asked of a running hub with an
admin token (/api/v1/subscriptions): add one (its signing secret printed once), list, remove,
send a test event, and list a subscription's deliveries."""

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.markup import escape

from hub.cli.output import Output, OutputOption, Rows, console, show
from hub.cli.remote import (
    HubOption,
    TokenFileOption,
    TokenOption,
    ago_cell,
    api_token,
    ask,
)
from hub.client import DEFAULT_HUB
from hub.client.schemas.subscriptions import (
    DeliveryInfo,
    DeliveryList,
    Format,
    SubscriptionList,
)

subscriptions = typer.Typer(
    help="Where the hub sends its events: webhooks in CloudEvents or Slack format (admin).",
    no_args_is_help=True,
)


@subscriptions.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The subscription's name.")],
    url: Annotated[str, typer.Argument(help="Where events are posted (https, public).")],
    format: Annotated[
        Format, typer.Option("--format", help="cloudevents: the event as JSON; slack: a message.")
    ] = "cloudevents",
    event_type: Annotated[
        list[str] | None,
        typer.Option("--type", help="Only this event type (repeatable); none: every type."),
    ] = None,
    environment: Annotated[
        list[str] | None,
        typer.Option("--environment", "-e", help="Only this environment (repeatable)."),
    ] = None,
    workload: Annotated[
        list[str] | None, typer.Option("--workload", "-w", help="Only this workload (repeatable).")
    ] = None,
    cluster_type: Annotated[
        list[str] | None,
        typer.Option("--cluster-type", "-t", help="Only this cluster type (repeatable)."),
    ] = None,
    include_missing: Annotated[
        bool,
        typer.Option(
            "--include-missing",
            help="Events without a filtered dimension (a harvest event has no environment) pass.",
        ),
    ] = False,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
) -> None:
    """Send the hub's events to a URL; prints the signing secret, only this once."""
    token = api_token(token, token_file)
    created = ask(
        hub,
        token,
        lambda client: client.create_subscription(
            name,
            url,
            format=format,
            event_types=event_type or (),
            environments=environment or (),
            workloads=workload or (),
            cluster_types=cluster_type or (),
            include_missing=include_missing,
        ),
        options={"event_types": "--type", "environments": "--environment"},
    )
    console.print(
        f"Subscription [bold]{escape(created.name)}[/] sends to {escape(created.url)}. "
        "Its signing secret, shown only this once:",
        highlight=False,
        soft_wrap=True,
    )
    console.print(created.secret, style="bold green", highlight=False, soft_wrap=True)


def _filters(values: list[str]) -> str:
    return ", ".join(values) or "any"


def _subscription_rows(items: SubscriptionList) -> Rows:
    return Rows(
        ("name", "url", "format", "types", "environments", "workloads", "cluster types"),
        [
            (
                item.name,
                item.url,
                item.format,
                _filters(item.event_types),
                _filters(item.environments),
                _filters(item.workloads),
                _filters(item.cluster_types),
            )
            for item in items
        ],
    )


@subscriptions.command("list")
def list_subscriptions(
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """List the subscriptions (never their secrets)."""
    token = api_token(token, token_file)
    show(ask(hub, token, lambda client: client.subscriptions()), output, _subscription_rows)


@subscriptions.command("remove")
def remove(
    name: str,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
) -> None:
    """Stop sending events to a subscription; its pending deliveries are dropped."""
    token = api_token(token, token_file)
    ask(hub, token, lambda client: client.remove_subscription(name))
    console.print(f"Removed subscription [bold]{escape(name)}[/].", highlight=False)


@subscriptions.command("test")
def send_test(
    name: str,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
) -> None:
    """Send a fleetmark.test event to one subscription, whatever its filters."""
    token = api_token(token, token_file)
    delivery = ask(hub, token, lambda client: client.test_subscription(name))
    console.print(
        f"Queued test event {delivery.event_id} as delivery {delivery.id}; see "
        f"`fleetmark subscriptions deliveries {escape(name)}` for the receiver's answer.",
        highlight=False,
        soft_wrap=True,
    )


def _delivery_rows(items: DeliveryList, now: datetime) -> Rows:
    return Rows(
        ("id", "event", "subject", "state", "attempts", "status", "last attempt", "error"),
        [_delivery_row(item, now) for item in items],
    )


def _delivery_row(item: DeliveryInfo, now: datetime) -> tuple[object, ...]:
    return (
        item.id,
        item.event_type,
        item.subject,
        item.state,
        item.attempts,
        item.last_status_code,
        ago_cell(now, item.last_attempt_at),
        item.last_error,
    )


@subscriptions.command("deliveries")
def deliveries(
    name: str,
    retry: Annotated[
        int | None, typer.Option(help="Send this dead delivery again (its id), then list.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Deliveries listed.")] = 50,
    hub: HubOption = DEFAULT_HUB,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    output: OutputOption = Output.table,
) -> None:
    """A subscription's newest deliveries: state, attempts, the receiver's last answer."""
    token = api_token(token, token_file)
    if retry is not None:
        ask(hub, token, lambda client: client.retry_delivery(name, retry))
    items = ask(hub, token, lambda client: client.deliveries(name, limit=limit))
    now = datetime.now(UTC)
    show(items, output, lambda found: _delivery_rows(found, now))


def register(app: typer.Typer) -> None:
    app.add_typer(subscriptions, name="subscriptions")
