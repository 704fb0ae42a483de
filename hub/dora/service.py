"""DORA queries: environments, a workload and a time range in; figures per environment and the
rollouts behind them out.

Data flow: the range is settled against the hub's clock -> `dora_rollout` in the store returns
the rollouts of the asked environments that started from the lookback before the range to its
end (or now) -> the pure calculation (hub/dora/calculation.py, which defines the figures)
counts them per environment -> the wire shapes (hub/dora/schemas.py).
"""

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

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
from hub.errors import InvalidInput
from hub.gate.service import UnknownEnvironment, UnknownWorkload

__all__ = [
    "DEFAULT_RANGE",
    "LOOKBACK",
    "MAX_RANGE",
    "DoraQuery",
    "dora_deployments",
    "dora_deployments_csv",
    "dora_report",
]

DEFAULT_RANGE = timedelta(days=30)
# Bounds the transitions one question reads.
MAX_RANGE = timedelta(days=366)
# How long before the range a revision may have been committed and still be looked for, so
# that a deployment completing early in the range is seen with its whole lead time.
LOOKBACK = timedelta(days=7)


def _time_range(since: datetime | None, until: datetime | None, now: datetime) -> TimeRange:
    """[since, until), each defaulting from the other, until from now: the last 30 days."""
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
    return TimeRange(start, end)


@dataclass(frozen=True, slots=True)
class DoraQuery:
    """What a DORA question names: environments (none: all of them), a workload (none: the
    platform commits) and the range."""

    environments: Sequence[str] = ()
    workload: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class _Question:
    environments: list[tuple[str, int | None]]
    workload: str | None
    period: TimeRange
    evaluated_at: datetime

    @property
    def subject(self) -> Subject:
        return "platform_commits" if self.workload is None else "workload_versions"


async def _environments(
    session: AsyncSession, names: Sequence[str]
) -> list[tuple[str, int | None]]:
    """The asked environments (all when none are named), in promotion order."""
    known = await repository.environments(session)
    if not names:
        return known
    unknown = sorted(set(names) - {name for name, _ in known})
    if unknown:
        listed = ", ".join(name for name, _ in known) or "none yet"
        named = ", ".join(repr(name) for name in unknown)
        what = f"environment {named} is" if len(unknown) == 1 else f"environments {named} are"
        raise UnknownEnvironment(f"{what} unknown (known: {listed})")
    return [(name, position) for name, position in known if name in names]


async def _ask(
    session: AsyncSession, query: DoraQuery, now: datetime
) -> tuple[_Question, list[Rollout]]:
    period = _time_range(query.since, query.until, now)
    asked = await _environments(session, query.environments)
    workload = query.workload
    if workload is not None:
        assigned = await repository.workload_environments(session, workload)
        if not assigned & {name for name, _ in asked}:
            where = ", ".join(name for name, _ in asked) or "any environment"
            raise UnknownWorkload(f"workload {workload!r} has no assignment in {where}")
    question = _Question(asked, workload, period, now)
    found = await repository.rollouts(
        session,
        environments=[name for name, _ in asked],
        workload=workload,
        window_start=period.since - LOOKBACK,
        as_of=min(period.until, now),
    )
    return question, found


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
) -> DoraReport:
    """The figures per environment: of its platform commits, or of the workload's versions."""
    question, found = await _ask(session, query, now)
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
    session: AsyncSession,
    query: DoraQuery,
    *,
    limit: int,
    offset: int,
    now: datetime,
) -> DoraDeploymentPage:
    """A page of the rollouts the figures of the range count."""
    question, found = await _ask(session, query, now)
    items = _newest_first(question, found)
    return DoraDeploymentPage(
        since=question.period.since,
        until=question.period.until,
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
) -> str:
    """Every rollout the figures of the range count, as CSV with a header row: the columns of
    DoraDeployment, times in ISO 8601, empty cells for nothing."""
    question, found = await _ask(session, query, now)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(DoraDeployment.model_fields))
    writer.writeheader()
    for item in _newest_first(question, found):
        row = item.model_dump(mode="json")
        writer.writerow({name: _cell(value) for name, value in row.items()})
    return out.getvalue()
