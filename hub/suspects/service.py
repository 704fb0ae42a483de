"""Suspects and halts: what the clusters of an environment applied in a period and when they
turned not Ready, gathered from the store and judged by the pure policy (hub/suspects/policy.py);
the halts that the halts job keeps from those judgements; what to roll back to.

Data flow: environment -> its scopes (the platform branch, each assigned workload) -> their
members' transitions, read at once (hub/suspects/repository.py) -> per scope, who applied what,
when, and who regressed -> counted and judged -> the wire answer. The halts job runs the same
for the environments in FLEETMARK_HALT_ON_REGRESSION and keeps the suspects as halts, with their
events.
"""

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.suspects import (
    Halt,
    KnownGood,
    Recommendations,
    Suspect,
    SuspectCluster,
    SuspectCounts,
    SuspectReason,
    SuspectsAnswer,
    SuspectsQuery,
    SuspectsVerdict,
    SuspectVerdict,
)
from hub.client.text import format_duration
from hub.errors import HaltEnded, InvalidInput, UnknownHalt
from hub.events.service import Event, Held, held, hold, page_url, publish, release
from hub.gate import repository as gate_repository
from hub.models import RolloutHalt
from hub.placement import repository as placement_repository
from hub.placement import service as placement_service
from hub.suspects import repository
from hub.suspects.policy import (
    Judged,
    Regression,
    ScopeFacts,
    Target,
    Verdict,
    count,
    judge,
)
from hub.suspects.schemas import HaltEventData, SuspectEventData

__all__ = [
    "DEFAULT_PERIOD",
    "HaltOptions",
    "KeptHalts",
    "clear_halt",
    "halt_for",
    "keep_halts",
    "recommendations",
    "suspects",
]

# The period GET /api/v1/suspects looks at unless asked, and the halts job always: long enough
# for a wave of a rollout, short enough that an old incident no longer counts.
DEFAULT_PERIOD = timedelta(hours=2)
# The kind of the states (hub.events) the halts job holds: a suspect announced, by
# "<environment>/<workload or ''>/<revision>", while it is in the job's period.
SUSPECT_ANNOUNCED = "suspect_found"


def _kind(workload: str | None) -> str:
    return "platform_commit" if workload is None else "workload_version"


