"""The promotion gate's answers: facts for a target gathered from the store, judged by the
pure policy (hub/gate/policy.py), returned with their evidence.

Data flow: target -> the sources its objects follow -> the store judges every expected cluster
by the policy's table (hub/gate/repository.py) -> the policy concludes -> the wire answer.
"""

import heapq
import itertools
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.operations import asked
from hub.client.schemas.gate import GateOptions as AskedOptions
from hub.client.schemas.gate import GateQuery, PromotableQuery
from hub.errors import FleetmarkError, InvalidInput, UnknownWorkload
from hub.events.service import Event, event_source, page_url, publish
from hub.gate import repository
from hub.gate.policy import (
    REASONS_NAMED,
    ClusterState,
    GateDecision,
    GateOptions,
    PlatformCommit,
    Target,
    Verdict,
    WorkloadVersion,
    conclude,
    evaluate,
)
from hub.gate.repository import (
    Branch,
    Judgement,
    ManifestRange,
    Memberships,
    Narrowing,
    Scope,
    Source,
    WorkloadAssignment,
)
from hub.gate.schemas import (
    DecisionCounts,
    Freshness,
    GateAssignment,
    GateCluster,
    GateClusterPage,
    GateCounts,
    GateEventData,
    GateOptionsOut,
    GateResult,
    GateTarget,
    HarvestedBranch,
    Promotable,
    PromotionDecision,
)
from hub.git.urls import spelled_repository
from hub.placement import repository as placement_repository
from hub.placement import service as placement_service
from hub.settings import HubSettings
from hub.sorting import OWN_ORDER, Order
from hub.suspects import service as suspects_service
from hub.text import format_time, short_sha
from scheduler_core.kube import parse_selector

__all__ = [
    "COLUMNS",
    "AnswerOptions",
    "UnknownCommit",
    "UnknownVersion",
    "decision",
    "environment_names",
    "evidence_url",
    "keep_answers",
    "newest_commits",
    "newest_versions",
    "promotable",
    "promotion_gate",
    "source_spellings",
]

# The columns a gate sorts its listed clusters by.
COLUMNS = tuple(repository.CLUSTER_SORTS)
_COMMIT = re.compile(r"[0-9a-fA-F]{7,64}")


class UnknownCommit(FleetmarkError):
    """Not (yet) on the harvested platform branch: it may appear with the next harvest."""

    status_code = 404
    error = "unknown_commit"


class UnknownVersion(FleetmarkError):
    """No harvested manifests carry the version (yet): it may appear with the next harvest."""

    status_code = 404
    error = "unknown_version"


def _options(asked: AskedOptions, stale_after: timedelta) -> GateOptions:
    try:
        return GateOptions(
            soak=asked.soak,
            stale_after=stale_after,
            allow_stale=asked.allow_stale,
            min_clusters=asked.min_clusters,
            min_converged_ratio=asked.min_converged_ratio,
            max_time_to_converge=asked.max_time_to_converge,
        )
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def _narrowing(asked: AskedOptions) -> Narrowing:
    try:
        return Narrowing(tuple(asked.cluster_types or ()), parse_selector(asked.selector or ""))
    except ValueError as exc:
        raise InvalidInput(f"selector: {exc}") from None


# --- facts ------------------------------------------------------------------------------------


def _spellings(reported: Iterable[str], url: str) -> list[str]:
    """Those of the URL spellings agents reported that name the repository `url`
    (normalised)."""
    return [spelling for spelling in reported if spelled_repository(spelling) == url]


def _harvested(branch: Branch) -> HarvestedBranch:
    return HarvestedBranch(
        repository=branch.repository_url,
        branch=branch.name,
        head_sha=branch.head_sha,
        harvested_at=branch.harvested_at,
    )


def _seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else delta.total_seconds()


@dataclass(frozen=True, slots=True)
class ClusterPage:
    """Which expected clusters an answer lists with their evidence, in `order` (ties, and no
    column, furthest from compliance first); the counts always cover them all."""

    limit: int
    offset: int
    order: Order

    @classmethod
    def of(cls, asked: AskedOptions, order: Order) -> "ClusterPage":
        return cls(limit=asked.limit, offset=asked.offset, order=order)


