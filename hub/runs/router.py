"""Runs asked for through the API: harvest now, schedule now (admin), answered 202 at once
with the run to poll (`Location`), and the run's state until it is done (read scope)."""

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Depends, Response, status
from pydantic import BaseModel

from hub.background.runner import run_requested
from hub.client.params import Id
from hub.deps import (
    AdminAccess,
    ClockDep,
    JobsDep,
    ReadAccess,
    ReadSessionDep,
    SessionDep,
    SettingsDep,
)
from hub.errors import Responses, error_response, error_responses
from hub.harvest import tasks as harvest_tasks
from hub.runs import service
from hub.runs.schemas import HarvestRequest, RequestedJob, RequestedRun
from hub.scheduling import service as scheduling_service
from hub.scheduling import tasks as scheduling_tasks
from hub.scheduling.schemas import ScheduleRequest
from hub.types import Sessions

router = APIRouter(
    prefix="/api/v1/runs",
    tags=["runs"],
    responses=error_responses(401, 403, 422, 503),
)

_ACCEPTED: Responses = {
    status.HTTP_202_ACCEPTED: {
        "description": "Started; poll the run at Location until its outcome is not running.",
        "headers": {"Location": {"schema": {"type": "string"}, "description": "/api/v1/runs/{id}"}},
    },
    **error_response(
        429,
        f"As many runs of this job as are kept ({service.MAX_REQUESTED_RUNS:,}) were asked "
        f"for within {service.REQUESTED_RUNS_KEPT_HOURS} hours; retry after Retry-After "
        "seconds, when the oldest expires.",
    ),
}


class RunStarter:
    """Records a run asked for as running and starts it once the request's unit of work is
    committed (so its record exists when it completes); the answer's Location is the run."""

    def __init__(
        self,
        session: SessionDep,
        settings: SettingsDep,
        clock: ClockDep,
        jobs: JobsDep,
        response: Response,
        after: BackgroundTasks,
    ) -> None:
        self.session, self.settings, self.clock = session, settings, clock
        self.jobs, self.response, self.after = jobs, response, after

    async def start(
        self, job: RequestedJob, work: Callable[[Sessions], Awaitable[BaseModel]]
    ) -> RequestedRun:
        run = await service.start_run(self.session, job, now=self.clock())
        self.response.headers["Location"] = f"{router.prefix}/{run.id}"
        self.after.add_task(run_requested, self.jobs, run.id, work, self.clock)
        return run


StarterDep = Annotated[RunStarter, Depends()]


@router.post(
    "/harvest",
    response_model=RequestedRun,
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=[AdminAccess],
    responses=_ACCEPTED | error_responses(400),
)
async def harvest_now(request: HarvestRequest, starter: StarterDep) -> RequestedRun:
    """Harvest the repositories now (or the one named). A harvest already running elsewhere
    makes the run fail, saying so."""
    return await starter.start(
        "harvest",
        lambda sessions: harvest_tasks.harvest(
            sessions,
            starter.settings,
            clock=starter.clock,
            only=request.repository,
            backfill=request.backfill,
        ),
    )


@router.post(
    "/schedule",
    response_model=RequestedRun,
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=[AdminAccess],
    responses=_ACCEPTED | error_responses(400),
)
async def schedule_now(request: ScheduleRequest, starter: StarterDep) -> RequestedRun:
    """Schedule the environments named (every declared one when none is) from the control
    plane into the platform GitOps repository now. The run's `schedule` tells, environment by
    environment, what was committed and what failed."""
    settings = starter.settings
    scheduling_service.check_locations(request, allow_local=settings.local_repositories_allowed)
    return await starter.start(
        "schedule",
        lambda sessions: scheduling_tasks.schedule(
            sessions, settings, request, clock=starter.clock
        ),
    )


@router.get(
    "/{run_id}",
    response_model=RequestedRun,
    dependencies=[ReadAccess],
    responses=error_response(404, "No harvest or scheduling run with that id."),
)
async def get_run(run_id: Id, session: ReadSessionDep) -> RequestedRun:
    """A run asked for through the API: running, or done with its outcome and what it did."""
    return await service.requested_run(session, run_id)
