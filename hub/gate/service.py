"""The promotion gate's answers: facts for a target gathered from the store, judged by the
pure policy (hub/gate/policy.py), returned with their evidence.

Data flow: environment + platform commit (or workload + version) -> the target found on the
environment's harvested platform branch -> the expected clusters -> per cluster, the
reconciler objects that follow the target's source -> each compared with the target ->
`decide` -> the wire answer (hub/gate/schemas.py).

What this module settles before the policy judges:

- Expected clusters: the registered, not decommissioned clusters of the environment. For a
  workload version, only those placed in a cluster type that one of the workload's current
  assignments (at the head of the environment's platform branch) names; a cluster placed in
  no cluster type cannot be matched to an assignment and is not expected.
- The objects judged: for a platform commit, every live object of the cluster that follows
  the platform repository (URLs compared normalised) on the environment's branch, whatever
  its path: the root Kustomization or Application. For a workload version, every object that
  follows an assignment's app repository, branch and path. Flux source objects
  (GitRepository, ...) fetch and never apply, so they are not judged. A cluster with several
  such objects is judged by the one furthest from compliance (in the order of the policy's
  rules, then the latest soak end); a cluster with none has applied nothing.
- A platform commit is contained in the applied commit when that is the commit or one of its
  descendants (hub/harvest/ancestry.py), unknown when the applied commit is on no harvested
  first-parent chain. The target was attempted when the attempted commit is the target.
- A workload version V is contained in the applied app-repo commit when that commit lies on
  the first-parent chain of the assignment's app branch at or after the first commit at which
  the assignment's path carried V: the commit that introduced V or a descendant, as for
  platform commits. So a cluster that moved on to a newer version counts, and so would one
  whose branch went back to an older version afterwards, as a revert commit does for a
  platform commit. Unknown when the applied commit is not on that harvested chain. V was
  attempted when the attempted commit's manifests at that path carry V itself.
"""

import heapq
import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from hub.errors import FleetmarkError, InvalidInput
from hub.gate import repository
from hub.gate.policy import (
    ClusterFacts,
    ClusterState,
    GateDecision,
    GateOptions,
    PlatformCommit,
    Target,
    Verdict,
    WorkloadVersion,
    decide,
)
from hub.gate.repository import (
    Branch,
    ExpectedCluster,
    ManifestRange,
    TrackedObject,
    WorkloadAssignment,
)
from hub.gate.schemas import (
    Freshness,
    GateAssignment,
    GateCluster,
    GateClusterPage,
    GateCounts,
    GateOptionsOut,
    GateResult,
    GateTarget,
    HarvestedBranch,
    Promotable,
)
from hub.harvest import repository as harvest_repository
from hub.harvest.platform import normalise_path
from hub.harvest.urls import spelled_repository

__all__ = [
    "DEFAULT_SOAK",
    "MAX_PROMOTABLE_COMMITS",
    "ClusterPage",
    "UnknownCommit",
    "UnknownEnvironment",
    "UnknownVersion",
    "UnknownWorkload",
    "promotable",
    "promotion_gate",
]

DEFAULT_SOAK = timedelta(minutes=10)
# How far back `promotable` walks the environment branch at most.
MAX_PROMOTABLE_COMMITS = 500
_COMMIT = re.compile(r"[0-9a-fA-F]{7,64}")
# The policy's rules in order: the first is the furthest from compliance.
_SEVERITY = {state: rank for rank, state in enumerate(ClusterState)}


class UnknownEnvironment(FleetmarkError):
    status_code = 404
    error = "unknown_environment"


class UnknownCommit(FleetmarkError):
    """Not (yet) on the harvested platform branch: it may appear with the next harvest."""

    status_code = 404
    error = "unknown_commit"


class UnknownWorkload(FleetmarkError):
    status_code = 404
    error = "unknown_workload"


class UnknownVersion(FleetmarkError):
    """No harvested manifests carry the version (yet): it may appear with the next harvest."""

    status_code = 404
    error = "unknown_version"


def _options(
    *, soak: timedelta, stale_after: timedelta, allow_stale: bool, min_clusters: int
) -> GateOptions:
    try:
        return GateOptions(
            soak=soak, stale_after=stale_after, allow_stale=allow_stale, min_clusters=min_clusters
        )
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


