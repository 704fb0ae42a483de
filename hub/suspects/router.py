"""Suspects and halts endpoints: the changes ranked by the regressions after them (read scope),
the halts with what to roll back to (read scope), and an admin's clearing of a halt."""

from typing import Annotated

from fastapi import APIRouter, Query

from hub.client.schemas.suspects import (
    ClearHalt,
    Halt,
    Recommendations,
    SuspectsAnswer,
    SuspectsQuery,
)
from hub.deps import (
    AdminAccess,
    ClockDep,
    PublicUrlDep,
    ReadAccess,
    ReadSessionDep,
    SessionDep,
    SettingsDep,
)
from hub.errors import error_response, error_responses
from hub.suspects import service

router = APIRouter(
    prefix="/api/v1", tags=["suspects"], responses=error_responses(401, 403, 422, 503)
)


@router.get(
    "/suspects",
    response_model=SuspectsAnswer,
    dependencies=[ReadAccess],
    responses=error_response(404, "Unknown environment or workload."),
)
async def suspects(
    session: ReadSessionDep,
    clock: ClockDep,
    settings: SettingsDep,
    query: Annotated[SuspectsQuery, Query()],
) -> SuspectsAnswer:
    """The platform commits and workload versions applied in the environment in the period,
    ranked by how much more often clusters regressed after applying them than the clusters
    that had not (docs/suspects.md)."""
    return await service.suspects(
        session,
        query,
        now=clock(),
        window=settings.suspect_window,
        min_regressions=settings.suspect_min_regressions,
    )


@router.get("/recommendations", response_model=Recommendations, dependencies=[ReadAccess])
async def recommendations(
    session: ReadSessionDep, clock: ClockDep, settings: SettingsDep
) -> Recommendations:
    """The halts that hold and, per environment (and workload), the last known good commit or
    version: where a person or a promotion engine may roll back to. fleetmark writes to no
    repository for it."""
    return await service.recommendations(
        session,
        now=clock(),
        soak=settings.gate_answers_soak,
        halting=settings.halt_on_regression,
    )


@router.post(
    "/halts/{halt_id}/clear",
    response_model=Halt,
    dependencies=[AdminAccess],
    responses=error_responses(400)
    | error_response(404, "Unknown halt.")
    | error_response(409, "The halt ended already."),
)
async def clear_halt(
    halt_id: int,
    request: ClearHalt,
    session: SessionDep,
    clock: ClockDep,
    public_url: PublicUrlDep,
) -> Halt:
    """End a halt: its change may leave the environment again and is not halted again; who
    and why are kept, and fleetmark.rollout.unhalted is sent."""
    return await service.clear_halt(
        session, halt_id, by=request.by, reason=request.reason, now=clock(), source=public_url
    )
