"""Events told to subscribers, through a transactional outbox.

`outbox_event` holds each event as it is sent (a CloudEvent), written in the transaction of the
judgement that decides it, with the environment, workload and cluster type subscriptions
filter on. `event_subscription` holds the receivers: URL, format, filters and the secret the
hub signs with. `event_delivery` is an event on its way to one subscription, a row per match
made when the event is written: pending, then delivered or dead. The partial indexes find the
due deliveries and a subject's earlier pending one, which a later event waits for.

Revision ID: 0044_event_outbox
Revises: 0043_transition_previous
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0044_event_outbox"
down_revision: str | None = "0043_transition_previous"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _created_at() -> sa.Column[datetime]:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
    )


def _names(name: str) -> sa.Column[list[str]]:
    return sa.Column(name, postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False)


def upgrade() -> None:
    op.create_table(
        "outbox_event",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("type", sa.String(length=253), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("environment", sa.String(length=253), nullable=True),
        sa.Column("workload", sa.String(length=253), nullable=True),
        sa.Column("cluster_type", sa.String(length=253), nullable=True),
        sa.Column("body", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        _created_at(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox_event")),
        sa.UniqueConstraint("event_id", name=op.f("uq_outbox_event_event_id")),
    )
    op.create_index(op.f("ix_outbox_event_created_at"), "outbox_event", ["created_at"])
    op.create_table(
        "event_subscription",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        _names("event_types"),
        _names("environments"),
        _names("workloads"),
        _names("cluster_types"),
        sa.Column("include_missing", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("secret", sa.String(length=64), nullable=False),
        _created_at(),
        sa.CheckConstraint(
            "format IN ('cloudevents', 'slack')", name=op.f("ck_event_subscription_format")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_subscription")),
        sa.UniqueConstraint("name", name=op.f("uq_event_subscription_name")),
    )
    op.create_table(
        "event_delivery",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("subscription_id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), server_default="pending", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status_code", sa.SmallInteger(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        _created_at(),
        sa.CheckConstraint(
            "state IN ('pending', 'delivered', 'dead')", name=op.f("ck_event_delivery_state")
        ),
        sa.ForeignKeyConstraint(
            ["subscription_id"],
            ["event_subscription.id"],
            name=op.f("fk_event_delivery_subscription_id_event_subscription"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["outbox_event.id"],
            name=op.f("fk_event_delivery_event_id_outbox_event"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_delivery")),
    )
    op.create_index(
        op.f("ix_event_delivery_subscription_id_event_id"),
        "event_delivery",
        ["subscription_id", "event_id"],
        unique=True,
    )
    op.create_index(op.f("ix_event_delivery_event_id"), "event_delivery", ["event_id"])
    op.create_index(
        "ix_event_delivery_pending_subject",
        "event_delivery",
        ["subscription_id", "subject", "event_id"],
        postgresql_where=sa.text("state = 'pending'"),
    )
    op.create_index(
        "ix_event_delivery_pending_due",
        "event_delivery",
        ["next_attempt_at"],
        postgresql_where=sa.text("state = 'pending'"),
    )


def downgrade() -> None:
    op.drop_table("event_delivery")
    op.drop_table("event_subscription")
    op.drop_index(op.f("ix_outbox_event_created_at"), table_name="outbox_event")
    op.drop_table("outbox_event")