# --- facts ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Candidate:
    """What a cluster could be judged by: one of its objects (or none), compared to the target."""

    facts: ClusterFacts
    object: TrackedObject | None


def _nothing(cluster: ExpectedCluster) -> _Candidate:
    return _Candidate(
        ClusterFacts(
            name=cluster.name, cluster_type=cluster.cluster_type, last_seen_at=cluster.last_seen_at
        ),
        None,
    )


def _candidate(
    cluster: ExpectedCluster, item: TrackedObject, contains: bool | None, attempted: bool
) -> _Candidate:
    return _Candidate(
        ClusterFacts(
            name=cluster.name,
            cluster_type=cluster.cluster_type,
            last_seen_at=cluster.last_seen_at,
            applied_revision=item.applied_revision,
            contains_target=contains,
            applied_since=item.applied_since,
            attempted_revision=item.attempted_revision,
            attempted_target=attempted,
            ready=item.ready,
            ready_since=item.ready_since if item.ready else None,
            reason=item.reason,
            message=item.message,
        ),
        item,
    )


def _no_commit(item: TrackedObject) -> bool | None:
    """Whether an object whose applied revision names no commit contains the target: not when
    it applied nothing; unknown when its revision (a chart version, an OCI digest) cannot be
    placed in the git history."""
    return None if item.applied_revision else False


def _furthest(
    target: Target, candidates: Sequence[_Candidate], options: GateOptions, now: datetime
) -> _Candidate:
    if len(candidates) == 1:
        return candidates[0]

    def distance(candidate: _Candidate) -> tuple[int, float]:
        [evidence] = decide(target, [candidate.facts], options, now).clusters
        soak_ends_at = evidence.soak_ends_at or now
        return _SEVERITY[evidence.state], -soak_ends_at.timestamp()

    return min(candidates, key=distance)


async def _objects_following(
    session: AsyncSession,
    environment: int,
    cluster_types: Sequence[str] | None,
    url: str,
    branch: str,
    path: str | None,
) -> dict[int, list[TrackedObject]]:
    """Per expected cluster id (of the environment, or of those cluster types), its live
    objects that follow `url` on `branch` (and `path`, if given)."""
    spellings = [
        spelling
        for spelling in await repository.source_spellings(session)
        if spelled_repository(spelling) == url
    ]
    found: dict[int, list[TrackedObject]] = {}
    for item in await repository.tracking_objects(
        session, environment, cluster_types, branch, spellings
    ):
        if path is None or normalise_path(item.source_path) == path:
            found.setdefault(item.cluster_id, []).append(item)
    return found


def _object_name(item: TrackedObject | None) -> str | None:
    if item is None:
        return None
    return f"{item.reconciler}/{item.kind}/{item.namespace}/{item.name}"


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
    """Which expected clusters an answer lists with their evidence, furthest from compliance
    first; the counts always cover them all."""

    limit: int = 100
    offset: int = 0


def _result(
    decision: GateDecision,
    target: GateTarget,
    options: GateOptions,
    judged: Sequence[_Candidate],
    harvested: list[HarvestedBranch],
    page: ClusterPage,
) -> GateResult:
    objects = {candidate.facts.name: candidate.object for candidate in judged}
    # decide() lists them by name, and the sort is stable.
    ordered = sorted(decision.clusters, key=lambda item: _SEVERITY[item.state])
    by_state = Counter(item.state for item in decision.clusters)
    return GateResult(
        target=target,
        verdict=decision.verdict,
        reasons=list(decision.reasons),
        evaluated_at=decision.evaluated_at,
        earliest_pass_at=decision.earliest_pass_at,
        options=GateOptionsOut(
            soak_seconds=options.soak.total_seconds(),
            stale_after_seconds=options.stale_after.total_seconds(),
            allow_stale=options.allow_stale,
            min_clusters=options.min_clusters,
        ),
        counts=GateCounts(
            expected=decision.expected,
            reporting=decision.reporting,
            stale=decision.stale,
            never_reported=decision.never_reported,
            compliant=decision.compliant,
            by_state={state: by_state[state] for state in ClusterState},
        ),
        freshness=Freshness(oldest_report_at=decision.oldest_report_at, harvested=harvested),
        clusters=GateClusterPage(
            items=[
                GateCluster(
                    name=item.name,
                    cluster_type=item.cluster_type,
                    state=item.state,
                    explanation=item.explanation,
                    object=_object_name(objects[item.name]),
                    last_seen_at=item.last_seen_at,
                    applied_revision=item.applied_revision,
                    attempted_revision=item.attempted_revision,
                    ready=item.ready,
                    ready_since=item.ready_since,
                    soak_ends_at=item.soak_ends_at,
                    soak_remaining_seconds=_seconds(item.soak_remaining),
                    reason=item.reason,
                    message=item.message,
                )
                for item in ordered[page.offset : page.offset + page.limit]
            ],
            total=len(ordered),
            limit=page.limit,
            offset=page.offset,
        ),
    )


