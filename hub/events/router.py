"""Subscriptions to the hub's events and their deliveries (admin scope)."""

from typing import Annotated

from fastapi import APIRouter, Query, status

from hub.client.params import Id, Limit, Text
from hub.deps import AdminAccess, ClockDep, SessionDep, SettingsDep
from hub.errors import error_response, error_responses
from hub.events import service
from hub.events.schemas import (
    CreatedSubscription,
    DeliveryInfo,
    SubscriptionInfo,
    SubscriptionRequest,
)

router = APIRouter(
    prefix="/api/v1/subscriptions",
    tags=["subscriptions"],
    dependencies=[AdminAccess],
    responses=error_responses(401, 403, 503),
)
_UNKNOWN = error_response(404, "No subscription of that name.")


@router.get("", response_model=list[SubscriptionInfo])
async def list_subscriptions(session: SessionDep) -> list[SubscriptionInfo]:
    return await service.list_subscriptions(session)


@router.post(
    "",
    response_model=CreatedSubscription,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(400, 422)
    | error_response(409, "A subscription of that name exists already."),
)
async def create_subscription(
    request: SubscriptionRequest, session: SessionDep, settings: SettingsDep
) -> CreatedSubscription:
    return await service.create_subscription(
        session, request, allow_private=settings.webhook_allow_private
    )


@router.get("/{name}", response_model=SubscriptionInfo, responses=error_responses(422) | _UNKNOWN)
async def get_subscription(name: Text, session: SessionDep) -> SubscriptionInfo:
    return await service.subscription(session, name)


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(422) | _UNKNOWN,
)
async def remove_subscription(name: Text, session: SessionDep) -> None:
    await service.remove_subscription(session, name)


@router.get(
    "/{name}/deliveries",
    response_model=list[DeliveryInfo],
    responses=error_responses(422) | _UNKNOWN,
)
async def list_deliveries(
    name: Text, session: SessionDep, limit: Annotated[Limit, Query()] = 50
) -> list[DeliveryInfo]:
    """The subscription's newest deliveries first, each with its latest attempt."""
    return await service.deliveries(session, name, limit=limit)


@router.post(
    "/{name}/deliveries/{delivery_id}/retry",
    response_model=DeliveryInfo,
    responses=error_responses(422)
    | error_response(404, "No subscription of that name, or no such delivery of it.")
    | error_response(409, "The delivery is not dead."),
)
async def retry_delivery(
    name: Text, delivery_id: Id, session: SessionDep, clock: ClockDep
) -> DeliveryInfo:
    """Send a dead delivery again, from now, with a retry window of its own."""
    return await service.retry(session, name, delivery_id, now=clock())


@router.post(
    "/{name}/test",
    response_model=DeliveryInfo,
    status_code=status.HTTP_202_ACCEPTED,
    responses=error_responses(422) | _UNKNOWN,
)
async def send_test_event(
    name: Text, session: SessionDep, settings: SettingsDep, clock: ClockDep
) -> DeliveryInfo:
    """A `fleetmark.test` event to this subscription alone: its delivery, sent by the next
    round of the delivery task."""
    return await service.send_test(
        session, name, source=service.event_source(settings), now=clock()
    )
