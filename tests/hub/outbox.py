"""The events the judging jobs published, as the outbox holds them."""

from typing import Any

import jsonschema
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import OutboxEvent
from hub.tasks import EVENT_TYPES


async def published(session: AsyncSession, prefix: str = "fleetmark.") -> list[dict[str, Any]]:
    """The outbox's events whose type starts with `prefix`, oldest first: type, subject and
    data, with the dimensions subscriptions filter on (environment, workload, cluster types).
    Each one's data is checked against the JSON Schema of its type that docs/events.md shows."""
    rows = await session.execute(
        select(
            OutboxEvent.type,
            OutboxEvent.subject,
            OutboxEvent.environment,
            OutboxEvent.workload,
            OutboxEvent.cluster_types,
            OutboxEvent.body["data"].label("data"),
        )
        .where(OutboxEvent.type.startswith(prefix))
        .order_by(OutboxEvent.id)
    )
    events = [dict(row) for row in rows.mappings()]
    for event in events:
        jsonschema.validate(event["data"], EVENT_TYPES[event["type"]].model_json_schema())
    return events
