"""SQL of the DORA queries and of the DORA job: rollouts from the rollup (`dora_rolled_up`,
migration 0020_dora_rollouts) or judged from the transitions (`dora_rollout`, 0008_dora), the
names they are asked by, and the job's refresh of the rollup (`dora_judgement` into
`dora_rollup`)."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import CursorResult, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.dora.calculation import Rollout
from hub.models import Assignment, AssignmentRevision, DoraRefresh, Environment

REFRESH_LOCK = 0x646F72615F726F6C

_ROLLOUTS = text(
    "SELECT * FROM dora_rollout(CAST(:environments AS text[]), CAST(:workload AS text), "
    "CAST(:window_start AS timestamptz), CAST(:as_of AS timestamptz))"
)
_ROLLED_UP = text(
    "SELECT * FROM dora_rolled_up(CAST(:environments AS text[]), CAST(:workload AS text), "
    "CAST(:window_start AS timestamptz), CAST(:as_of AS timestamptz))"
)

# What dora_judgement returns per rollout, as dora_rollup keeps it.
_JUDGED_COLUMNS = [
    "environment",
    "environment_position",
    "repository",
    "branch",
    "revision",
    "commit_sha",
    "committed_at",
    "started_at",
    "expected_clusters",
    "reached_clusters",
    "completed_at",
    "failed_at",
    "failed_clusters",
    "failed_cluster",
    "failure_reason",
    "failure_message",
    "restored_at",
    "reached_times",
    "failure_times",
]
_JUDGED = ", ".join(_JUDGED_COLUMNS)


def _judged(row: str) -> str:
    return ", ".join(f"{row}.{column}" for column in _JUDGED_COLUMNS)


def _settled(row: str) -> str:
    """A rollout not judged again: completed, restored if it failed, and both long enough ago
    (:settled_before) for late reports to be ruled out; or one that a later rollout of its
    subject in the environment completed over. Judged again, it would be judged from clusters
    and a branch that moved on since (a force-push takes commits off the branch, and the
    clusters running them out of the rollouts), not from what happened."""
    done = (
        f"{row}.completed_at IS NOT NULL AND ({row}.failed_at IS NULL OR {row}.restored_at IS "
        f"NOT NULL) AND greatest({row}.completed_at, {row}.restored_at) "
        "< CAST(:settled_before AS timestamptz)"
    )
    completed_over = f"""EXISTS (
        SELECT FROM dora_rollup later
        WHERE later.workload = {row}.workload AND later.environment = {row}.environment
          AND later.repository IS NOT DISTINCT FROM {row}.repository
          AND later.branch IS NOT DISTINCT FROM {row}.branch
          AND later.started_at > {row}.started_at AND later.completed_at IS NOT NULL)"""  # noqa: S608 - constants only
    return f"(({done}) OR {completed_over})"


_WINDOW_START = "coalesce(CAST(:window_start AS timestamptz), '-infinity')"

_UNSETTLED_FROM = text(
    "SELECT min(r.committed_at) FROM dora_rollup r "  # noqa: S608 - constants only
    f"WHERE r.workload = :subject AND NOT {_settled('r')}"
)

# The rollouts of a subject judged again, from the window's start on: a new rollout comes in,
# an unsettled one takes its new verdict if it changed; a settled row stays as it is, and so
# does one the judgement no longer finds (a force-push took its commit off the branch, or its
# clusters off the membership): a rollout that happened stays.
_REFRESH = text(f"""
INSERT INTO dora_rollup (workload, {_JUDGED})
SELECT :subject, {_JUDGED}
FROM dora_judgement(NULL, NULLIF(CAST(:subject AS text), ''), {_WINDOW_START},
                    CAST(:as_of AS timestamptz))
ON CONFLICT (workload, environment, repository, branch, revision) DO UPDATE
SET ({_JUDGED}) = ROW({_judged("excluded")})
WHERE NOT {_settled("dora_rollup")}
  AND ROW({_judged("dora_rollup")}) IS DISTINCT FROM ROW({_judged("excluded")})
""")  # noqa: S608 - constants only

# The workloads the current assignments are of, by their Namespace's label, the scheduler's
# record or the declared workloads; those the DORA function finds assignments of by name.
_WORKLOADS = text(
    "SELECT DISTINCT n.name FROM (SELECT workload AS name FROM desired_version "
    "UNION SELECT name FROM workload) n "
    "WHERE EXISTS (SELECT FROM desired_version d "
    "WHERE starts_with(d.deployment_target, n.name || '-')) ORDER BY n.name"
)


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
    rolled_up: bool,
) -> list[Rollout]:
    """Rollouts of platform commits (workload None) or of the workload's versions that
    started in [window_start, as_of), by environment in promotion order, oldest first: from
    the rollup, or judged from the transitions."""
    rows = await session.execute(
        _ROLLED_UP if rolled_up else _ROLLOUTS,
        {
            "environments": list(environments),
            "workload": workload,
            "window_start": window_start,
            "as_of": as_of,
        },
    )
    return [Rollout(**row) for row in rows.mappings()]


async def refreshed_at(session: AsyncSession, subject: str) -> datetime | None:
    """As of when the rollup holds the rollouts of the platform commits (PLATFORM_COMMITS) or
    of the workload's versions; None when it does not hold them."""
    found: datetime | None = await session.scalar(
        select(DoraRefresh.refreshed_at).where(DoraRefresh.workload == subject)
    )
    return found


async def rolled_up_workloads(session: AsyncSession) -> list[str]:
    """The workloads whose versions the rollup keeps: those of the current assignments."""
    return list(await session.scalars(_WORKLOADS))


async def unsettled_from(
    session: AsyncSession, subject: str, *, settled_before: datetime
) -> datetime | None:
    """The commit time of the subject's oldest rollout in the rollup whose outcome can still
    change; None when every one is settled."""
    found: datetime | None = await session.scalar(
        _UNSETTLED_FROM, {"subject": subject, "settled_before": settled_before}
    )
    return found


async def refresh(
    session: AsyncSession,
    subject: str,
    *,
    window_start: datetime | None,
    as_of: datetime,
    settled_before: datetime,
) -> int:
    """Judge the subject's rollouts (PLATFORM_COMMITS or a workload) committed from
    `window_start` on (None: all of them) as of `as_of` into the rollup, keeping the settled
    ones, and note the refresh; how many rows were written."""
    result = await session.execute(
        _REFRESH,
        {
            "subject": subject,
            "window_start": window_start,
            "as_of": as_of,
            "settled_before": settled_before,
        },
    )
    statement = insert(DoraRefresh).values(workload=subject, refreshed_at=as_of)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[DoraRefresh.workload], set_={"refreshed_at": as_of}
        )
    )
    assert isinstance(result, CursorResult)
    return result.rowcount
