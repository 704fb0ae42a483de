"""The promotion job: the gate's answers for the newest platform commits and workload versions
of every environment, kept in the store (gate_answer) for dashboards and alert rules.

Data flow: environments in promotion order -> per environment, the newest `newest` commits of
its platform branch (those `promotable` examines first) and, per workload assigned there, its
newest `newest` versions -> each judged by `hub.gate.service.promotion_gate`, the code path of
GET /api/v1/gates/promotion, with the job's options -> the verdicts, counts and the clusters
that block each, replacing the kept answers in one transaction.
"""

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from hub.database import exclusive, write_session
from hub.gate import service as gate_service
from hub.gate.policy import REASONS_NAMED, ClusterState
from hub.gate.schemas import GateResult
from hub.placement import repository as placement_repository
from hub.promotion import repository
from hub.settings import HubSettings
from hub.types import Clock, Sessions

__all__ = ["AnswerOptions", "keep_answers", "scheduled_answers"]

log = structlog.get_logger("fleetmark.promotion")


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerOptions:
    """The gate options the kept answers are judged with, and how many of the newest commits
    (and of each workload's versions) each environment keeps answers for."""

    soak: timedelta
    stale_after: timedelta
    newest: int

    @classmethod
    def of(cls, settings: HubSettings) -> "AnswerOptions":
        return cls(
            soak=settings.gate_answers_soak,
            stale_after=timedelta(seconds=settings.stale_after_seconds),
            newest=settings.gate_answers_newest,
        )


def _answer(
    result: GateResult, position: int | None, workload: str | None, revision: str, newest: int
) -> dict[str, Any]:
    """GateAnswer's columns for one answer; blocking: the listed clusters not compliant."""
    counts = result.counts
    return {
        "environment": result.target.environment,
        "environment_position": position,
        "workload": workload,
        "revision": revision,
        "newest": newest,
        "verdict": result.verdict.value,
        "reasons": result.reasons,
        "expected": counts.expected,
        "compliant": counts.compliant,
        "stale": counts.stale,
        "never_reported": counts.never_reported,
        "blocking": [
            {
                "cluster": cluster.name,
                "cluster_type": cluster.cluster_type,
                "state": cluster.state.value,
                "explanation": cluster.explanation,
            }
            for cluster in result.clusters.items
            if cluster.state is not ClusterState.COMPLIANT
        ],
        "blocking_count": counts.expected - counts.compliant,
        "earliest_pass_at": result.earliest_pass_at,
        "evaluated_at": result.evaluated_at,
    }


async def keep_answers(session: AsyncSession, options: AnswerOptions, *, now: datetime) -> int:
    """Judge the newest commits and versions of every environment and keep the answers; the
    caller commits. Returns how many answers are kept."""

    async def gate(
        environment: str, commit: str | None, workload: str | None, version: str | None
    ) -> GateResult:
        return await gate_service.promotion_gate(
            session,
            environment=environment,
            commit=commit,
            workload=workload,
            version=version,
            soak=options.soak,
            stale_after=options.stale_after,
            allow_stale=False,
            min_clusters=1,
            now=now,
            page=gate_service.ClusterPage(limit=REASONS_NAMED),
        )

    answers = []
    for environment, _, position in await placement_repository.environments(session):
        commits = await gate_service.newest_commits(session, environment, options.newest)
        for newest, sha in enumerate(commits, start=1):
            result = await gate(environment, sha, None, None)
            answers.append(_answer(result, position, None, sha, newest))
        for workload in await repository.workloads(session, environment):
            versions = await gate_service.newest_versions(
                session, environment, workload, options.newest
            )
            for newest, version in enumerate(versions, start=1):
                result = await gate(environment, None, workload, version)
                answers.append(_answer(result, position, workload, version, newest))
    await repository.replace_answers(session, answers)
    return len(answers)


async def scheduled_answers(
    sessions: Sessions,
    settings: HubSettings,
    *,
    clock: Clock,
) -> int | None:
    """The periodic job: the answers judged and kept, unless another replica is at it (then
    None)."""
    async with exclusive(sessions, repository.ANSWERS_LOCK) as acquired:
        if not acquired:
            log.info("gate answers skipped: another replica is judging them")
            return None
        started = time.perf_counter()
        async with write_session(sessions) as session:
            kept = await keep_answers(session, AnswerOptions.of(settings), now=clock())
    log.info("gate answers kept", answers=kept, seconds=round(time.perf_counter() - started, 3))
    return kept
