"""Drift endpoints (read scope): the drifted objects with their reasons, and drift history."""

from typing import Annotated

from fastapi import APIRouter, Query

from hub.client.schemas.drift import DriftHistoryQuery, DriftQuery
from hub.deps import ClockDep, ReadAccess, ReadContextDep, ReadSessionDep, sort_order
from hub.drift import service
from hub.drift.schemas import DriftHistory, DriftReport
from hub.errors import error_response, error_responses
from hub.sorting import Order

router = APIRouter(
    prefix="/api/v1/drift",
    tags=["drift"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)

_NOT_FOUND = error_response(404, "Unknown environment, cluster type or cluster.")


@router.get("", response_model=DriftReport, responses=_NOT_FOUND)
async def current_drift(
    session: ReadSessionDep,
    context: ReadContextDep,
    order: Annotated[Order, sort_order(service.COLUMNS, "rows")],
    query: Annotated[DriftQuery, Query()],
) -> DriftReport:
    """Drifted reconciler objects of registered clusters, each with every reason and its
    evidence: behind the harvested head (commits, since when), diverged, unknown revision, not
    applied, failing, stale agent, config hash mismatch, live drift; with counts per reason and
    per environment over all rows matching the filters."""
    return await service.current_drift(
        session,
        environment=query.environment,
        cluster_type=query.cluster_type,
        cluster=query.cluster,
        reasons=query.reasons,
        include_in_sync=query.include_in_sync,
        limit=query.limit,
        offset=query.offset,
        now=context.now,
        stale_after=context.stale_after,
        order=order,
    )


@router.get("/history", response_model=DriftHistory, responses=_NOT_FOUND)
async def drift_history(
    session: ReadSessionDep,
    clock: ClockDep,
    query: Annotated[DriftHistoryQuery, Query()],
) -> DriftHistory:
    """How long each cluster (or object) was drifted: its drift periods overlapping the range,
    with start, end (none while open), duration and reasons, and its drifted time in the
    range."""
    return await service.drift_history(
        session,
        environment=query.environment,
        cluster_type=query.cluster_type,
        cluster=query.cluster,
        level=query.level,
        since=query.since,
        until=query.until,
        open_only=query.open_only,
        limit=query.limit,
        offset=query.offset,
        now=clock(),
    )
