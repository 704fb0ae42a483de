"""DORA queries: environments, a workload and a time range in; figures per environment and the
rollouts behind them out; and the DORA job, which keeps the rollup they are read from.

Why a job and a rollup, and what a refresh judges again: docs/contributing.md ("Background
jobs"). Until the job first covers what is asked, rollouts are judged for the question.
"""

import csv
import io
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.dora import DoraDeploymentsQuery, DoraQuery
from hub.client.text import format_duration
from hub.dora import repository
from hub.dora.calculation import Counted, Rollout, Spread, TimeRange, behind_figures, figures
from hub.dora.schemas import (
    DoraDeployment,
    DoraDeploymentPage,
    DoraReport,
    EnvironmentDora,
    Subject,
)
from hub.dora.schemas import Spread as WireSpread
from hub.errors import InvalidInput, UnknownWorkload
from hub.models.dora import PLATFORM_COMMITS
from hub.placement import service as placement_service

__all__ = [
    "DEFAULT_RANGE",
    "LOOKBACK",
    "MAX_RANGE",
    "Refresh",
    "dora_deployments",
    "dora_deployments_csv",
    "dora_report",
    "refresh_rollup",
]

log = structlog.get_logger("fleetmark.dora")

DEFAULT_RANGE = timedelta(days=30)
# Bounds the transitions one question reads.
MAX_RANGE = timedelta(days=366)
# How long before the range a revision may have been committed and still be looked for, so
# that a deployment completing early in the range is seen with its whole lead time.
LOOKBACK = timedelta(days=7)


def _time_range(
    since: datetime | None, until: datetime | None, now: datetime, kept: timedelta
) -> TimeRange:
    """[since, until), each defaulting from the other, until from now: the last 30 days. A
    range that needs history older than the `kept` (FLEETMARK_HISTORY_RETENTION) before now
    is refused: what is dropped cannot be counted."""
    end = now if until is None else until
    start = end - DEFAULT_RANGE if since is None else since
    if start >= end:
        if until is None:
            raise InvalidInput(f"since: {start.isoformat()} is not before now ({end.isoformat()})")
        raise InvalidInput(f"until: {end.isoformat()} is not after since {start.isoformat()}")
    if end - start > MAX_RANGE:
        raise InvalidInput(
            f"since: the range from {start.isoformat()} to {end.isoformat()} is longer than "
            f"{MAX_RANGE.days} days"
        )
    oldest = now - kept
    if start - LOOKBACK < oldest:
        raise InvalidInput(
            f"since: {start.isoformat()} is too early: the history is kept for "
            f"{format_duration(kept)} (FLEETMARK_HISTORY_RETENTION), so transitions before "
            f"{oldest.isoformat()} are dropped, and a range must start {LOOKBACK.days} days "
            f"after them (revisions are looked for that long before it): from "
            f"{(oldest + LOOKBACK).isoformat()}"
        )
    return TimeRange(start, end)


@dataclass(frozen=True, slots=True)
class _Question:
    environments: list[tuple[str, int | None]]
    workload: str | None
    period: TimeRange
    # The rollup's refresh the answer is as of; None: judged from the transitions.
    evaluated_at: datetime | None
    now: datetime

    @property
    def subject(self) -> Subject:
        return "platform_commits" if self.workload is None else "workload_versions"


async def _environments(
    session: AsyncSession, names: Sequence[str]
) -> list[tuple[str, int | None]]:
    """The asked environments (all when none are named), in promotion order."""
    placed = await placement_service.environments(session, names)
    return [(environment.name, environment.position) for environment in placed]


async def _ask(
    session: AsyncSession, query: DoraQuery, now: datetime, kept: timedelta
) -> tuple[_Question, list[Rollout]]:
    period = _time_range(query.since, query.until, now, kept)
    asked = await _environments(session, query.environments or ())
    workload = query.workload
    if workload is not None:
        assigned = await repository.workload_environments(session, workload)
        if not assigned & {name for name, _ in asked}:
            await placement_service.check_names(session, workload=workload)
            where = ", ".join(name for name, _ in asked) or "any environment"
            raise UnknownWorkload(f"workload {workload!r} has no assignment in {where}")
    refreshed_at = await repository.refreshed_at(
        session, PLATFORM_COMMITS if workload is None else workload
    )
    as_of = min(period.until, now)
    found = await repository.rollouts(
        session,
        environments=[name for name, _ in asked],
        workload=workload,
        window_start=period.since - LOOKBACK,
        as_of=as_of if refreshed_at is None else min(as_of, refreshed_at),
        rolled_up=refreshed_at is not None,
    )
    return _Question(asked, workload, period, refreshed_at, now), found


def _seconds(duration: timedelta | None) -> float | None:
    return None if duration is None else duration.total_seconds()


def _spread(spread: Spread) -> WireSpread:
    return WireSpread(
        median_seconds=_seconds(spread.median),
        p90_seconds=_seconds(spread.p90),
        mean_seconds=_seconds(spread.mean),
    )