async def _facts(
    session: AsyncSession,
    environment: str,
    workloads: Sequence[str | None],
    since: datetime,
    until: datetime,
    window: timedelta,
) -> list[ScopeFacts]:
    """Per scope, who applied what in [since, until), and when each turned not Ready until
    `until` + W: a report Ready false after one that was not (or none). A cluster's first
    report says what it ran and whether it was Ready when it came, not that it changed: the
    objects it brings neither apply nor regress by it (one that comes later, as a new
    assignment does, does). A scope without such a report has nothing to judge."""
    rows = await repository.transitions(session, environment, workloads, since, until + window)
    commits = {
        (row.branch_id, row.path or "", sha)
        for row in rows
        if row.workload is not None
        for sha in (row.applied_sha, row.attempted_sha, row.previous_sha)
        if sha is not None
    }
    carried = await repository.versions(session, sorted(commits))

    def revision(row: repository.Transition, sha: str | None) -> str | None:
        if sha is None or row.workload is None:
            return sha
        return carried.get((row.branch_id, row.path or "", sha))

    clusters: dict[str | None, int] = {}
    applied: dict[str | None, dict[str, dict[str, datetime]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    regressions: dict[str | None, dict[str, list[Regression]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in rows:
        clusters[row.workload] = row.scope_clusters
        before = revision(row, row.previous_sha)
        if row.observed_at < until:
            for changed in (revision(row, row.applied_sha), revision(row, row.attempted_sha)):
                if changed is not None and changed != before:
                    applied[row.workload][changed].setdefault(row.cluster, row.observed_at)
        was_ready = row.previous_ready is not False or row.previous_removed
        if row.ready is False and not row.removed and was_ready:
            regressions[row.workload][row.cluster].append(Regression(row.observed_at, row.reason))
    return [
        ScopeFacts(
            environment=environment,
            workload=workload,
            clusters=clusters[workload],
            regressions=regressions[workload],
            applied=applied[workload],
        )
        for workload in workloads
        if workload in clusters
    ]


def _wire(judged: Judged) -> Suspect:
    counted, counts = judged.counted, judged.counted.counts
    target = counted.target
    return Suspect(
        environment=target.environment,
        kind=_kind(target.workload),
        workload=target.workload,
        revision=target.revision,
        description=str(target),
        verdict=SuspectVerdict(judged.verdict.value),
        score=judged.score,
        p_value=judged.p_value,
        explanation=judged.explanation,
        counts=SuspectCounts(
            exposed=counts.exposed,
            exposed_regressed=counts.exposed_regressed,
            control=counts.control,
            control_regressed=counts.control_regressed,
        ),
        reasons=[SuspectReason(reason=reason, clusters=n) for reason, n in judged.reasons],
        clusters=[
            SuspectCluster(
                cluster=item.cluster,
                applied_at=item.applied_at,
                regressed_at=item.regressed_at,
                reason=item.reason,
            )
            for item in counted.regressed
        ],
        first_applied_at=counted.first_applied_at,
        last_applied_at=counted.last_applied_at,
    )


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: SuspectsVerdict
    judged: list[Judged]


async def _judge(
    session: AsyncSession,
    environment: str,
    workloads: Sequence[str | None],
    since: datetime,
    until: datetime,
    window: timedelta,
    min_regressions: int,
) -> Judgement:
    counted = [
        count(facts, revision, window)
        for facts in await _facts(session, environment, workloads, since, until, window)
        for revision in sorted(facts.applied)
    ]
    try:
        verdict, judged = judge(counted, min_regressions=min_regressions, window=window)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return Judgement(SuspectsVerdict(verdict.value), judged)


async def suspects(
    session: AsyncSession,
    query: SuspectsQuery,
    *,
    now: datetime,
    window: timedelta,
    min_regressions: int,
) -> SuspectsAnswer:
    """The changes applied in the environment in the period, ranked (`window` and
    `min_regressions`: the settings, unless the query names its own)."""
    until = query.until or now
    since = query.since or until - DEFAULT_PERIOD
    if since >= until:
        raise InvalidInput(
            f"since: must be before until ({until.isoformat()}), got {since.isoformat()}"
        )
    window = query.window if query.window is not None else window
    if window <= timedelta(0):
        raise InvalidInput(f"window: must be positive, got {format_duration(window)}")
    min_regressions = query.min_regressions or min_regressions
    await placement_service.check_names(
        session, environment=query.environment, workload=query.workload
    )
    workloads: list[str | None] = (
        [query.workload]
        if query.workload is not None
        else [None, *await gate_repository.assigned_workloads(session, query.environment)]
    )
    found = await _judge(
        session, query.environment, workloads, since, until, window, min_regressions
    )
    return SuspectsAnswer(
        environment=query.environment,
        since=since,
        until=until,
        window_seconds=window.total_seconds(),
        min_regressions=min_regressions,
        verdict=found.verdict,
        items=[_wire(item) for item in found.judged],
    )


# --- halts ------------------------------------------------------------------------------------


def _reason(environment: str, workload: str | None, evidence: Suspect) -> str:
    target = evidence.description
    later = " and every later environment" if workload is not None else ""
    return (
        f"halted: {target} is a suspect in {environment} ({evidence.explanation}); it may not "
        f"leave {environment}{later} until a newer one supersedes it or an admin clears the halt"
    )


def _halt(row: RolloutHalt) -> Halt:
    evidence = Suspect.model_validate(row.evidence)
    return Halt(
        id=row.id,
        environment=row.environment,
        kind=_kind(row.workload),
        workload=row.workload,
        revision=row.revision,
        description=evidence.description,
        reason=_reason(row.environment, row.workload, evidence),
        started_at=row.started_at,
        ended_at=row.ended_at,
        ended_how=row.ended_how,
        superseded_by=row.superseded_by,
        cleared_by=row.cleared_by,
        clear_reason=row.clear_reason,
        evidence=evidence,
    )


async def halt_for(
    session: AsyncSession,
    *,
    environment: str,
    workload: str | None,
    revision: str,
    halting: Collection[str],
) -> Halt | None:
    """The halt that fails the gate for this target's promotion out of `environment`: one of
    the target in that environment or, for a workload version, in an earlier one; only halts of
    environments that halt (`halting`) count."""
    if not halting:
        return None
    positions = {
        item.name: (item.position if item.position is not None else 1 << 30, item.name)
        for item in await placement_repository.environments(session)
    }
    here = positions.get(environment)
    for row in await repository.halts(session, active=True):
        if row.environment not in halting or row.workload != workload or row.revision != revision:
            continue
        there = positions.get(row.environment)
        if row.environment == environment or (
            workload is not None and here is not None and there is not None and there < here
        ):
            return _halt(row)
    return None


async def clear_halt(
    session: AsyncSession, halt_id: int, *, by: str, reason: str, now: datetime, source: str
) -> Halt:
    """An admin ends the halt; the caller commits. Its target is not halted again."""
    row = await repository.halt(session, halt_id)
    if row is None:
        raise UnknownHalt(f"no halt has id {halt_id}")
    if row.ended_at is not None:
        raise HaltEnded(
            f"halt {halt_id} ended already ({row.ended_how} at {row.ended_at.isoformat()})"
        )
    await repository.end(
        session,
        halt_id,
        {"ended_at": now, "ended_how": "cleared", "cleared_by": by, "clear_reason": reason},
    )
    await session.refresh(row)
    halt = _halt(row)
    await publish(session, [await _halt_event(session, halt, now, source)], source=source)
    return halt


async def recommendations(
    session: AsyncSession, *, now: datetime, soak: timedelta, halting: Collection[str]
) -> Recommendations:
    """The halts that hold (those of environments in `halting`), and per environment and
    workload the last known good commit or version: the newest rollout that converged at
    least `soak` ago and is not halted."""
    halts = [
        _halt(row)
        for row in await repository.halts(session, active=True)
        if row.environment in halting
    ]
    halted = {(halt.environment, halt.workload, halt.revision) for halt in halts}
    newest: dict[tuple[str, str | None], KnownGood] = {}
    for row in await repository.last_converged(session, before=now - soak):
        scope = (row.environment, row.workload)
        if scope in newest or (row.environment, row.workload, row.revision) in halted:
            continue
        assert row.converged_at is not None
        newest[scope] = KnownGood(
            environment=row.environment,
            kind=_kind(row.workload),
            workload=row.workload,
            revision=row.revision,
            commit_sha=row.commit_sha,
            converged_at=row.converged_at,
        )
    good = list(newest.values())
    return Recommendations(halts=halts, known_good=good)


# --- the halts job ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HaltOptions:
    halting: Sequence[str]
    window: timedelta
    min_regressions: int
    source: str


@dataclass(frozen=True, slots=True)
class KeptHalts:
    started: int
    ended: int
    events: int


def _evidence_url(source: str, environment: str, workload: str | None) -> str:
    return page_url(source, "/api/v1/suspects", {"environment": environment, "workload": workload})


def _subject(environment: str, workload: str | None, revision: str) -> str:
    return (
        f"{environment}/{revision}" if workload is None else f"{environment}/{workload}/{revision}"
    )


async def _halt_event(session: AsyncSession, halt: Halt, now: datetime, source: str) -> Event:
    ended = halt.ended_at is not None
    data = HaltEventData(
        environment=halt.environment,
        workload=halt.workload,
        revision=halt.revision,
        halt_id=halt.id,
        reason=halt.reason,
        ended_how=halt.ended_how,
        superseded_by=halt.superseded_by,
        cleared_by=halt.cleared_by,
        clear_reason=halt.clear_reason,
        evidence=halt.evidence,
        evidence_url=_evidence_url(source, halt.environment, halt.workload),
    )
    return Event(
        type="fleetmark.rollout.unhalted" if ended else "fleetmark.rollout.halted",
        subject=f"rollouts/{_subject(halt.environment, halt.workload, halt.revision)}",
        time=halt.ended_at if halt.ended_at is not None else halt.started_at,
        data=data.model_dump(mode="json"),
        environment=halt.environment,
        workload=halt.workload,
        cluster_types=await placement_repository.cluster_type_names(session, halt.environment),
    )


def _newer(
    halt: RolloutHalt,
    applied: dict[tuple[str | None, str], datetime],
    committed: dict[str, datetime],
) -> str | None:
    """The newest revision of the halt's scope applied since the halt began that was made after
    the halted one (for a version: first applied after it), if any."""
    made = committed.get(halt.revision)
    newer = [
        (at, revision)
        for (workload, revision), at in applied.items()
        if workload == halt.workload
        and revision != halt.revision
        and at > halt.started_at
        and (
            halt.workload is not None
            or (made is not None and revision in committed and committed[revision] > made)
        )
    ]
    return max(newer)[1] if newer else None


async def keep_halts(session: AsyncSession, options: HaltOptions, *, now: datetime) -> KeptHalts:
    """Judge the suspects of every halting environment over the last DEFAULT_PERIOD: halt each
    clear suspect not halted before, end the halts a newer change superseded, and publish
    fleetmark.suspect.found once per suspect (or inconclusive change) and
    fleetmark.rollout.halted / .unhalted; the caller commits."""
    since = now - DEFAULT_PERIOD
    known = await repository.known(session)
    announced = await held(session, SUSPECT_ANNOUNCED)
    active = await repository.halts(session, active=True)
    events: list[Event] = []
    new_halts: list[dict[str, Any]] = []
    announce: dict[str, Held] = {}
    in_period: set[str] = set()
    ended = 0
    for environment in options.halting:
        if environment not in await placement_repository.environment_names(session):
            continue
        workloads: list[str | None] = [
            None,
            *await gate_repository.assigned_workloads(session, environment),
        ]
        starts = [halt.started_at for halt in active if halt.environment == environment]
        found = await _judge(
            session,
            environment,
            workloads,
            min([since, *starts]),
            now,
            options.window,
            options.min_regressions,
        )
        applied = {
            (
                item.counted.target.workload,
                item.counted.target.revision,
            ): item.counted.last_applied_at
            for item in found.judged
        }
        for item in found.judged:
            target = item.counted.target
            if item.counted.last_applied_at < since:
                continue
            key = f"{environment}/{target.workload or ''}/{target.revision}"
            in_period.add(key)
            if item.verdict is not Verdict.NOT_SUSPECT and key not in announced:
                announce[key] = Held(now, announced=True)
                events.append(_suspect_event(item, now, options.source))
            if (
                item.verdict is Verdict.SUSPECT
                and (environment, target.workload, target.revision) not in known
            ):
                new_halts.append(
                    {
                        "environment": environment,
                        "workload": target.workload,
                        "revision": target.revision,
                        "started_at": now,
                        "evidence": _wire(item).model_dump(mode="json"),
                    }
                )
        platform = [revision for workload, revision in applied if workload is None]
        committed = await repository.committed(
            session, platform + [h.revision for h in active if h.workload is None]
        )
        for row in active:
            if row.environment != environment:
                continue
            newer = _newer(row, applied, committed)
            if newer is None:
                continue
            await repository.end(
                session,
                row.id,
                {"ended_at": now, "ended_how": "superseded", "superseded_by": newer},
            )
            await session.refresh(row)
            events.append(await _halt_event(session, _halt(row), now, options.source))
            ended += 1
    started = await repository.start(session, new_halts)
    for row in started:
        events.append(await _halt_event(session, _halt(row), now, options.source))
    await hold(session, SUSPECT_ANNOUNCED, announce)
    await release(session, SUSPECT_ANNOUNCED, [key for key in announced if key not in in_period])
    await publish(session, events, source=options.source)
    return KeptHalts(len(started), ended, len(events))


def _suspect_event(judged: Judged, now: datetime, source: str) -> Event:
    target: Target = judged.counted.target
    data = SuspectEventData(
        suspect=_wire(judged),
        evidence_url=_evidence_url(source, target.environment, target.workload),
    )
    return Event(
        type="fleetmark.suspect.found",
        subject=f"suspects/{_subject(target.environment, target.workload, target.revision)}",
        time=now,
        data=data.model_dump(mode="json"),
        environment=target.environment,
        workload=target.workload,
    )