async def _environment(session: AsyncSession, name: str) -> int:
    found = await repository.environment_id(session, name)
    if found is None:
        known = ", ".join(await repository.environment_names(session)) or "none yet"
        raise UnknownEnvironment(f"environment {name!r} is unknown (known: {known})")
    return found


# --- platform commits -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PlatformScope:
    """The observed state a platform commit of one branch is judged on."""

    environment: str
    branch: Branch
    clusters: list[ExpectedCluster]
    objects: dict[int, list[TrackedObject]]


class _Ancestry:
    """Commit ancestry in one platform repository, each question asked of the store once."""

    def __init__(self, session: AsyncSession, repository_id: int) -> None:
        self._session = session
        self._repository_id = repository_id
        self._known: dict[tuple[str, str], bool | None] = {}

    async def contains(self, target: str, applied: Iterable[str]) -> dict[str, bool | None]:
        """Per applied sha: whether the target is that commit or one of its ancestors."""
        applied = set(applied)
        unknown = [sha for sha in applied if (target, sha) not in self._known]
        if unknown:
            answers = await harvest_repository.contained_in(
                self._session, self._repository_id, target, unknown
            )
            self._known.update(((target, sha), answer) for sha, answer in answers.items())
        return {sha: self._known[(target, sha)] for sha in applied}


async def _platform_scope(
    session: AsyncSession,
    environment: str,
    environment_id: int,
    branch: Branch,
    clusters: list[ExpectedCluster],
) -> _PlatformScope:
    objects = await _objects_following(
        session, environment_id, None, branch.repository_url, branch.name, path=None
    )
    return _PlatformScope(environment, branch, clusters, objects)


async def _judge_commit(
    scope: _PlatformScope,
    sha: str,
    ancestry: _Ancestry,
    options: GateOptions,
    now: datetime,
    page: ClusterPage,
) -> GateResult:
    target = PlatformCommit(environment=scope.environment, sha=sha)
    contained = await ancestry.contains(
        sha,
        (
            item.applied_sha
            for items in scope.objects.values()
            for item in items
            if item.applied_sha
        ),
    )
    judged = []
    for cluster in scope.clusters:
        candidates = []
        for item in scope.objects.get(cluster.id, []):
            contains = _no_commit(item) if item.applied_sha is None else contained[item.applied_sha]
            candidates.append(_candidate(cluster, item, contains, item.attempted_sha == sha))
        judged.append(_furthest(target, candidates or [_nothing(cluster)], options, now))
    decision = decide(target, [candidate.facts for candidate in judged], options, now)
    wire_target = GateTarget(
        kind="platform_commit",
        environment=scope.environment,
        description=str(target),
        repository=scope.branch.repository_url,
        branch=scope.branch.name,
        commit=sha,
    )
    return _result(decision, wire_target, options, judged, [_harvested(scope.branch)], page)


def _where(branches: Iterable[Branch]) -> str:
    return "; ".join(
        f"branch {branch.name} of {branch.repository_url} is harvested up to "
        f"{(branch.head_sha or 'nothing')[:12]}"
        + ("" if branch.harvested_at is None else f" at {branch.harvested_at.isoformat()}")
        for branch in branches
    )


async def _find_commit(
    session: AsyncSession, environment: str, branches: list[Branch], commit: str
) -> tuple[Branch, str]:
    if not _COMMIT.fullmatch(commit):
        raise InvalidInput(f"commit: expected 7 to 64 hexadecimal digits, got {commit!r}")
    if not branches:
        raise UnknownCommit(
            f"commit {commit}: no platform repository branch of environment {environment!r} "
            "has been harvested"
        )
    hits = await repository.branch_commits(session, [branch.id for branch in branches], commit)
    shas = sorted({sha for _, sha in hits})
    if not shas:
        raise UnknownCommit(
            f"commit {commit} is not on the platform branch of {environment} ({_where(branches)})"
        )
    if len(shas) > 1:
        shown = ", ".join(sha[:12] for sha in shas[:5])
        raise InvalidInput(f"commit: {commit} is ambiguous; it begins {shown}")
    by_id = {branch.id: branch for branch in branches}
    return by_id[hits[0][0]], shas[0]


