"""API shapes for events and subscriptions: the CloudEvents 1.0 structured JSON an event is
sent as, and the subscriptions' requests and answers."""

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, Field, StringConstraints

from hub.client.params import MAX_REPEATED, StorableText, Text

Format = Literal["cloudevents", "slack"]
DeliveryState = Literal["pending", "delivered", "dead"]
SubscriptionName = Annotated[
    str, StringConstraints(min_length=1, max_length=253, pattern=r"^[\w.@-]+$")
]
EventType = Annotated[
    str, StringConstraints(min_length=1, max_length=253, pattern=r"^[a-z][a-z0-9_.-]*$")
]
Names = Annotated[list[Text], Field(max_length=MAX_REPEATED)]
# The media type of a CloudEvent in structured mode (CloudEvents HTTP binding, 3.2).
CLOUDEVENTS_JSON = "application/cloudevents+json"


class CloudEvent(BaseModel):
    """A CloudEvents 1.0 event in structured JSON; `id` is the receiver's idempotency key."""

    specversion: Literal["1.0"] = "1.0"
    id: UUID
    source: str = Field(description="The hub's URL.")
    type: str = Field(description="fleetmark.gate.passed, fleetmark.cluster.stale, …")
    subject: str = Field(description="What changed: the gate, environment or repository.")
    time: AwareDatetime
    datacontenttype: Literal["application/json"] = "application/json"
    data: dict[str, Any]


class SubscriptionRequest(BaseModel):
    name: SubscriptionName
    url: Annotated[StorableText, StringConstraints(min_length=1, max_length=2048)] = Field(
        description="Where events are posted: https, on a public address (see the docs' URL rules)."
    )
    format: Format = Field(
        default="cloudevents",
        description="cloudevents: the CloudEvent as JSON; slack: an incoming-webhook message.",
    )
    event_types: Annotated[list[EventType], Field(max_length=MAX_REPEATED)] = Field(
        default_factory=list, description="The event types sent; none listed: every type."
    )
    environments: Names = Field(default_factory=list, description="Only these environments.")
    workloads: Names = Field(default_factory=list, description="Only these workloads.")
    cluster_types: Names = Field(default_factory=list, description="Only these cluster types.")
    include_missing: bool = Field(
        default=False,
        description="An event without a filtered dimension (a harvest event has no environment) "
        "passes that filter.",
    )


class SubscriptionInfo(BaseModel):
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
    secret: str = Field(
        description="The key of the requests' X-Fleetmark-Signature; shown this once."
    )


class DeliveryInfo(BaseModel):
    """An event's delivery to a subscription and its latest attempt."""

    id: int
    event_id: UUID
    event_type: str
    subject: str
    state: DeliveryState
    attempts: int
    next_attempt_at: datetime | None = Field(description="When it is tried next (pending).")
    last_attempt_at: datetime | None
    last_status_code: int | None = Field(description="The receiver's answer; none if none.")
    last_error: str | None
    delivered_at: datetime | None
    created_at: datetime
