"""Subscriptions to the hub's events (admin): made, listed, removed, tested, and their
deliveries."""

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel

from hub.client.schemas.base import Answer, ItemList

Format = Literal["cloudevents", "slack"]
DeliveryState = Literal["pending", "delivered", "dead"]


class SubscriptionRequest(BaseModel):
    name: str
    url: str
    format: Format = "cloudevents"
    event_types: list[str] = []
    environments: list[str] = []
    workloads: list[str] = []
    cluster_types: list[str] = []
    include_missing: bool = False


class SubscriptionInfo(Answer):
    name: str
    url: str
    format: Format
    event_types: list[str]
    environments: list[str]
    workloads: list[str]
    cluster_types: list[str]
    include_missing: bool
    created_at: datetime


class CreatedSubscription(SubscriptionInfo):
    """A subscription and its secret, shown once: the key of the requests' signature."""

    secret: str


class SubscriptionList(ItemList[SubscriptionInfo]):
    pass


class DeliveryInfo(Answer):
    """An event's delivery to a subscription and its latest attempt."""

    id: int
    event_id: UUID
    event_type: str
    subject: str
    state: DeliveryState
    attempts: int
    next_attempt_at: datetime | None
    last_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    delivered_at: datetime | None
    created_at: datetime


class DeliveryList(ItemList[DeliveryInfo]):
    pass