async def _platform_commit_gate(
    session: AsyncSession,
    *,
    environment: str,
    commit: str,
    options: GateOptions,
    now: datetime,
    page: ClusterPage,
) -> GateResult:
    """The gate for a platform commit (full sha or an unambiguous prefix) in `environment`."""
    environment_id = await _environment(session, environment)
    branches = await repository.platform_branches(session, environment_id)
    branch, sha = await _find_commit(session, environment, branches, commit.lower())
    clusters = await repository.expected_clusters(session, environment_id)
    scope = await _platform_scope(session, environment, environment_id, branch, clusters)
    ancestry = _Ancestry(session, branch.repository_id)
    return await _judge_commit(scope, sha, ancestry, options, now, page)


async def promotable(
    session: AsyncSession,
    *,
    environment: str,
    soak: timedelta,
    stale_after: timedelta,
    allow_stale: bool,
    min_clusters: int,
    max_commits: int,
    now: datetime,
    page: ClusterPage = ClusterPage(),
) -> Promotable:
    """The newest platform commit of the environment's branch whose gate passes, walking back
    its first-parent chain at most `max_commits` commits."""
    options = _options(
        soak=soak, stale_after=stale_after, allow_stale=allow_stale, min_clusters=min_clusters
    )
    environment_id = await _environment(session, environment)
    branches = await repository.platform_branches(session, environment_id)
    if not branches:
        return Promotable(
            environment=environment,
            commit=None,
            examined=0,
            reason=f"no platform repository branch of {environment} has been harvested",
            gate=None,
        )
    clusters = await repository.expected_clusters(session, environment_id)
    scopes = {
        branch.id: await _platform_scope(session, environment, environment_id, branch, clusters)
        for branch in branches
    }
    ancestries = {branch.id: _Ancestry(session, branch.repository_id) for branch in branches}
    # Newest first: each branch's chain in its own order, several branches by commit time.
    chains = []
    for branch in branches:
        chain = await repository.recent_chain(session, branch.id, max_commits)
        chains.append([(committed_at, sha, branch.id) for sha, committed_at in chain])
    walk = heapq.merge(*chains, key=lambda step: step[0], reverse=True)
    examined = 0
    for _, sha, branch_id in itertools.islice(walk, max_commits):
        examined += 1
        result = await _judge_commit(
            scopes[branch_id], sha, ancestries[branch_id], options, now, page
        )
        if result.verdict is Verdict.PASSED:
            return Promotable(
                environment=environment,
                commit=sha,
                examined=examined,
                reason=f"{sha[:12]} is the newest platform commit of {environment} that passes "
                f"({examined} examined)",
                gate=result,
            )
    return Promotable(
        environment=environment,
        commit=None,
        examined=examined,
        reason=f"none of the newest {examined} platform commits of {environment} passes",
        gate=None,
    )


# --- workload versions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _VersionHistory:
    """The versions an app-repo path carried along its branch's first-parent chain, and where
    on that chain the commits clusters applied or attempted lie."""

    ranges: list[ManifestRange]
    positions: dict[str, int]

    def introduced(self, version: str) -> int | None:
        return min(
            (item.from_position for item in self.ranges if item.version == version), default=None
        )

    def current(self) -> str | None:
        return next((item.version for item in self.ranges if item.until_position is None), None)

    def contains(self, sha: str, version: str) -> bool | None:
        position = self.positions.get(sha)
        if position is None:
            return None
        introduced = self.introduced(version)
        return introduced is not None and introduced <= position

    def carries(self, sha: str, version: str) -> bool:
        position = self.positions.get(sha)
        return position is not None and any(
            item.version == version
            and item.from_position <= position
            and (item.until_position is None or position < item.until_position)
            for item in self.ranges
        )


# An app source: (repository URL, branch, path).
_Source = tuple[str, str, str]


def _source(assignment: WorkloadAssignment) -> _Source | None:
    if assignment.app_url is None or assignment.app_branch is None:
        return None
    return assignment.app_url, assignment.app_branch, assignment.app_path or ""