async def dora_report(
    session: AsyncSession,
    query: DoraQuery,
    *,
    now: datetime,
    kept: timedelta,
) -> DoraReport:
    """The figures per environment: of its platform commits, or of the workload's versions."""
    question, found = await _ask(session, query, now, kept)
    reports = []
    for name, position in question.environments:
        counted = figures(
            (rollout for rollout in found if rollout.environment == name), question.period
        )
        reports.append(
            EnvironmentDora(
                environment=name,
                position=position,
                deployments=counted.deployments,
                deployments_per_day=counted.deployments_per_day,
                lead_time=_spread(counted.lead_time),
                rollouts_started=counted.rollouts_started,
                rollouts_failed=counted.rollouts_failed,
                change_failure_rate=counted.change_failure_rate,
                in_progress=counted.in_progress,
                restored=counted.restored,
                unrestored=counted.unrestored,
                time_to_restore=_spread(counted.time_to_restore),
            )
        )
    return DoraReport(
        since=question.period.since,
        until=question.period.until,
        evaluated_at=question.evaluated_at,
        now=question.now,
        subject=question.subject,
        workload=query.workload,
        environments=reports,
    )


def _deployment(question: _Question, item: Counted) -> DoraDeployment:
    rollout = item.rollout
    return DoraDeployment(
        environment=rollout.environment,
        subject=question.subject,
        workload=question.workload,
        revision=rollout.revision,
        commit=rollout.commit_sha,
        repository=rollout.repository,
        branch=rollout.branch,
        committed_at=rollout.committed_at,
        started_at=rollout.started_at,
        completed_at=rollout.completed_at,
        lead_time_seconds=_seconds(rollout.lead_time),
        expected_clusters=rollout.expected_clusters,
        reached_clusters=rollout.reached_clusters,
        failed_at=rollout.failed_at,
        failed_clusters=rollout.failed_clusters,
        failed_cluster=rollout.failed_cluster,
        failure_reason=rollout.failure_reason,
        failure_message=rollout.failure_message,
        restored_at=rollout.restored_at,
        time_to_restore_seconds=_seconds(rollout.time_to_restore),
        completed_in_range=item.completed_in_range,
        started_in_range=item.started_in_range,
    )


def _newest_first(question: _Question, found: list[Rollout]) -> list[DoraDeployment]:
    """Per environment in promotion order, newest rollout first."""
    order = {name: index for index, (name, _) in enumerate(question.environments)}
    ordered = sorted(
        behind_figures(found, question.period),
        key=lambda item: (
            order[item.rollout.environment],
            -item.rollout.started_at.timestamp(),
            item.rollout.revision,
        ),
    )
    return [_deployment(question, item) for item in ordered]


async def dora_deployments(
    session: AsyncSession, query: DoraDeploymentsQuery, *, now: datetime, kept: timedelta
) -> DoraDeploymentPage:
    """A page of the rollouts the figures of the range count."""
    question, found = await _ask(session, query, now, kept)
    items = _newest_first(question, found)
    limit, offset = query.limit, query.offset
    return DoraDeploymentPage(
        since=question.period.since,
        until=question.period.until,
        evaluated_at=question.evaluated_at,
        now=question.now,
        subject=question.subject,
        workload=query.workload,
        items=items[offset : offset + limit],
        total=len(items),
        limit=limit,
        offset=offset,
    )


def _cell(value: object) -> object:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else value


async def dora_deployments_csv(
    session: AsyncSession,
    query: DoraQuery,
    *,
    now: datetime,
    kept: timedelta,
) -> str:
    """Every rollout the figures of the range count, as CSV with a header row: the columns of
    DoraDeployment, times in ISO 8601, empty cells for nothing."""
    question, found = await _ask(session, query, now, kept)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(DoraDeployment.model_fields))
    writer.writeheader()
    for item in _newest_first(question, found):
        row = item.model_dump(mode="json")
        writer.writerow({name: _cell(value) for name, value in row.items()})
    return out.getvalue()


# --- the job ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Refresh:
    refreshed_at: datetime
    # The platform commits and each workload.
    subjects: int
    # Of those, judged from the start: never refreshed before.
    judged_in_full: int
    # Rollouts written: new ones, and unsettled ones whose verdict changed.
    written: int
    seconds: float


async def refresh_rollup(session: AsyncSession, *, now: datetime, settle: timedelta) -> Refresh:
    """Judge the rollouts of the platform commits and of each workload's versions whose
    outcome can still change, as of `now`, into the rollup; the caller commits."""
    started = time.perf_counter()
    settled_before = now - settle
    subjects = [PLATFORM_COMMITS, *await repository.rolled_up_workloads(session)]
    in_full = written = 0
    for subject in subjects:
        previous = await repository.refreshed_at(session, subject)
        window_start = None
        if previous is None:
            in_full += 1
        else:
            unsettled = await repository.unsettled_from(
                session, subject, settled_before=settled_before
            )
            window_start = previous - settle
            if unsettled is not None:
                window_start = min(window_start, unsettled)
        written += await repository.refresh(
            session,
            subject,
            window_start=window_start,
            as_of=now,
            settled_before=settled_before,
        )
    return Refresh(now, len(subjects), in_full, written, time.perf_counter() - started)
