"""SQL of the promotion job: which workloads an environment carries, and the kept answers
(gate_answer, migration 0027) replaced as a whole."""

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import GateAnswer

# Held while the answers are judged and written ("gates" in ASCII): one replica at a time.
ANSWERS_LOCK = 0x6761746573

_WORKLOADS = text("""
SELECT DISTINCT v.workload
FROM desired_version v
JOIN environment e ON e.id = v.environment_id
WHERE e.name = :environment
ORDER BY v.workload
""")


async def workloads(session: AsyncSession, environment: str) -> list[str]:
    """The workloads assigned in the environment, at the head of its platform branches."""
    return list(await session.scalars(_WORKLOADS, {"environment": environment}))


async def replace_answers(session: AsyncSession, answers: Sequence[dict[str, Any]]) -> None:
    """The kept answers become `answers` (GateAnswer's columns), all at once for readers."""
    await session.execute(delete(GateAnswer))
    if answers:
        await session.execute(insert(GateAnswer), list(answers))
    await session.flush()
