"""The promotion gate's decision: may a platform commit (or a workload version) leave an
environment for the next one?

Pure: the gate service gathers the facts from the store and hands them over with `now`; this
module decides and explains. The rules are in docs/concepts.md ("The promotion gate").
"""

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from hub.client.text import format_duration
from hub.revisions import UNKNOWN_FORM, parse_revision
from hub.text import format_time, short_sha

__all__ = [
    "MAX_SOAK",
    "REASONS_NAMED",
    "ClusterEvidence",
    "ClusterFacts",
    "ClusterState",
    "GateDecision",
    "GateOptions",
    "PlatformCommit",
    "Standing",
    "Tally",
    "Target",
    "Verdict",
    "WorkloadVersion",
    "conclude",
    "decide",
    "evaluate",
    "rule",
]

# Reasons name at most this many clusters, those furthest from compliance; a last line counts
# the others.
REASONS_NAMED = 20
# The longest soak asked for: far beyond any real one, and well within what the arithmetic on
# report times can hold.
MAX_SOAK = timedelta(days=365)


@dataclass(frozen=True, slots=True)
class PlatformCommit:
    """A commit of the platform GitOps repository, on the environment's branch."""

    environment: str
    sha: str

    def __str__(self) -> str:
        return f"platform commit {short_sha(self.sha)}"


@dataclass(frozen=True, slots=True)
class WorkloadVersion:
    """A workload version, as the harvester reads it from the application GitOps repo."""

    environment: str
    workload: str
    version: str

    def __str__(self) -> str:
        return f"{self.workload} {self.version}"


Target = PlatformCommit | WorkloadVersion


class Verdict(StrEnum):
    PASSED = "passed"
    PENDING = "pending"
    FAILED = "failed"


class ClusterState(StrEnum):
    """Where one expected cluster stands; docs/concepts.md gives the rules."""

    FAILED = "failed"
    NEVER_REPORTED = "never_reported"
    STALE = "stale"
    UNKNOWN_REVISION = "unknown_revision"
    NOT_APPLIED = "not_applied"
    NOT_READY = "not_ready"
    SOAKING = "soaking"
    COMPLIANT = "compliant"


