"""The events the judging jobs published, as the outbox holds them."""

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import OutboxEvent


async def published(session: AsyncSession, prefix: str = "fleetmark.") -> list[dict[str, Any]]:
    """The outbox's events whose type starts with `prefix`, oldest first: type, subject and
    data, with the dimensions subscriptions filter on."""
    rows = await session.execute(
        select(
            OutboxEvent.type,
            OutboxEvent.subject,
            OutboxEvent.environment,
            OutboxEvent.workload,
            OutboxEvent.body["data"].label("data"),
        )
        .where(OutboxEvent.type.startswith(prefix))
        .order_by(OutboxEvent.id)
    )
    return [dict(row) for row in rows.mappings()]