async def _version_history(
    session: AsyncSession, assignment: WorkloadAssignment, objects: Iterable[TrackedObject]
) -> _VersionHistory:
    if assignment.app_branch_id is None:
        return _VersionHistory([], {})
    shas = sorted(
        {sha for item in objects for sha in (item.applied_sha, item.attempted_sha) if sha}
    )
    return _VersionHistory(
        await repository.manifest_ranges(
            session, assignment.app_branch_id, assignment.app_path or ""
        ),
        await repository.chain_positions(session, assignment.app_branch_id, shas),
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
    options: GateOptions,
    now: datetime,
    page: ClusterPage,
) -> GateResult:
    """The gate for a workload version in `environment`, over the cluster types that carry
    the workload's assignments."""
    environment_id = await _environment(session, environment)
    branches = await repository.platform_branches(session, environment_id)
    assignments = await repository.workload_assignments(
        session, [branch.id for branch in branches], workload
    )
    if not assignments:
        raise UnknownWorkload(
            f"workload {workload!r} has no assignment in {environment}"
            + (f" ({_where(branches)})" if branches else "")
        )
    clusters = await repository.expected_clusters(
        session, environment_id, sorted({item.cluster_type for item in assignments})
    )
    by_source: dict[_Source, list[WorkloadAssignment]] = {}
    for assignment in assignments:
        source = _source(assignment)
        if source is not None:
            by_source.setdefault(source, []).append(assignment)
    objects: dict[_Source, dict[int, list[TrackedObject]]] = {}
    histories: dict[_Source, _VersionHistory] = {}
    for source, sharing in by_source.items():
        types = {item.cluster_type for item in sharing}
        url, branch, path = source
        objects[source] = await _objects_following(
            session, environment_id, sorted(types), url, branch, path
        )
        found = [item for items in objects[source].values() for item in items]
        histories[source] = await _version_history(session, sharing[0], found)

    if not any(history.introduced(version) is not None for history in histories.values()):
        carried = ", ".join(
            f"{path or '(root)'} on {branch} carries {history.current() or 'no version'}"
            for (_, branch, path), history in histories.items()
        )
        raise UnknownVersion(
            f"no harvested manifests of {workload} in {environment} carry version {version!r}"
            + (f" (now: {carried})" if carried else "")
        )

    target = WorkloadVersion(environment=environment, workload=workload, version=version)
    judged = []
    for cluster in clusters:
        candidates = []
        for assignment in assignments:
            if assignment.cluster_type != cluster.cluster_type:
                continue
            source = _source(assignment)
            found = [] if source is None else objects[source].get(cluster.id, [])
            if source is None or not found:
                candidates.append(_nothing(cluster))
                continue
            history = histories[source]
            for item in found:
                contains = (
                    _no_commit(item)
                    if item.applied_sha is None
                    else history.contains(item.applied_sha, version)
                )
                attempted = item.attempted_sha is not None and history.carries(
                    item.attempted_sha, version
                )
                candidates.append(_candidate(cluster, item, contains, attempted))
        judged.append(_furthest(target, candidates, options, now))
    decision = decide(target, [candidate.facts for candidate in judged], options, now)
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
    return _result(decision, wire_target, options, judged, list(harvested.values()), page)


# --- entry points -----------------------------------------------------------------------------


async def promotion_gate(
    session: AsyncSession,
    *,
    environment: str,
    commit: str | None,
    workload: str | None,
    version: str | None,
    soak: timedelta,
    stale_after: timedelta,
    allow_stale: bool,
    min_clusters: int,
    now: datetime,
    page: ClusterPage = ClusterPage(),
) -> GateResult:
    """The gate for a platform commit, or for a workload version, in `environment`; `page`
    picks the clusters listed with their evidence."""
    options = _options(
        soak=soak, stale_after=stale_after, allow_stale=allow_stale, min_clusters=min_clusters
    )
    if commit is not None and workload is None and version is None:
        return await _platform_commit_gate(
            session, environment=environment, commit=commit, options=options, now=now, page=page
        )
    if commit is None and workload is not None and version is not None:
        return await _workload_version_gate(
            session,
            environment=environment,
            workload=workload,
            version=version,
            options=options,
            now=now,
            page=page,
        )
    raise InvalidInput("commit, or workload and version: give one of the two, and only one")