async def _judge(
    session: AsyncSession,
    target: Target,
    scope: Scope,
    sources: Sequence[Source],
    placements: Sequence[tuple[str | None, int | None]],
    narrowing: Narrowing,
    options: GateOptions,
    now: datetime,
    page: ClusterPage,
) -> tuple[GateDecision, Judgement]:
    """The store judges every expected cluster; the policy explains the listed ones (those
    the reasons name, and the page's) and concludes."""
    judgement = await repository.judge(
        session,
        scope=scope,
        sources=sources,
        placements=placements,
        narrowing=narrowing,
        options=options,
        now=now,
        leading=REASONS_NAMED,
        order=page.order,
        limit=page.limit,
        offset=page.offset,
    )
    listed = [evaluate(item.facts, target, options, now) for item in judgement.listed]
    committed_at = None
    if options.max_time_to_converge is not None:
        committed_at = await repository.rollout_committed_at(
            session, target
        ) or await repository.harvested_committed_at(session, sources)
    decision = conclude(target, judgement.tally, listed, options, now, committed_at=committed_at)
    return decision, judgement


def _result(
    decision: GateDecision,
    judgement: Judgement,
    target: GateTarget,
    options: GateOptions,
    harvested: list[HarvestedBranch],
    page: ClusterPage,
) -> GateResult:
    placed = [
        (item.position, item, evidence)
        for item, evidence in zip(judgement.listed, decision.clusters, strict=True)
        if item.position is not None
    ]
    on_page = [(item, evidence) for _, item, evidence in sorted(placed, key=lambda p: p[0])]
    return GateResult(
        target=target,
        verdict=decision.verdict,
        reasons=list(decision.reasons),
        evaluated_at=decision.evaluated_at,
        earliest_pass_at=decision.earliest_pass_at,
        reports_needed=list(decision.reports_needed),
        reports_needed_count=decision.reports_needed_count,
        options=GateOptionsOut(
            soak_seconds=options.soak.total_seconds(),
            stale_after_seconds=options.stale_after.total_seconds(),
            allow_stale=options.allow_stale,
            min_clusters=options.min_clusters,
            min_converged_ratio=options.min_converged_ratio,
            max_time_to_converge_seconds=_seconds(options.max_time_to_converge),
        ),
        counts=GateCounts(
            expected=decision.expected,
            reporting=decision.reporting,
            stale=decision.stale,
            never_reported=decision.never_reported,
            compliant=decision.compliant,
            by_state=dict(decision.by_state),
        ),
        freshness=Freshness(oldest_report_at=decision.oldest_report_at, harvested=harvested),
        clusters=GateClusterPage(
            items=[
                GateCluster(
                    name=evidence.name,
                    cluster_type=evidence.cluster_type,
                    state=evidence.state,
                    explanation=evidence.explanation,
                    object=item.object,
                    last_seen_at=evidence.last_seen_at,
                    applied_revision=evidence.applied_revision,
                    attempted_revision=evidence.attempted_revision,
                    ready=evidence.ready,
                    ready_since=evidence.ready_since,
                    soak_ends_at=evidence.soak_ends_at,
                    soak_remaining_seconds=_seconds(evidence.soak_remaining),
                    reason=evidence.reason,
                    message=evidence.message,
                )
                for item, evidence in on_page
            ],
            total=decision.expected,
            limit=page.limit,
            offset=page.offset,
        ),
    )


async def _scope(session: AsyncSession, name: str) -> Scope:
    found = await repository.scope(session, name)
    if found is None:
        raise await placement_service.unknown_environment(session, name)
    return found


# --- platform commits -------------------------------------------------------------------------


def _platform_source(branch: Branch, urls: list[str], sha: str, starts: Memberships) -> Source:
    """The environment branch's objects, any path; a commit contains the target when the
    target is that commit or one of its ancestors (hub/git/ancestry.py): when it stands
    at or after the target on a branch the target stands on."""
    return Source(
        urls=urls,
        branch=branch.name,
        path=None,
        repository_id=branch.repository_id,
        chain=None,
        starts=starts,
        sha=sha,
    )


