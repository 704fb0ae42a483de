"""Scheduling as background work: every `schedule_interval` when a control plane is configured
(the configured control plane followed into the platform GitOps repository), and when a run is
asked for (the API, the CLI); one replica at a time."""

import time

import structlog
from pydantic import ValidationError

from hub.background.task import Task
from hub.database import exclusive, write_session
from hub.errors import SchedulingRunning, describe_validation_error
from hub.scheduling import repository, service
from hub.scheduling.schemas import ScheduleRequest, ScheduleRun
from hub.scheduling.service import Timer
from hub.settings import HubSettings
from hub.types import Clock, Sessions

SCHEDULE_JOB = "schedule"
log = structlog.get_logger("fleetmark.scheduling")


async def schedule(
    sessions: Sessions, settings: HubSettings, request: ScheduleRequest, *, clock: Clock
) -> ScheduleRun:
    """Schedule now (the CLI, a run asked for through the API); SchedulingRunning when another
    process is scheduling."""
    async with exclusive(sessions, repository.SCHEDULE_LOCK) as acquired:
        if not acquired:
            raise SchedulingRunning(
                "scheduling is running elsewhere (the hub's job, or another run); try again later"
            )
        return await run_schedule(sessions, settings, request, clock=clock)


async def run_schedule(
    sessions: Sessions,
    settings: HubSettings,
    request: ScheduleRequest,
    *,
    clock: Clock,
    timer: Timer = time.monotonic,
) -> ScheduleRun:
    """Schedule the environments `request` names (all those declared when it names none); the
    caller holds the scheduling lock. `timer` is the clock the time limit of an assignment's
    render (`settings.template_render_timeout`) is kept by."""
    return await service.schedule_environments(
        lambda: write_session(sessions), settings, request, clock=clock, timer=timer
    )


async def scheduled_schedule(
    sessions: Sessions, settings: HubSettings, clock: Clock
) -> ScheduleRun | None:
    """A round of the periodic job: follow the configured control plane."""
    if settings.schedule_control_plane is None or settings.schedule_gitops is None:
        return None
    try:
        request = ScheduleRequest(
            control_plane=settings.schedule_control_plane,
            gitops=settings.schedule_gitops,
            environments=settings.schedule_environments,
            mode=settings.schedule_mode,
        )
    except ValidationError as exc:
        log.error("scheduling skipped: bad settings", error=describe_validation_error(exc))
        return None
    run = await run_schedule(sessions, settings, request, clock=clock)
    for outcome in run.environments:
        log.info(
            "scheduled",
            environment=outcome.environment,
            commit=outcome.commit,
            branch=outcome.branch,
            changes=len(outcome.changes),
            errors=len(outcome.errors),
            failure=outcome.failure,
        )
    return run


SCHEDULE = Task(
    name=SCHEDULE_JOB,
    run=scheduled_schedule,
    interval=lambda settings: settings.schedule_interval,
    lock=repository.SCHEDULE_LOCK,
    skipped="scheduling skipped: another replica is scheduling",
    enabled=lambda settings: settings.schedule_control_plane is not None,
)
