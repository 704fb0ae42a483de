"""Drift endpoints (read scope): the drifted objects with their reasons, and drift history."""

from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import AwareDatetime

from hub.deps import ClockDep, ReadAccess, ReadSessionDep, SettingsDep
from hub.drift import service
from hub.drift.schemas import DriftHistory, DriftReport, Reason

router = APIRouter(prefix="/api/v1/drift", tags=["drift"], dependencies=[ReadAccess])

Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0)]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "Unknown environment, cluster type or cluster."}
}


@router.get("", response_model=DriftReport, responses=_NOT_FOUND)
async def current_drift(
    session: ReadSessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    environment: str | None = None,
    cluster_type: str | None = None,
    cluster: str | None = None,
    reason: Annotated[
        list[Reason] | None,
        Query(description="Only rows with any of these reasons (repeatable)."),
    ] = None,
    include_in_sync: Annotated[
        bool, Query(description="Also list the objects that are not drifted.")
    ] = False,
    limit: Limit = 100,
    offset: Offset = 0,
) -> DriftReport:
    """Drifted reconciler objects of registered clusters, each with every reason and its
    evidence: behind the harvested head (commits, since when), diverged, unknown revision, not
    applied, failing, stale agent, config hash mismatch, live drift; with counts per reason and
    per environment over all rows matching the filters."""
    return await service.current_drift(
        session,
        environment=environment,
        cluster_type=cluster_type,
        cluster=cluster,
        reasons=reason,
        include_in_sync=include_in_sync,
        limit=limit,
        offset=offset,
        now=clock(),
        stale_after=timedelta(seconds=settings.stale_after_seconds),
    )


@router.get("/history", response_model=DriftHistory, responses=_NOT_FOUND)
async def drift_history(
    session: ReadSessionDep,
    clock: ClockDep,
    environment: str | None = None,
    cluster_type: str | None = None,
    cluster: str | None = None,
    level: Annotated[
        Literal["cluster", "object"],
        Query(description="Periods of whole clusters, or of each reconciler object."),
    ] = "cluster",
    since: Annotated[AwareDatetime | None, Query(description="Inclusive; none: all.")] = None,
    until: Annotated[AwareDatetime | None, Query(description="Exclusive; none: now.")] = None,
    open_only: Annotated[
        bool, Query(alias="open", description="Only periods still open: drifted now.")
    ] = False,
    limit: Limit = 100,
    offset: Offset = 0,
) -> DriftHistory:
    """How long each cluster (or object) was drifted: its drift periods overlapping the range,
    with start, end (none while open), duration and reasons, and its drifted time in the
    range."""
    return await service.drift_history(
        session,
        environment=environment,
        cluster_type=cluster_type,
        cluster=cluster,
        level=level,
        since=since,
        until=until,
        open_only=open_only,
        limit=limit,
        offset=offset,
        now=clock(),
    )
