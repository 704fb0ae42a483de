"""The commit statuses of a control plane's promotion pull (or merge) requests, from the kept
gate answers.

Each round, per control plane of the repositories file: the kept answers (hub/gate/service.py,
`keep_answers`) for the platform repository's commits that carry a control-plane commit
(`.github/tracking/Promoted_Commit_Id`) -> per environment and control-plane commit, the answer
for the newest platform commit carrying it -> the status `fleetmark/promotion/<next
environment>` (passed: success, pending: pending, failed: failure) -> posted where its state
differs from the one last posted and no hold on it has yet to pass, each post recorded in a
unit of work of its own. An environment last in the promotion order (or in none) promotes to
nothing and gets no status."""

import itertools
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.gate import GateQuery
from hub.client.secret_files import read_secret_file
from hub.events.service import event_source, retry_delay
from hub.gate.service import evidence_url
from hub.harvest.config import load_repositories_file
from hub.harvest.schemas import ControlPlane
from hub.placement import repository as placement_repository
from hub.settings import HubSettings
from hub.statuses import forges, repository
from hub.statuses.forges import Outcome, StatusBody
from hub.statuses.repository import PromotedAnswer, Recorded
from hub.types import Clock, Units

__all__ = [
    "CONTEXT_PREFIX",
    "StatusCounts",
    "Wanted",
    "post_statuses",
    "status_counts",
    "wanted_statuses",
]

log = structlog.get_logger("fleetmark.statuses")

CONTEXT_PREFIX = "fleetmark/promotion/"
# GitHub refuses a longer description (GitLab one past 255 characters).
DESCRIPTION_CHARS = 140
# A status the forge refused (a token without access, a repository not found) is tried again
# after this long: the configuration is fixed by hand, and meanwhile the round does not spin.
REFUSED_WAIT = timedelta(hours=1)
TIMEOUT = httpx.Timeout(10.0)
# Refusals a forge gives for a whole repository, not one commit (bad credentials, no access,
# not found, moved): no other status of it is tried before the same hold has passed.
_REPOSITORY_WIDE = frozenset({301, 302, 307, 308, 401, 403, 404})
_STATES = {"passed": "success", "pending": "pending", "failed": "failure"}
_COMMIT = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Wanted:
    """The status a control-plane commit is to carry for one promotion."""

    sha: str
    context: str
    state: str
    description: str
    target_url: str

    @property
    def body(self) -> StatusBody:
        return StatusBody(
            state=self.state,
            description=self.description,
            target_url=self.target_url,
            context=self.context,
        )


def _description(answer: PromotedAnswer) -> str:
    """One line: the verdict, the counts and, unless it passed, the first reason."""
    text = (
        f"gate {answer.verdict} in {answer.environment}: {answer.compliant} of "
        f"{answer.expected} cluster(s) compliant"
    )
    if answer.verdict != "passed" and answer.reasons:
        text += f"; {answer.reasons[0]}"
    text = " ".join(text.split())
    return text if len(text) <= DESCRIPTION_CHARS else text[: DESCRIPTION_CHARS - 1] + "…"


def wanted_statuses(
    answers: Sequence[PromotedAnswer], order: Sequence[str], *, public_url: str, soak: timedelta
) -> list[Wanted]:
    """The statuses the answers ask for; `order` is the promotion order, `answers` come newest
    platform commit first within each environment: a control-plane commit that several
    platform commits carry gets the answer of the newest of them."""
    following = dict(itertools.pairwise(order))
    wanted: dict[tuple[str, str], Wanted] = {}
    for answer in answers:
        promoted_to = following.get(answer.environment)
        context = f"{CONTEXT_PREFIX}{promoted_to}"
        if promoted_to is None or (answer.promoted_sha, context) in wanted:
            continue
        query = GateQuery(environment=answer.environment, commit=answer.platform_sha, soak=soak)
        wanted[answer.promoted_sha, context] = Wanted(
            sha=answer.promoted_sha,
            context=context,
            state=_STATES[answer.verdict],
            description=_description(answer),
            target_url=evidence_url(public_url, query),
        )
    return list(wanted.values())


def _due(status: Wanted, recorded: Recorded | None, now: datetime) -> bool:
    if recorded is None:
        return True
    if recorded.retry_at is not None and recorded.retry_at > now:
        return False
    return recorded.state != status.state


def _token(plane: ControlPlane, index: int) -> str:
    """The control plane's token, read now (a rotated one is used from the next round)."""
    statuses, field = plane.statuses, f"control_planes[{index}].{plane.forge}"
    if statuses.token_file is not None:
        return read_secret_file(statuses.token_file, f"{field}.token_file")
    assert statuses.token_env is not None
    token = os.environ.get(statuses.token_env, "").strip()
    if not token:
        raise ValueError(f"{field}.token_env: variable {statuses.token_env} is not set")
    return token


