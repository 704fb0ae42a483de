"""What the drift tests share: the drift job run at the injected clock's time, and the drift
service asked as the API asks it."""

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from hub.drift import service
from hub.drift.schemas import DriftItem, DriftReport
from tests.hub.harvest.gitrepo import WorkRepo
from tests.support import FakeClock

STALE_AFTER = timedelta(minutes=10)
ANNOUNCING = service.Announcing(grace=timedelta(minutes=5), source="https://fleetmark.example.com")


async def evaluate(
    session: AsyncSession, clock: FakeClock, *, stale_after: timedelta = STALE_AFTER
) -> service.Evaluation:
    """One run of the drift job, now; committed as the job's unit of work is."""
    evaluation = await service.evaluate_drift(
        session, now=clock.now, stale_after=stale_after, announcing=ANNOUNCING
    )
    await session.commit()
    return evaluation


async def drift(session: AsyncSession, clock: FakeClock, **options: Any) -> DriftReport:
    values: dict[str, Any] = {
        "environment": None,
        "cluster_type": None,
        "cluster": None,
        "reasons": None,
        "include_in_sync": False,
        "limit": 100,
        "offset": 0,
    }
    return await service.current_drift(
        session, now=clock.now, stale_after=STALE_AFTER, **(values | options)
    )


def key(item: DriftItem) -> tuple[str, str | None]:
    """A row as (cluster, object kind/name)."""
    found = item.object
    return item.cluster, None if found is None else f"{found.kind}/{found.name}"


def rows(report: DriftReport) -> dict[tuple[str, str | None], DriftItem]:
    return {key(item): item for item in report.items}


def reasons(report: DriftReport) -> dict[tuple[str, str | None], list[str]]:
    return {key(item): [reason.reason.value for reason in item.reasons] for item in report.items}


def committed_at(repo: WorkRepo, sha: str) -> datetime:
    """The commit time git recorded for `sha` (the test repositories' fake clock)."""
    return datetime.fromisoformat(repo.git("show", "-s", "--format=%cI", sha))