@dataclass(frozen=True, slots=True, kw_only=True)
class GateOptions:
    soak: timedelta
    stale_after: timedelta
    allow_stale: bool = False
    min_clusters: int = 1
    # Passed once this share of the expected clusters is compliant (none failed); None: all.
    min_converged_ratio: float | None = None
    # Failed once this long after the target's commit time fewer clusters than it requires
    # run it Ready; None: no deadline.
    max_time_to_converge: timedelta | None = None

    def __post_init__(self) -> None:
        if self.soak < timedelta(0):
            raise ValueError(f"soak: must not be negative, got {self.soak}")
        if self.soak > MAX_SOAK:
            raise ValueError(f"soak: must be at most {MAX_SOAK.days} days, got {self.soak}")
        if self.stale_after <= timedelta(0):
            raise ValueError(f"stale_after: must be positive, got {self.stale_after}")
        if self.min_clusters < 1:
            raise ValueError(f"min_clusters: must be at least 1, got {self.min_clusters}")
        ratio = self.min_converged_ratio
        if ratio is not None and not 0 < ratio <= 1:
            raise ValueError(f"min_converged_ratio: must be above 0 and at most 1, got {ratio}")
        deadline = self.max_time_to_converge
        if deadline is not None and deadline <= timedelta(0):
            raise ValueError(f"max_time_to_converge: must be positive, got {deadline}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterFacts:
    """What the store knows about one expected cluster, for one target.

    One row per cluster: for a platform commit, its reconciler object that tracks the
    platform repository's environment branch; for a workload version, the object of the
    assignment. The fact gatherer resolves the two comparisons against the target
    (`contains_target`, `attempted_target`) so the policy never parses revisions.
    """

    name: str
    cluster_type: str | None
    # Hub time of the cluster's newest report; None: it never reported.
    last_seen_at: datetime | None
    applied_revision: str | None = None
    # The applied commit is the target or one of its descendants (for a workload version:
    # carries that version, or descends from the commit that introduced it); None: the store
    # cannot tell, because the applied commit is not in the harvested history.
    contains_target: bool | None = False
    # The applied commit was harvested, then rewritten away: no branch holds it any more.
    applied_rewritten: bool = False
    # Since when the cluster has applied, without a break, the target or commits that contain
    # it. The store looks no further back than the current Ready period, and not at all when
    # what it runs now has run for the soak already: the cluster is soaked either way, and its
    # stretch is counted from what it runs now.
    contains_since: datetime | None = None
    attempted_revision: str | None = None
    # The last attempted revision is the target itself.
    attempted_target: bool = False
    ready: bool | None = None
    # Start of the current continuous Ready period.
    ready_since: datetime | None = None
    reason: str | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if self.ready is True and self.ready_since is None:
            raise ValueError(f"cluster {self.name!r}: ready_since is required when ready is True")
        if self.contains_target is True and self.contains_since is None:
            raise ValueError(
                f"cluster {self.name!r}: contains_since is required when contains_target is True"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterEvidence:
    name: str
    cluster_type: str | None
    state: ClusterState
    # One line: why the cluster is in that state.
    explanation: str
    last_seen_at: datetime | None
    applied_revision: str | None
    attempted_revision: str | None
    ready: bool | None
    ready_since: datetime | None
    # When this cluster's soak is (or was) complete; None until it runs the target and is Ready.
    soak_ends_at: datetime | None
    soak_remaining: timedelta | None
    # The reconciler's own words, when it failed or is not ready.
    reason: str | None
    message: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Tally:
    """Every expected cluster summed up, once each has been judged (by `decide`, or by the
    store with `rule`): what the verdict needs beyond the clusters it names."""

    by_state: Mapping[ClusterState, int]
    never_reported: int
    # Reported, but not within stale_after.
    stale: int
    # The oldest newest-report.
    oldest_report_at: datetime | None
    # The latest soak end among soaking and compliant clusters.
    last_soak_end: datetime | None
    # The clusters whose newest report goes stale before last_soak_end, oldest report first
    # (then by name): the first REASONS_NAMED of them, and how many they are.
    silent_before_soak_end: tuple[str, ...]
    silent_before_soak_end_count: int

    @property
    def expected(self) -> int:
        return sum(self.by_state.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class GateDecision:
    target: Target
    verdict: Verdict
    # Why: the failures, or what blocks, or (when passed) what was established; at most
    # REASONS_NAMED clusters by name.
    reasons: tuple[str, ...]
    evaluated_at: datetime
    expected: int
    # Expected clusters with a report no older than stale_after.
    reporting: int
    stale: int
    never_reported: int
    compliant: int
    by_state: Mapping[ClusterState, int]
    # The clusters listed, furthest from compliance first (then by name).
    clusters: tuple[ClusterEvidence, ...]
    earliest_pass_at: datetime | None
    # Without allow_stale, the clusters whose newest report goes stale before earliest_pass_at:
    # the gate opens then only if they report again. The first REASONS_NAMED, and how many.
    reports_needed: tuple[str, ...]
    reports_needed_count: int
    # Data freshness: the oldest newest-report among expected clusters that ever reported.
    oldest_report_at: datetime | None


def _reconciler_words(facts: ClusterFacts) -> str:
    words = ": ".join(part for part in (facts.reason, facts.message) if part)
    return f" ({words})" if words else ""


@dataclass(frozen=True, slots=True)
class Standing:
    """What the rules read of a cluster: its facts, measured against `now` and the options.

    Six values with two or three outcomes each: the rules are a table of 144 rows, which the
    store uses to judge a whole environment without handing every cluster over.
    """

    attempted_target: bool
    ready: bool | None
    reported: bool
    # Silent for longer than stale_after.
    stale: bool
    contains_target: bool | None
    # Ready and running what it runs for at least the soak.
    soaked: bool

    @classmethod
    def of(cls, facts: ClusterFacts, options: GateOptions, now: datetime) -> "Standing":
        soak_ends_at = _soak_end(facts, options)
        return cls(
            attempted_target=facts.attempted_target,
            ready=facts.ready,
            reported=facts.last_seen_at is not None,
            stale=facts.last_seen_at is not None and now - facts.last_seen_at > options.stale_after,
            contains_target=facts.contains_target,
            soaked=soak_ends_at is not None and soak_ends_at <= now,
        )


def rule(standing: Standing, options: GateOptions) -> ClusterState:
    """The state of a cluster of that standing: the rules, first match wins."""
    if standing.attempted_target and standing.ready is False:
        return ClusterState.FAILED
    if not standing.reported:
        return ClusterState.NEVER_REPORTED
    if standing.stale and not options.allow_stale:
        return ClusterState.STALE
    if standing.contains_target is None:
        return ClusterState.UNKNOWN_REVISION
    if not standing.contains_target:
        return ClusterState.NOT_APPLIED
    if standing.ready is not True:
        return ClusterState.NOT_READY
    if not standing.soaked:
        return ClusterState.SOAKING
    return ClusterState.COMPLIANT


# Clusters that need nothing but time to become compliant.
_ON_TRACK = (ClusterState.SOAKING, ClusterState.COMPLIANT)


def _soak_end(facts: ClusterFacts, options: GateOptions) -> datetime | None:
    """When the soak of the target ends: the later of ready_since and contains_since, plus the
    soak; None while it is not Ready."""
    if facts.ready is not True or facts.ready_since is None or facts.contains_since is None:
        return None
    return max(facts.ready_since, facts.contains_since) + options.soak


def _explanation(
    state: ClusterState, facts: ClusterFacts, target: Target, options: GateOptions, now: datetime
) -> str:
    """Why the cluster is in `state`, in one line."""
    match state:
        case ClusterState.FAILED:
            return f"reconciling {target} failed{_reconciler_words(facts)}"
        case ClusterState.NEVER_REPORTED:
            return "registered, but its agent never reported"
        case ClusterState.STALE:
            assert facts.last_seen_at is not None
            return (
                f"no report for {format_duration(now - facts.last_seen_at)} "
                f"(stale after {format_duration(options.stale_after)})"
            )
        case ClusterState.UNKNOWN_REVISION if not parse_revision(facts.applied_revision).known:
            return f"applied {facts.applied_revision!r}, which {UNKNOWN_FORM}"
        case ClusterState.UNKNOWN_REVISION:
            return f"applied {facts.applied_revision}, which is not in the harvested history yet"
        case ClusterState.NOT_APPLIED if facts.applied_revision is None:
            return "has applied nothing yet"
        case ClusterState.NOT_APPLIED if facts.applied_rewritten:
            return (
                f"applied {facts.applied_revision}, which was rewritten away (a force-push left "
                f"no branch holding it) and does not contain {target}"
            )
        case ClusterState.NOT_APPLIED:
            return f"applied {facts.applied_revision}, which does not contain {target}"
        case ClusterState.NOT_READY:
            readiness = "not Ready" if facts.ready is False else "readiness unknown"
            return f"runs {target}, {readiness}{_reconciler_words(facts)}"
        case ClusterState.SOAKING:
            soak_ends_at = _soak_end(facts, options)
            assert soak_ends_at is not None
            return f"runs {target}, Ready; soak ends in {format_duration(soak_ends_at - now)}"
        case ClusterState.COMPLIANT:
            return f"runs {target}, Ready and soaked"


def evaluate(
    facts: ClusterFacts, target: Target, options: GateOptions, now: datetime
) -> ClusterEvidence:
    """Where one expected cluster stands, and why."""
    standing = Standing.of(facts, options, now)
    state = rule(standing, options)
    explanation = _explanation(state, facts, target, options, now)
    if standing.stale and state is not ClusterState.STALE and state is not ClusterState.FAILED:
        assert facts.last_seen_at is not None
        explanation += (
            f"; judged on its last report, {format_duration(now - facts.last_seen_at)} old"
        )
    soak_ends_at = _soak_end(facts, options) if state in _ON_TRACK else None
    return ClusterEvidence(
        name=facts.name,
        cluster_type=facts.cluster_type,
        state=state,
        explanation=explanation,
        last_seen_at=facts.last_seen_at,
        applied_revision=facts.applied_revision,
        attempted_revision=facts.attempted_revision,
        ready=facts.ready,
        ready_since=facts.ready_since,
        soak_ends_at=soak_ends_at,
        soak_remaining=None if soak_ends_at is None else max(soak_ends_at - now, timedelta(0)),
        reason=facts.reason,
        message=facts.message,
    )


def _listing_order(evidence: ClusterEvidence) -> tuple[int, str]:
    """Furthest from compliance first (in the order of the rules), then by name."""
    return _SEVERITY[evidence.state], evidence.name


_SEVERITY = {state: rank for rank, state in enumerate(ClusterState)}


def decide(
    target: Target,
    clusters: Iterable[ClusterFacts],
    options: GateOptions,
    now: datetime,
    *,
    committed_at: datetime | None = None,
) -> GateDecision:
    """The gate's verdict for `target` over the expected `clusters`, at `now`; `committed_at`
    is the target's commit time, which max_time_to_converge counts from (None: unknown, so no
    deadline)."""
    if now.tzinfo is None:
        raise ValueError("now: must be timezone-aware")
    facts = list(clusters)
    duplicates = sorted(
        name for name, count in Counter(cluster.name for cluster in facts).items() if count > 1
    )
    if duplicates:
        raise ValueError(f"clusters: each cluster is expected once; repeated: {duplicates}")

    evidence = sorted(
        (evaluate(cluster, target, options, now) for cluster in facts), key=_listing_order
    )
    by_state = Counter(item.state for item in evidence)
    seen = sorted(
        (item.last_seen_at, item.name) for item in evidence if item.last_seen_at is not None
    )
    last_soak_end = max(
        (item.soak_ends_at for item in evidence if item.soak_ends_at is not None), default=None
    )
    silent = [
        name
        for last_seen_at, name in seen
        if last_soak_end is not None and last_seen_at + options.stale_after < last_soak_end
    ]
    tally = Tally(
        by_state={state: by_state[state] for state in ClusterState},
        never_reported=len(facts) - len(seen),
        stale=sum(1 for last_seen_at, _ in seen if now - last_seen_at > options.stale_after),
        oldest_report_at=seen[0][0] if seen else None,
        last_soak_end=last_soak_end,
        silent_before_soak_end=tuple(silent[:REASONS_NAMED]),
        silent_before_soak_end_count=len(silent),
    )
    return conclude(target, tally, evidence, options, now, committed_at=committed_at)


def conclude(
    target: Target,
    tally: Tally,
    listed: Iterable[ClusterEvidence],
    options: GateOptions,
    now: datetime,
    *,
    committed_at: datetime | None = None,
) -> GateDecision:
    """The verdict over clusters judged one by one: `tally` sums up every expected cluster;
    `listed` holds the evidence of those listed, furthest from compliance first (the first
    REASONS_NAMED of them at least, when there are that many: the reasons name them);
    `committed_at` as `decide` takes it."""
    if now.tzinfo is None:
        raise ValueError("now: must be timezone-aware")
    listed = tuple(listed)
    verdict, reasons, earliest_pass_at = _verdict(target, tally, listed, options, now)
    if verdict is Verdict.PENDING:
        overdue = _overdue(target, tally, options, now, committed_at)
        if overdue is not None:
            verdict, reasons, earliest_pass_at = Verdict.FAILED, (overdue, *reasons), None
    waits_on_reports = earliest_pass_at is not None and not options.allow_stale
    return GateDecision(
        target=target,
        verdict=verdict,
        reasons=reasons,
        evaluated_at=now,
        expected=tally.expected,
        reporting=tally.expected - tally.never_reported - tally.stale,
        stale=tally.stale,
        never_reported=tally.never_reported,
        compliant=tally.by_state.get(ClusterState.COMPLIANT, 0),
        by_state={state: tally.by_state.get(state, 0) for state in ClusterState},
        clusters=listed,
        earliest_pass_at=earliest_pass_at,
        reports_needed=tally.silent_before_soak_end if waits_on_reports else (),
        reports_needed_count=tally.silent_before_soak_end_count if waits_on_reports else 0,
        oldest_report_at=tally.oldest_report_at,
    )


def _named(evidence: Iterable[ClusterEvidence], total: int, what: str) -> list[str]:
    """A line per cluster, for the first REASONS_NAMED of `total`, then one for the others."""
    lines = [f"{item.name}: {item.explanation}" for item in evidence][:REASONS_NAMED]
    if total > len(lines):
        lines.append(f"… and {total - len(lines):,} more cluster(s) {what}")
    return lines


def _required(expected: int, options: GateOptions) -> int:
    """How many of the expected clusters must run the target, Ready (and soaked to pass)."""
    ratio = options.min_converged_ratio
    return expected if ratio is None else max(1, math.ceil(ratio * expected))


def _overdue(
    target: Target,
    tally: Tally,
    options: GateOptions,
    now: datetime,
    committed_at: datetime | None,
) -> str | None:
    """Why a pending gate fails: max_time_to_converge has passed since the target's commit
    and fewer clusters than required run it Ready; None when it has not or they do."""
    deadline = options.max_time_to_converge
    if deadline is None or committed_at is None or now - committed_at <= deadline:
        return None
    expected = tally.expected
    on_track = sum(tally.by_state.get(state, 0) for state in _ON_TRACK)
    required = _required(expected, options)
    if not expected or on_track >= required:
        return None
    return (
        f"{target} has not converged in {target.environment} within "
        f"{format_duration(deadline)} (max_time_to_converge) of its commit at "
        f"{format_time(committed_at)}: {on_track} of {expected} expected cluster(s) run it, "
        f"Ready; {required} required"
    )


def _verdict(
    target: Target,
    tally: Tally,
    listed: tuple[ClusterEvidence, ...],
    options: GateOptions,
    now: datetime,
) -> tuple[Verdict, tuple[str, ...], datetime | None]:
    counts = tally.by_state
    failed = counts.get(ClusterState.FAILED, 0)
    if failed:
        failures = (item for item in listed if item.state is ClusterState.FAILED)
        return Verdict.FAILED, tuple(_named(failures, failed, "failed")), None

    environment = target.environment
    expected = tally.expected
    if not expected:
        return Verdict.PENDING, (f"no clusters expected in {environment}",), None
    blocking = (item for item in listed if item.state is not ClusterState.COMPLIANT)
    reasons = _named(blocking, expected - counts.get(ClusterState.COMPLIANT, 0), "not compliant")
    if expected < options.min_clusters:
        reasons.insert(
            0,
            f"{expected} cluster(s) expected in {environment}; "
            f"at least {options.min_clusters} required",
        )
        return Verdict.PENDING, tuple(reasons), None
    required = _required(expected, options)
    compliant = counts.get(ClusterState.COMPLIANT, 0)
    if required < expected and compliant >= required:
        return (
            Verdict.PASSED,
            (
                f"{compliant} of {expected} expected cluster(s) in {environment} run {target} "
                f"and have been Ready for at least {format_duration(options.soak)}; "
                f"{required} ({options.min_converged_ratio:.0%}) required",
            ),
            None,
        )
    on_track = sum(counts.get(state, 0) for state in _ON_TRACK)
    if on_track < required:
        if required < expected:
            reasons.insert(
                0,
                f"{on_track} of {expected} expected cluster(s) in {environment} run {target}, "
                f"Ready; {required} ({options.min_converged_ratio:.0%}) required",
            )
        return Verdict.PENDING, tuple(reasons), None

    # Every cluster runs the target, Ready: only time stands between the gate and passing.
    assert tally.last_soak_end is not None
    opens_at = tally.last_soak_end
    silent = tally.silent_before_soak_end_count
    if not options.allow_stale and silent:
        # No cluster is stale now (rule 3), so the soak ends after now.
        named = tally.silent_before_soak_end
        names = ", ".join(named) + (
            f" and {silent - len(named):,} more" if silent > len(named) else ""
        )
        reasons.append(
            f"{silent} cluster(s) must report again before the soak ends at "
            f"{format_time(opens_at)}: their last reports go stale first ({names})"
        )
    if now < opens_at:
        return Verdict.PENDING, tuple(reasons), opens_at
    return (
        Verdict.PASSED,
        (
            f"all {expected} expected cluster(s) in {environment} run {target} "
            f"and have been Ready for at least {format_duration(options.soak)}",
        ),
        opens_at,
    )