async def _judge_commit(
    session: AsyncSession,
    environment: str,
    scope: Scope,
    branch: Branch,
    urls: list[str],
    sha: str,
    starts: Memberships,
    narrowing: Narrowing,
    options: GateOptions,
    now: datetime,
    page: ClusterPage,
) -> GateResult:
    target = PlatformCommit(environment=environment, sha=sha)
    source = _platform_source(branch, urls, sha, starts)
    decision, judgement = await _judge(
        session, target, scope, [source], [(None, 0)], narrowing, options, now, page
    )
    wire_target = GateTarget(
        kind="platform_commit",
        environment=environment,
        description=str(target),
        repository=branch.repository_url,
        branch=branch.name,
        commit=sha,
    )
    return _result(decision, judgement, wire_target, options, [_harvested(branch)], page)


def _where(branches: Iterable[Branch]) -> str:
    return "; ".join(
        f"branch {branch.name} of {branch.repository_url} is harvested up to "
        f"{short_sha(branch.head_sha or 'nothing')}"
        + ("" if branch.harvested_at is None else f" at {format_time(branch.harvested_at)}")
        for branch in branches
    )


async def _find_commit(
    session: AsyncSession, environment: str, branches: list[Branch], commit: str
) -> tuple[Branch, str, Memberships]:
    if not _COMMIT.fullmatch(commit):
        raise InvalidInput(f"commit: expected 7 to 64 hexadecimal digits, got {commit!r}")
    if not branches:
        raise UnknownCommit(
            f"commit {commit}: no platform repository branch of environment {environment!r} "
            "has been harvested"
        )
    hits = await repository.branch_commits(session, [branch.id for branch in branches], commit)
    shas = sorted({sha for _, sha, _ in hits})
    if not shas:
        raise UnknownCommit(
            f"commit {commit} is not on the platform branch of {environment} ({_where(branches)})"
        )
    if len(shas) > 1:
        shown = ", ".join(short_sha(sha) for sha in shas[:5])
        raise InvalidInput(f"commit: {commit} is ambiguous; it begins {shown}")
    by_id = {branch.id: branch for branch in branches}
    branch_id, sha, starts = hits[0]
    return by_id[branch_id], sha, starts


async def _newest(
    session: AsyncSession, branches: Sequence[Branch], count: int
) -> list[tuple[str, int, Memberships]]:
    """The newest `count` commits of the branches' first-parent chains, newest first: each
    branch's chain in its own order, several branches by commit time; (sha, branch id, where
    it stands)."""
    chains = []
    for branch in branches:
        chain = await repository.recent_chain(session, branch.id, count)
        chains.append(
            [(committed_at, sha, branch.id, starts) for sha, committed_at, starts in chain]
        )
    walk = heapq.merge(*chains, key=lambda step: step[0], reverse=True)
    return [(sha, branch_id, starts) for _, sha, branch_id, starts in itertools.islice(walk, count)]


async def environment_names(session: AsyncSession) -> list[str]:
    """Every environment the hub knows, in promotion order."""
    return await placement_repository.environment_names(session)


async def source_spellings(session: AsyncSession) -> list[str]:
    """Every repository URL, as reported, that a live object or its Flux source names."""
    return await repository.source_spellings(session)


async def newest_commits(session: AsyncSession, environment: str, count: int) -> list[str]:
    """The newest `count` platform commits of the environment's branch, newest first: those
    `promotable` examines first."""
    scope = await _scope(session, environment)
    return [sha for sha, _, _ in await _newest(session, scope.branches, count)]


async def _platform_commit_gate(
    session: AsyncSession,
    *,
    environment: str,
    commit: str,
    narrowing: Narrowing,
    options: GateOptions,
    now: datetime,
    page: ClusterPage,
) -> GateResult:
    """The gate for a platform commit (full sha or an unambiguous prefix) in `environment`."""
    scope = await _scope(session, environment)
    branch, sha, starts = await _find_commit(session, environment, scope.branches, commit.lower())
    urls = _spellings(scope.spellings, branch.repository_url)
    return await _judge_commit(
        session,
        environment,
        scope,
        branch,
        urls,
        sha,
        starts,
        narrowing,
        options,
        now,
        page,
    )


