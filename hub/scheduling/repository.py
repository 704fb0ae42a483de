"""SQL of the scheduler: its targets and their render state, assignments and errors, and the
lock that keeps scheduling to one replica at a time. Writes are idempotent and batched."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import Environment, ScheduledAssignment, SchedulingError, SchedulingTarget

# Advisory lock key held while scheduling ("schedule" in ASCII): one replica at a time.
SCHEDULE_LOCK = 0x7363686564756C65
# Rows per INSERT: well under PostgreSQL's 65,535 bind parameters for the widest table.
_BATCH = 1000
# Set again by every run; the others keep what the run that changed the assignment wrote.
_CHANGE_COLUMNS = ("commit_sha", "branch", "changed_at")


@dataclass(frozen=True, slots=True)
class StoredTarget:
    """What the last run for a target left: the tree its render state describes, and the
    state (scheduler_core.state JSON)."""

    tree_sha: str | None
    render_state: bytes | None


def _batches(rows: Sequence[dict[str, Any]]) -> Iterable[Sequence[dict[str, Any]]]:
    for start in range(0, len(rows), _BATCH):
        yield rows[start : start + _BATCH]


async def stored_target(
    session: AsyncSession, gitops_url: str, environment: str
) -> StoredTarget | None:
    statement = (
        select(SchedulingTarget.tree_sha, SchedulingTarget.render_state)
        .join(Environment, Environment.id == SchedulingTarget.environment_id)
        .where(SchedulingTarget.gitops_url == gitops_url, Environment.name == environment)
    )
    row = (await session.execute(statement)).one_or_none()
    return None if row is None else StoredTarget(tree_sha=row[0], render_state=row[1])


async def scheduled_environments(session: AsyncSession, gitops_url: str) -> list[str]:
    """The environments scheduled into this platform repository before."""
    statement = (
        select(Environment.name)
        .join(SchedulingTarget, SchedulingTarget.environment_id == Environment.id)
        .where(SchedulingTarget.gitops_url == gitops_url)
        .order_by(Environment.name)
    )
    return list(await session.scalars(statement))


async def ensure_target(session: AsyncSession, gitops_url: str, environment_id: int) -> int:
    statement = (
        insert(SchedulingTarget)
        .values(gitops_url=gitops_url, environment_id=environment_id)
        .on_conflict_do_update(
            index_elements=[SchedulingTarget.gitops_url, SchedulingTarget.environment_id],
            set_={"gitops_url": gitops_url},
        )
        .returning(SchedulingTarget.id)
    )
    return (await session.execute(statement)).scalar_one()


async def update_target(session: AsyncSession, target_id: int, **values: Any) -> None:
    await session.execute(
        update(SchedulingTarget).where(SchedulingTarget.id == target_id).values(**values)
    )


async def upsert_assignments(
    session: AsyncSession, rows: Sequence[dict[str, Any]], *, changed: bool
) -> None:
    """Assignments as this run left them. Rows `changed` by this run's commit replace every
    column; the others keep the commit, branch and time of the change that made them."""
    for batch in _batches(rows):
        statement = insert(ScheduledAssignment).values(list(batch))
        columns = [
            column.name
            for column in ScheduledAssignment.__table__.columns
            if column.name not in {"id", "target_id", "cluster_type_name", "deployment_target_name"}
            and (changed or column.name not in _CHANGE_COLUMNS)
        ]
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[
                    ScheduledAssignment.target_id,
                    ScheduledAssignment.cluster_type_name,
                    ScheduledAssignment.deployment_target_name,
                ],
                set_={name: statement.excluded[name] for name in columns},
            )
        )


_DELETE_UNSCHEDULED = text("""
DELETE FROM scheduled_assignment a
WHERE a.target_id = :target_id
  AND NOT EXISTS (
    SELECT 1
    FROM unnest(CAST(:cluster_types AS varchar[]), CAST(:deployment_targets AS varchar[]))
      AS kept(cluster_type, deployment_target)
    WHERE kept.cluster_type = a.cluster_type_name
      AND kept.deployment_target = a.deployment_target_name
  )
