"""Events fleetmark tells subscribers about, kept in a transactional outbox: an event is written
in the transaction of the judgement that decides it, with a delivery per subscription it
matches; the delivery task (hub/events/tasks.py) sends the pending deliveries."""

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    Uuid,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from hub.models.base import Base, created_at_column


class OutboxEvent(Base):
    """One CloudEvent as it is sent (`body`), with the dimensions subscriptions filter on (an
    event concerns the clusters of several types: `cluster_types`, migration 0049). `id`
    orders a subject's events; `event_id` is the CloudEvents id receivers deduplicate on."""

    __tablename__ = "outbox_event"
    # The events of a time range, newest first: the timeline (migration 0050).
    __table_args__ = (Index(None, "created_at"), Index(None, "time"))

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    event_id: Mapped[uuid.UUID] = mapped_column(Uuid, unique=True)
    type: Mapped[str] = mapped_column(String(253))
    subject: Mapped[str] = mapped_column(Text)
    time: Mapped[datetime]
    environment: Mapped[str | None] = mapped_column(String(253))
    workload: Mapped[str | None] = mapped_column(String(253))
    cluster_types: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    body: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = created_at_column()


class EventSubscription(Base):
    """A receiver of events: where they go, in which format, and which of them. An empty list
    filters nothing; an event without a filtered dimension passes that filter only when
    `include_missing` says so."""

    __tablename__ = "event_subscription"
    __table_args__ = (CheckConstraint("format IN ('cloudevents', 'slack')", name="format"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(253), unique=True)
    url: Mapped[str] = mapped_column(Text)
    format: Mapped[str] = mapped_column(String(16))
    event_types: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    environments: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    workloads: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    cluster_types: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    include_missing: Mapped[bool] = mapped_column(server_default=false())
    # The HMAC key of the signature; the hub needs it to sign, so it is kept as it is.
    secret: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = created_at_column()


class EventDelivery(Base):
    """An event on its way to one subscription: pending until the receiver answers 2xx
    (delivered) or the retry window has passed since it was made (dead). A subject's
    pending deliveries go in event order, one at a time (`subject` copied here for that)."""

    __tablename__ = "event_delivery"
    __table_args__ = (
        CheckConstraint("state IN ('pending', 'delivered', 'dead')", name="state"),
        Index(None, "subscription_id", "event_id", unique=True),
        Index(
            "ix_event_delivery_pending_subject",
            "subscription_id",
            "subject",
            "event_id",
            postgresql_where=text("state = 'pending'"),
        ),
        Index(
            "ix_event_delivery_pending_due",
            "next_attempt_at",
            postgresql_where=text("state = 'pending'"),
        ),
        Index(None, "event_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    subscription_id: Mapped[int] = mapped_column(
        ForeignKey("event_subscription.id", ondelete="CASCADE")
    )
    event_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("outbox_event.id", ondelete="CASCADE")
    )
    subject: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), server_default="pending")
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    next_attempt_at: Mapped[datetime]
    last_attempt_at: Mapped[datetime | None]
    last_status_code: Mapped[int | None] = mapped_column(SmallInteger)
    last_error: Mapped[str | None] = mapped_column(Text)
    delivered_at: Mapped[datetime | None]
    # When it was last retried by hand: its retry window counts from then (else from its
    # creation).
    retried_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = created_at_column()


class EventState(Base):
    """A state that opens events, kept by the job that judges it (`kind`: an environment's
    drift, a drifted or stale cluster, a rollout's announced stall, a failing environment or
    control plane) per `key`: since when it holds, and whether its opening event went out
    (drift is announced once a cluster's drift outlives its grace). The row goes when the
    state ends, with the closing event if the opening one went out."""

    __tablename__ = "event_state"

    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    since: Mapped[datetime]
    announced: Mapped[bool] = mapped_column(server_default=false())