async def promotable(
    session: AsyncSession,
    environment: str,
    query: PromotableQuery,
    *,
    now: datetime,
    stale_after: timedelta,
    order: Order = OWN_ORDER,
    halting: Collection[str] = (),
) -> Promotable:
    """The newest platform commit of the environment's branch whose gate passes, walking back
    its first-parent chain at most `max_commits` commits, over the expected clusters of the
    cluster types named (none: every one) that the selector selects; a halted commit does not
    pass (`_halted`), and the answer names the halts it walked past."""
    options = _options(query, stale_after)
    narrowing = _narrowing(query)
    page = ClusterPage.of(query, order)
    scope = await _scope(session, environment)
    branches = scope.branches
    if not branches:
        return Promotable(
            environment=environment,
            commit=None,
            examined=0,
            reason=f"no platform repository branch of {environment} has been harvested",
            gate=None,
        )
    by_id = {branch.id: branch for branch in branches}
    urls = {branch.id: _spellings(scope.spellings, branch.repository_url) for branch in branches}
    examined, halts = 0, []
    for sha, branch_id, starts in await _newest(session, branches, query.max_commits):
        examined += 1
        judged = await _judge_commit(
            session,
            environment,
            scope,
            by_id[branch_id],
            urls[branch_id],
            sha,
            starts,
            narrowing,
            options,
            now,
            page,
        )
        result = await _halted(session, judged, halting)
        if result.halt is not None:
            halts.append(result.halt.reason)
        if result.verdict is Verdict.PASSED:
            return Promotable(
                environment=environment,
                commit=sha,
                examined=examined,
                reason=f"{short_sha(sha)} is the newest platform commit of {environment} that "
                f"passes ({examined} examined)" + _walked_past(halts),
                gate=result,
            )
    return Promotable(
        environment=environment,
        commit=None,
        examined=examined,
        reason=f"none of the newest {examined} platform commits of {environment} passes"
        + _walked_past(halts),
        gate=None,
    )


def _walked_past(halts: Sequence[str]) -> str:
    """The halts of the commits `promotable` skipped, for its reason."""
    return "".join(f"; {reason}" for reason in halts)


# --- workload versions ------------------------------------------------------------------------


# An app source: (repository URL, branch, path).
_AppSource = tuple[str, str, str]


def _app_source(assignment: WorkloadAssignment) -> _AppSource | None:
    if assignment.app_url is None or assignment.app_branch is None:
        return None
    return assignment.app_url, assignment.app_branch, assignment.app_path or ""


def _introduced(ranges: Iterable[ManifestRange], version: str) -> int | None:
    """Where on the app branch's first-parent chain the path first carried `version`."""
    return min((item.from_position for item in ranges if item.version == version), default=None)


def _current(ranges: Iterable[ManifestRange]) -> str | None:
    return next((item.version for item in ranges if item.until_position is None), None)


def _version_source(
    assignment: WorkloadAssignment, urls: list[str], ranges: list[ManifestRange], version: str
) -> Source:
    """The assignment's app folder; a commit contains the version when it lies on the app
    branch's first-parent chain at or after the first commit that carried it (so a newer
    version counts, as a descendant commit does), and attempted it when it carries it."""
    assert assignment.app_repository_id is not None
    assert assignment.app_branch is not None
    branch = assignment.app_branch_id
    introduced = _introduced(ranges, version)
    return Source(
        urls=urls,
        branch=assignment.app_branch,
        path=assignment.app_path or "",
        repository_id=assignment.app_repository_id,
        chain=[] if branch is None else [branch],
        starts=[] if branch is None or introduced is None else [(branch, introduced)],
        carries=[]
        if branch is None
        else [
            (branch, item.from_position, item.until_position)
            for item in ranges
            if item.version == version
        ],
    )