""")


async def delete_unscheduled(
    session: AsyncSession, target_id: int, kept: Sequence[tuple[str, str]]
) -> None:
    """Forget the assignments of `target_id` other than the `kept` (cluster type, target) pairs."""
    await session.execute(
        _DELETE_UNSCHEDULED,
        {
            "target_id": target_id,
            "cluster_types": [cluster_type for cluster_type, _ in kept],
            "deployment_targets": [target for _, target in kept],
        },
    )


async def replace_errors(
    session: AsyncSession, target_id: int, rows: Sequence[dict[str, Any]], now: datetime
) -> None:
    """The target's errors become `rows`; one met before keeps when it was first seen."""
    # One row per fingerprint: a statement cannot insert and update the same row.
    rows = list({row["fingerprint"]: row for row in rows}.values())
    for batch in _batches(rows):
        statement = insert(SchedulingError).values(
            [
                {**row, "target_id": target_id, "first_seen_at": now, "last_seen_at": now}
                for row in batch
            ]
        )
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[SchedulingError.target_id, SchedulingError.fingerprint],
                set_={"last_seen_at": statement.excluded.last_seen_at},
            )
        )
    await session.execute(
        delete(SchedulingError).where(
            SchedulingError.target_id == target_id,
            SchedulingError.fingerprint.not_in([row["fingerprint"] for row in rows]),
        )
    )


# --- queries ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssignmentFilter:
    environment: str | None = None
    cluster_type: str | None = None
    workload: str | None = None


async def list_assignments(
    session: AsyncSession, where: AssignmentFilter, *, limit: int, offset: int
) -> tuple[list[tuple[ScheduledAssignment, str, str]], int]:
    """A page of assignments in promotion order, then by cluster type and target; the total."""
    statement = (
        select(ScheduledAssignment, Environment.name, SchedulingTarget.gitops_url)
        .join(SchedulingTarget, SchedulingTarget.id == ScheduledAssignment.target_id)
        .join(Environment, Environment.id == SchedulingTarget.environment_id)
    )
    if where.environment is not None:
        statement = statement.where(Environment.name == where.environment)
    if where.cluster_type is not None:
        statement = statement.where(ScheduledAssignment.cluster_type_name == where.cluster_type)
    if where.workload is not None:
        statement = statement.where(ScheduledAssignment.workload_name == where.workload)
    total = await session.scalar(select(func.count()).select_from(statement.subquery()))
    page = statement.order_by(
        Environment.position.asc().nulls_last(),
        Environment.name,
        SchedulingTarget.gitops_url,
        ScheduledAssignment.cluster_type_name,
        ScheduledAssignment.deployment_target_name,
    )
    rows = (await session.execute(page.limit(limit).offset(offset))).all()
    return [(row[0], row[1], row[2]) for row in rows], int(total or 0)


@dataclass(frozen=True, slots=True)
class ErrorFilter:
    environment: str | None = None
    kind: str | None = None
    cluster_type: str | None = None
    deployment_target: str | None = None


async def list_errors(
    session: AsyncSession, where: ErrorFilter, *, limit: int, offset: int
) -> tuple[list[tuple[SchedulingError, str, str]], int]:
    """A page of the current errors, by environment, cluster type, target and message."""
    statement = (
        select(SchedulingError, Environment.name, SchedulingTarget.gitops_url)
        .join(SchedulingTarget, SchedulingTarget.id == SchedulingError.target_id)
        .join(Environment, Environment.id == SchedulingTarget.environment_id)
    )
    if where.environment is not None:
        statement = statement.where(Environment.name == where.environment)
    if where.kind is not None:
        statement = statement.where(SchedulingError.kind == where.kind)
    if where.cluster_type is not None:
        statement = statement.where(SchedulingError.cluster_type_name == where.cluster_type)
    if where.deployment_target is not None:
        statement = statement.where(
            SchedulingError.deployment_target_name == where.deployment_target
        )
    total = await session.scalar(select(func.count()).select_from(statement.subquery()))
    page = statement.order_by(
        Environment.position.asc().nulls_last(),
        Environment.name,
        SchedulingTarget.gitops_url,
        SchedulingError.cluster_type_name.asc().nulls_first(),
        SchedulingError.deployment_target_name.asc().nulls_first(),
        SchedulingError.message,
    )
    rows = (await session.execute(page.limit(limit).offset(offset))).all()
    return [(row[0], row[1], row[2]) for row in rows], int(total or 0)