def _attempted(
    status: Wanted, recorded: Recorded | None, answer: forges.Answer, now: datetime
) -> dict[str, Any]:
    """The columns an attempt changes."""
    if answer.outcome is Outcome.POSTED:
        return {
            "state": status.state,
            "description": status.description,
            "target_url": status.target_url,
            "posted_at": now,
            "failures": 0,
            "retry_at": None,
            "error": None,
        }
    if answer.outcome is Outcome.RATE_LIMITED:
        # Not a failure of the status: the forge names the time to try again.
        return {"retry_at": answer.retry_at, "error": answer.error}
    failures = (recorded.failures if recorded is not None else 0) + 1
    wait = REFUSED_WAIT if answer.outcome is Outcome.REFUSED else retry_delay(failures)
    return {"failures": failures, "retry_at": now + wait, "error": answer.error}


async def _post_for(
    units: Units,
    http: httpx.AsyncClient,
    plane: ControlPlane,
    index: int,
    settings: HubSettings,
    clock: Clock,
) -> Counter[str]:
    outcomes: Counter[str] = Counter()
    url = plane.normalised_url
    try:
        token = _token(plane, index)
    except ValueError as exc:
        log.error("commit statuses not set: no token", repository=url, error=str(exc))
        outcomes["no_token"] += 1
        return outcomes
    async with units() as session:
        answers = await repository.promoted_answers(session, plane.platform_url)
        order = [
            placed.name
            for placed in await placement_repository.environments(session)
            if placed.position is not None
        ]
        wanted = wanted_statuses(
            [answer for answer in answers if _COMMIT.match(answer.promoted_sha)],
            order,
            public_url=event_source(settings),
            soak=settings.gate_answers_soak,
        )
        recorded = {
            (item.sha, item.context): item
            for item in await repository.recorded(session, url, [item.sha for item in wanted])
        }
    now = clock()
    due = [
        status for status in wanted if _due(status, recorded.get((status.sha, status.context)), now)
    ]
    for position, status in enumerate(due):
        before = recorded.get((status.sha, status.context))
        answer = await forges.post_status(
            http,
            forge=plane.forge,
            api_url=plane.statuses.api_url,
            project=plane.project,
            sha=status.sha,
            token=token,
            status=status.body,
            now=clock(),
        )
        values = _attempted(status, before, answer, clock())
        held = answer.outcome is Outcome.RATE_LIMITED or (
            answer.outcome is Outcome.REFUSED and answer.status_code in _REPOSITORY_WIDE
        )
        rest = due[position + 1 :] if held else []
        async with units() as session:
            key = {"repository": url, "sha": status.sha, "context": status.context}
            await repository.record(session, key | values)
            for other in rest:
                hold = {"retry_at": values["retry_at"], "error": answer.error}
                await repository.record(
                    session, {"repository": url, "sha": other.sha, "context": other.context} | hold
                )
        outcomes[answer.outcome.value] += 1
        _log(url, status, answer, values)
        if held:
            outcomes["held"] += len(rest)
            break
    return outcomes


def _log(url: str, status: Wanted, answer: forges.Answer, values: dict[str, Any]) -> None:
    where = {"repository": url, "sha": status.sha, "context": status.context}
    if answer.outcome is Outcome.POSTED:
        log.info("commit status set", state=status.state, **where)
    elif answer.outcome is Outcome.REFUSED:
        log.error(
            "the commit status was refused: check the token (its access to the repository) "
            "and the repository's URL",
            status=answer.status_code,
            error=answer.error,
            retry_at=values["retry_at"].isoformat(),
            **where,
        )
    else:
        log.warning(
            "commit status not set; tried again later",
            outcome=answer.outcome.value,
            status=answer.status_code,
            error=answer.error,
            retry_at=values["retry_at"].isoformat(),
            **where,
        )


async def post_statuses(units: Units, settings: HubSettings, clock: Clock) -> Counter[str]:
    """A round: the statuses that changed posted for every control plane of the repositories
    file; attempts by outcome (posted, rate_limited, unavailable, refused), statuses held
    behind a rate limit or a refusal of the whole repository, control planes without token."""
    outcomes: Counter[str] = Counter()
    if settings.repositories_file is None:
        return outcomes
    configured = load_repositories_file(settings.repositories_file)
    async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as http:
        for index, plane in enumerate(configured.control_planes):
            outcomes += await _post_for(units, http, plane, index, settings, clock)
    return outcomes


@dataclass(frozen=True, slots=True)
class StatusCounts:
    """Statuses kept by the state last posted, and those whose change waits after a failed or
    rate-limited attempt."""

    by_state: dict[str, int]
    waiting: int


async def status_counts(session: AsyncSession) -> StatusCounts:
    return StatusCounts(*await repository.counts(session))