def _wire_assignment(assignment: WorkloadAssignment) -> GateAssignment:
    return GateAssignment(
        cluster_type=assignment.cluster_type,
        deployment_target=assignment.deployment_target,
        repository=assignment.app_url,
        branch=assignment.app_branch,
        path=assignment.app_path,
    )


async def _workload_version_gate(
    session: AsyncSession,
    *,
    environment: str,
    workload: str,
    version: str,
    narrowing: Narrowing,
    options: GateOptions,
    now: datetime,
    page: ClusterPage,
) -> GateResult:
    """The gate for a workload version in `environment`, over the cluster types that carry
    the workload's assignments."""
    scope = await _scope(session, environment)
    branches = scope.branches
    assignments = await repository.workload_assignments(
        session, [branch.id for branch in branches], workload
    )
    if not assignments:
        await placement_service.check_names(session, workload=workload)
        raise UnknownWorkload(
            f"workload {workload!r} has no assignment in {environment}"
            + (f" ({_where(branches)})" if branches else "")
        )
    sharing: dict[_AppSource, WorkloadAssignment] = {}
    for assignment in assignments:
        source = _app_source(assignment)
        if source is not None:
            sharing.setdefault(source, assignment)
    ranges = {source: assignment.ranges for source, assignment in sharing.items()}
    if not any(_introduced(found, version) is not None for found in ranges.values()):
        carried = ", ".join(
            f"{path or '(root)'} on {branch} carries {_current(found) or 'no version'}"
            for (_, branch, path), found in ranges.items()
        )
        raise UnknownVersion(
            f"no harvested manifests of {workload} in {environment} carry version {version!r}"
            + (f" (now: {carried})" if carried else "")
        )

    index = {source: position for position, source in enumerate(sharing)}
    sources = [
        _version_source(
            assignment, _spellings(scope.spellings, url), ranges[(url, branch, path)], version
        )
        for (url, branch, path), assignment in sharing.items()
    ]
    placements = []
    for assignment in assignments:
        source = _app_source(assignment)
        placements.append((assignment.cluster_type, None if source is None else index[source]))
    target = WorkloadVersion(environment=environment, workload=workload, version=version)
    decision, judgement = await _judge(
        session,
        target,
        scope,
        sources,
        placements,
        narrowing,
        options,
        now,
        page,
    )
    harvested = {(branch.repository_url, branch.name): _harvested(branch) for branch in branches}
    for assignment in assignments:
        if assignment.app_url is not None and assignment.app_branch is not None:
            harvested[(assignment.app_url, assignment.app_branch)] = HarvestedBranch(
                repository=assignment.app_url,
                branch=assignment.app_branch,
                head_sha=assignment.app_head_sha,
                harvested_at=assignment.app_harvested_at,
            )
    wire_target = GateTarget(
        kind="workload_version",
        environment=environment,
        description=str(target),
        workload=workload,
        version=version,
        assignments=[_wire_assignment(item) for item in assignments],
    )
    return _result(decision, judgement, wire_target, options, list(harvested.values()), page)


async def newest_versions(
    session: AsyncSession, environment: str, workload: str, count: int
) -> list[str]:
    """The newest `count` versions the workload's app paths carried in the environment (those
    its assignments follow at the head of the platform branch), newest first: by where on its
    app branch each version first appeared."""
    scope = await _scope(session, environment)
    assignments = await repository.workload_assignments(
        session, [branch.id for branch in scope.branches], workload
    )
    introduced: dict[str, int] = {}
    for assignment in assignments:
        for item in assignment.ranges:
            if item.version is not None:
                introduced[item.version] = min(
                    introduced.get(item.version, item.from_position), item.from_position
                )
    newest = sorted(introduced, key=lambda version: (-introduced[version], version))
    return newest[:count]


# --- entry points -----------------------------------------------------------------------------


