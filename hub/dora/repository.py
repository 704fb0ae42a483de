"""SQL of the DORA queries: rollouts from the store's `dora_rollout` function (migration
0008_dora), and the names they are asked by. Nothing here writes."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.dora.calculation import Rollout
from hub.models import Assignment, AssignmentRevision, Environment

_ROLLOUTS = text(
    "SELECT * FROM dora_rollout(CAST(:environments AS text[]), CAST(:workload AS text), "
    "CAST(:window_start AS timestamptz), CAST(:as_of AS timestamptz))"
)


async def environments(session: AsyncSession) -> list[tuple[str, int | None]]:
    """Every environment with its position, in promotion order, then by name."""
    rows = await session.execute(
        select(Environment.name, Environment.position).order_by(
            Environment.position.asc().nulls_last(), Environment.name
        )
    )
    return [(name, position) for name, position in rows]


async def workload_environments(session: AsyncSession, workload: str) -> set[str]:
    """The environments in which the workload has a current assignment.

    Kalypso names a deployment target `<workload>-<target>`, the only tie between an
    assignment and its workload that the platform repository holds.
    """
    rows = await session.scalars(
        select(Environment.name)
        .join(Assignment, Assignment.environment_id == Environment.id)
        .join(AssignmentRevision, AssignmentRevision.assignment_id == Assignment.id)
        .where(
            Assignment.deployment_target_name.startswith(f"{workload}-", autoescape=True),
            AssignmentRevision.valid_until_commit_id.is_(None),
        )
        .distinct()
    )
    return set(rows)


async def rollouts(
    session: AsyncSession,
    *,
    environments: Sequence[str],
    workload: str | None,
    window_start: datetime,
    as_of: datetime,
) -> list[Rollout]:
    """Rollouts of platform commits (workload None) or of the workload's versions that
    started in [window_start, as_of), by environment in promotion order, oldest first."""
    rows = await session.execute(
        _ROLLOUTS,
        {
            "environments": list(environments),
            "workload": workload,
            "window_start": window_start,
            "as_of": as_of,
        },
    )
    return [Rollout(**row) for row in rows.mappings()]
