"""SQL of the commit statuses: the kept gate answers of a platform repository's commits with
the control-plane commit each carries, and the statuses recorded as posted or to be retried."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import CommitStatus, GateAnswer, GitCommit, Repository

# Advisory lock key of the commit status job: one replica posts at a time.
STATUSES_LOCK = 0x7374617475736573


@dataclass(frozen=True, slots=True, kw_only=True)
class PromotedAnswer:
    """A kept gate answer for a platform commit that carries a control-plane commit."""

    environment: str
    platform_sha: str
    promoted_sha: str
    # 1 for the environment's newest platform commit, 2 for the one before, …
    newest: int
    verdict: str
    reasons: list[str]
    expected: int
    compliant: int


@dataclass(frozen=True, slots=True)
class Recorded:
    """A status as recorded: what was last posted (state None: nothing yet), and the hold on
    the next attempt."""

    sha: str
    context: str
    state: str | None
    failures: int
    retry_at: datetime | None


async def promoted_answers(session: AsyncSession, platform_url: str) -> list[PromotedAnswer]:
    """The kept answers for the commits of the platform repository at `platform_url`
    (normalised) that carry a control-plane commit, the newest commits first."""
    rows = await session.execute(
        select(
            GateAnswer.environment,
            GateAnswer.revision,
            GitCommit.promoted_commit_sha,
            GateAnswer.newest,
            GateAnswer.verdict,
            GateAnswer.reasons,
            GateAnswer.expected,
            GateAnswer.compliant,
        )
        .join(GitCommit, GitCommit.sha == GateAnswer.revision)
        .join(Repository, Repository.id == GitCommit.repository_id)
        .where(
            GateAnswer.workload.is_(None),
            Repository.url == platform_url,
            GitCommit.promoted_commit_sha.is_not(None),
        )
        .order_by(GateAnswer.environment, GateAnswer.newest)
    )
    return [
        PromotedAnswer(
            environment=environment,
            platform_sha=platform_sha,
            # Not null: the query selects carrying commits.
            promoted_sha=promoted_sha or "",
            newest=newest,
            verdict=verdict,
            reasons=reasons,
            expected=expected,
            compliant=compliant,
        )
        for (
            environment,
            platform_sha,
            promoted_sha,
            newest,
            verdict,
            reasons,
            expected,
            compliant,
        ) in rows
    ]


async def recorded(session: AsyncSession, repository: str, shas: Sequence[str]) -> list[Recorded]:
    """The statuses recorded for these commits of the control-plane repository."""
    rows = await session.execute(
        select(
            CommitStatus.sha,
            CommitStatus.context,
            CommitStatus.state,
            CommitStatus.failures,
            CommitStatus.retry_at,
        ).where(CommitStatus.repository == repository, CommitStatus.sha.in_(shas))
    )
    return [Recorded(*row) for row in rows]


async def record(session: AsyncSession, values: dict[str, Any]) -> None:
    """Record a status (CommitStatus's columns: repository, sha and context, and those an
    attempt changed), inserting it or updating the columns given."""
    statement = insert(CommitStatus).values(values)
    changed = {
        name: statement.excluded[name]
        for name in values
        if name not in ("repository", "sha", "context")
    }
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[CommitStatus.repository, CommitStatus.sha, CommitStatus.context],
            set_=changed,
        )
    )
    await session.flush()


async def counts(session: AsyncSession) -> tuple[dict[str, int], int]:
    """Statuses by the state last posted, and how many wait to be tried again."""
    by_state = await session.execute(
        select(CommitStatus.state, func.count())
        .where(CommitStatus.state.is_not(None))
        .group_by(CommitStatus.state)
    )
    waiting = await session.scalar(select(func.count()).where(CommitStatus.retry_at.is_not(None)))
    return {str(state): int(count) for state, count in by_state}, int(waiting or 0)