async def promotion_gate(
    session: AsyncSession,
    query: GateQuery,
    *,
    now: datetime,
    stale_after: timedelta,
    order: Order = OWN_ORDER,
    halting: Collection[str] = (),
) -> GateResult:
    """The gate for a platform commit, or for a workload version, in the query's environment,
    over the expected clusters of the cluster types named (none: every one) that the selector
    (a label selector as kubectl's `-l` reads it) selects; the query's limit and offset, in
    `order`, pick the clusters listed with their evidence; a halt of an environment in
    `halting` fails it (`_halted`)."""
    options = _options(query, stale_after)
    narrowing = _narrowing(query)
    page = ClusterPage.of(query, order)
    environment, commit, workload, version = (
        query.environment,
        query.commit,
        query.workload,
        query.version,
    )
    for cluster_type in query.cluster_types or ():
        await placement_service.check_names(
            session, environment=environment, cluster_type=cluster_type
        )
    if commit is not None and workload is None and version is None:
        result = await _platform_commit_gate(
            session,
            environment=environment,
            commit=commit,
            narrowing=narrowing,
            options=options,
            now=now,
            page=page,
        )
        return await _halted(session, result, halting)
    if commit is None and workload is not None and version is not None:
        result = await _workload_version_gate(
            session,
            environment=environment,
            workload=workload,
            version=version,
            narrowing=narrowing,
            options=options,
            now=now,
            page=page,
        )
        return await _halted(session, result, halting)
    raise InvalidInput("commit, or workload and version: give one of the two, and only one")


async def _halted(
    session: AsyncSession, result: GateResult, halting: Collection[str]
) -> GateResult:
    """The first rule, before the clusters': a halt of the target's promotion out of the
    environment fails the gate, with the halt as its reason (docs/suspects.md)."""
    target = result.target
    options = result.options.model_copy(
        update={"halt_on_regression": target.environment in halting}
    )
    revision = target.commit if target.workload is None else target.version
    assert revision is not None
    halt = await suspects_service.halt_for(
        session,
        environment=target.environment,
        workload=target.workload,
        revision=revision,
        halting=halting,
    )
    if halt is None:
        return result.model_copy(update={"options": options})
    return result.model_copy(
        update={
            "options": options,
            "verdict": Verdict.FAILED,
            "reasons": [halt.reason, *result.reasons],
            "earliest_pass_at": None,
            "halt": halt,
        }
    )


def _reason(result: GateResult) -> str:
    """What decides the verdict, in one sentence: the halt, or the counts, then the first of
    the reasons."""
    counts, target = result.counts, result.target
    first = result.reasons[0]
    if result.verdict is Verdict.PASSED or not counts.expected or result.halt is not None:
        return first
    where = f"expected cluster(s) in {target.environment}"
    if result.verdict is Verdict.FAILED:
        failed = counts.by_state[ClusterState.FAILED]
        return f"{failed} of {counts.expected} {where} failed on {target.description}; {first}"
    return (
        f"{counts.compliant} of {counts.expected} {where} run {target.description}, Ready and "
        f"soaked; {first}"
    )


# The built-in page (docs/pages.md) that shows a gate's evidence, asked as the API is.
GATE_PAGE = "/gate"


def evidence_url(public_url: str, query: GateQuery) -> str:
    """The gate page for the same question: the query's parameters that are not defaults."""
    return page_url(
        public_url, GATE_PAGE, asked(GateQuery, **query.model_dump(exclude_defaults=True))
    )


def _decision_counts(counts: GateCounts) -> DecisionCounts:
    return DecisionCounts(
        expected=counts.expected,
        compliant=counts.compliant,
        failed=counts.by_state[ClusterState.FAILED],
        reporting=counts.reporting,
        stale=counts.stale,
        never_reported=counts.never_reported,
    )


def decision(result: GateResult, evidence_url: str) -> PromotionDecision:
    """The gate's answer as a promotion engine reads it (fleetmark.gate.decision/v1)."""
    return PromotionDecision(
        allowed=result.verdict is Verdict.PASSED,
        verdict=result.verdict,
        reason=_reason(result),
        opens_at=result.earliest_pass_at if result.verdict is Verdict.PENDING else None,
        evidence_url=evidence_url,
        counts=_decision_counts(result.counts),
    )


# --- the answers kept for dashboards and alert rules ------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerOptions:
    """The gate options the kept answers are judged with, how many of the newest commits (and
    of each workload's versions) each environment keeps answers for, and the hub's URL the
    events of changed verdicts name (their source, and their evidence's)."""

    soak: timedelta
    stale_after: timedelta
    newest: int
    source: str
    halting: Sequence[str] = ()

    @classmethod
    def of(cls, settings: HubSettings) -> "AnswerOptions":
        return cls(
            soak=settings.gate_answers_soak,
            stale_after=settings.stale_after,
            newest=settings.gate_answers_newest,
            source=event_source(settings),
            halting=settings.halt_on_regression,
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


def _gate_event(
    result: GateResult,
    previous: str | None,
    options: AnswerOptions,
    now: datetime,
    cluster_types: Sequence[str],
) -> Event | None:
    """fleetmark.gate.<verdict> when the verdict changed from the kept one. A target judged for
    the first time is announced unless pending: a new commit or version starts pending, and
    only what it comes to is news. It concerns `cluster_types`, the environment's."""
    verdict = result.verdict
    if verdict.value == previous or (previous is None and verdict is Verdict.PENDING):
        return None
    target = result.target
    if target.workload is None:
        subject = f"gates/{target.environment}/{target.commit}"
        query = GateQuery(environment=target.environment, commit=target.commit, soak=options.soak)
    else:
        subject = f"gates/{target.environment}/{target.workload}/{target.version}"
        query = GateQuery(
            environment=target.environment,
            workload=target.workload,
            version=target.version,
            soak=options.soak,
        )
    data = GateEventData(
        environment=target.environment,
        target=target,
        verdict=verdict,
        previous_verdict=Verdict(previous) if previous is not None else None,
        reasons=result.reasons,
        counts=_decision_counts(result.counts),
        evidence_url=evidence_url(options.source, query),
    )
    return Event(
        type=f"fleetmark.gate.{verdict.value}",
        subject=subject,
        time=now,
        data=data.model_dump(mode="json"),
        environment=target.environment,
        workload=target.workload,
        cluster_types=cluster_types,
    )


async def keep_answers(session: AsyncSession, options: AnswerOptions, *, now: datetime) -> int:
    """Judge the newest commits and versions of every environment and keep the answers, with
    an event for each verdict that changed; the caller commits. Returns how many answers are
    kept.

    Environments in promotion order -> per environment, the newest `newest` commits of its
    platform branch and the newest `newest` versions of each workload there -> each judged by
    `promotion_gate` -> the verdicts, counts and blocking clusters, replacing the kept answers
    at once, and fleetmark.gate.* events where a verdict differs from the kept one.
    """

    async def gate(
        environment: str, commit: str | None, workload: str | None, version: str | None
    ) -> GateResult:
        query = GateQuery(
            environment=environment,
            commit=commit,
            workload=workload,
            version=version,
            soak=options.soak,
            limit=REASONS_NAMED,
        )
        return await promotion_gate(
            session, query, now=now, stale_after=options.stale_after, halting=options.halting
        )

    kept = await repository.kept_verdicts(session)
    answers, events = [], []

    def judged(result: GateResult, answer: dict[str, Any], cluster_types: list[str]) -> None:
        answers.append(answer)
        previous = kept.get((answer["environment"], answer["workload"], answer["revision"]))
        event = _gate_event(result, previous, options, now, cluster_types)
        if event is not None:
            events.append(event)

    for environment, _, position in await placement_repository.environments(session):
        cluster_types = await placement_repository.cluster_type_names(session, environment)
        commits = await newest_commits(session, environment, options.newest)
        for newest, sha in enumerate(commits, start=1):
            result = await gate(environment, sha, None, None)
            judged(result, _answer(result, position, None, sha, newest), cluster_types)
        for workload in await repository.assigned_workloads(session, environment):
            versions = await newest_versions(session, environment, workload, options.newest)
            for newest, version in enumerate(versions, start=1):
                result = await gate(environment, None, workload, version)
                judged(result, _answer(result, position, workload, version, newest), cluster_types)
    await repository.replace_answers(session, answers)
    await publish(session, events, source=options.source)
    return len(answers)
