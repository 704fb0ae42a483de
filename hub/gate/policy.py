"""The promotion gate's decision: may a platform commit (or a workload version) leave an
environment for the next one?

Pure: the gate service gathers the facts from the store (the expected clusters, what each
last reported, commit ancestry from the harvester) and hands them over with `now`; this
module decides and explains. It reads no clock, store or network, so every rule below is
tested on values alone.

The rules (ARCHITECTURE.md, "Promotion gate"), per expected cluster, first match wins:

1. failed          it attempted the target and reconciliation failed (Ready=False). The
                   gate fails at once; a reported failure stands even when the cluster has
                   gone silent since.
2. never_reported  no report ever. Blocks, whatever the options: there is no state to judge.
3. stale           its newest report is older than `stale_after`. Blocks, unless
                   `allow_stale`: then the cluster is judged on its last report as if that
                   state still held at `now` (its soak runs on through the silence), and it
                   goes on to the rules below.
4. unknown_revision the store cannot tell whether its applied commit contains the target
                   (the commit is not harvested yet). Blocks until the harvester knows.
5. not_applied     nothing applied, or an applied commit that does not contain the target.
6. not_ready       the target (or a descendant) is applied but the cluster is not Ready.
7. soaking         applied and Ready, but for less than `soak`. The soak starts at the later
                   of `ready_since` and `applied_since`: a newly applied revision, even a
                   descendant, restarts it, because it is what now runs.
8. compliant       applied and Ready for at least `soak`.

The gate **fails** when any cluster failed; **passes** when at least `min_clusters` (and at
least one) clusters are expected and every one is compliant; is **pending** otherwise.
No cluster expected is pending ("no clusters expected in <env>"), not failed: nothing
speaks against the commit itself, and the answer changes once a cluster registers.

For fixed facts the gate passes exactly on the interval from the last soak end to the moment
the first expected cluster goes stale (open-ended with `allow_stale`). `earliest_pass_at` is
the start of that interval while it is not behind `now`, otherwise None: the gate then cannot
pass without new facts (a report, a harvest, a registration).
"""

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

__all__ = [
    "ClusterEvidence",
    "ClusterFacts",
    "ClusterState",
    "GateDecision",
    "GateOptions",
    "PlatformCommit",
    "Target",
    "Verdict",
    "WorkloadVersion",
    "decide",
    "format_duration",
]


@dataclass(frozen=True, slots=True)
class PlatformCommit:
    """A commit of the platform GitOps repository, on the environment's branch."""

    environment: str
    sha: str

    def __str__(self) -> str:
        return f"platform commit {self.sha[:12]}"


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
    """Where one expected cluster stands; see the module docstring for the rules."""

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

    def __post_init__(self) -> None:
        if self.soak < timedelta(0):
            raise ValueError(f"soak: must not be negative, got {self.soak}")
        if self.stale_after <= timedelta(0):
            raise ValueError(f"stale_after: must be positive, got {self.stale_after}")
        if self.min_clusters < 1:
            raise ValueError(f"min_clusters: must be at least 1, got {self.min_clusters}")


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
    # When the currently applied revision was first reported applied.
    applied_since: datetime | None = None
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
        if self.contains_target is True and self.applied_since is None:
            raise ValueError(
                f"cluster {self.name!r}: applied_since is required when contains_target is True"
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
class GateDecision:
    target: Target
    verdict: Verdict
    # Why: the failures, or what blocks, or (when passed) what was established.
    reasons: tuple[str, ...]
    evaluated_at: datetime
    expected: int
    # Expected clusters with a report no older than stale_after.
    reporting: int
    stale: int
    never_reported: int
    compliant: int
    clusters: tuple[ClusterEvidence, ...]
    earliest_pass_at: datetime | None
    # Data freshness: the oldest newest-report among expected clusters that ever reported.
    oldest_report_at: datetime | None


def format_duration(delta: timedelta) -> str:
    """`1h2m5s`, `10m`, `0s`: whole seconds, rounded up so a remainder never reads as 0s."""
    seconds = math.ceil(delta.total_seconds())
    if seconds <= 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _reconciler_words(facts: ClusterFacts) -> str:
    words = ": ".join(part for part in (facts.reason, facts.message) if part)
    return f" ({words})" if words else ""


def _evaluate(
    facts: ClusterFacts, target: Target, options: GateOptions, now: datetime
) -> tuple[ClusterState, str, datetime | None]:
    """The cluster's state, why, and when its soak ends (once it runs the target, Ready)."""
    if facts.attempted_target and facts.ready is False:
        return ClusterState.FAILED, f"reconciling {target} failed{_reconciler_words(facts)}", None
    if facts.last_seen_at is None:
        return ClusterState.NEVER_REPORTED, "registered, but its agent never reported", None
    silent = now - facts.last_seen_at
    if silent > options.stale_after:
        if not options.allow_stale:
            return (
                ClusterState.STALE,
                f"no report for {format_duration(silent)} "
                f"(stale after {format_duration(options.stale_after)})",
                None,
            )
        state, explanation, soak_ends_at = _judge_state(facts, target, options, now)
        return (
            state,
            f"{explanation}; judged on its last report, {format_duration(silent)} old",
            soak_ends_at,
        )
    return _judge_state(facts, target, options, now)


def _judge_state(
    facts: ClusterFacts, target: Target, options: GateOptions, now: datetime
) -> tuple[ClusterState, str, datetime | None]:
    """Rules 4 to 8 of the module docstring, on the cluster's last reported state."""
    if facts.contains_target is None:
        return (
            ClusterState.UNKNOWN_REVISION,
            f"applied {facts.applied_revision}, which is not in the harvested history yet",
            None,
        )
    if not facts.contains_target:
        if facts.applied_revision is None:
            return ClusterState.NOT_APPLIED, "has applied nothing yet", None
        return (
            ClusterState.NOT_APPLIED,
            f"applied {facts.applied_revision}, which does not contain {target}",
            None,
        )
    if facts.ready is not True:
        readiness = "not Ready" if facts.ready is False else "readiness unknown"
        return (
            ClusterState.NOT_READY,
            f"runs {target}, {readiness}{_reconciler_words(facts)}",
            None,
        )
    # Both are set here: ClusterFacts requires them with ready and contains_target.
    assert facts.ready_since is not None
    assert facts.applied_since is not None
    soak_ends_at = max(facts.ready_since, facts.applied_since) + options.soak
    if now < soak_ends_at:
        remaining = format_duration(soak_ends_at - now)
        return ClusterState.SOAKING, f"runs {target}, Ready; soak ends in {remaining}", soak_ends_at
    return ClusterState.COMPLIANT, f"runs {target}, Ready and soaked", soak_ends_at


# Clusters that need nothing but time to become compliant.
_ON_TRACK = (ClusterState.SOAKING, ClusterState.COMPLIANT)


def decide(
    target: Target, clusters: Iterable[ClusterFacts], options: GateOptions, now: datetime
) -> GateDecision:
    """The gate's verdict for `target` over the expected `clusters`, at `now`."""
    if now.tzinfo is None:
        raise ValueError("now: must be timezone-aware")
    facts = sorted(clusters, key=lambda cluster: cluster.name)
    duplicates = sorted(
        name for name, count in Counter(cluster.name for cluster in facts).items() if count > 1
    )
    if duplicates:
        raise ValueError(f"clusters: each cluster is expected once; repeated: {duplicates}")

    evidence = []
    for cluster in facts:
        state, explanation, soak_ends_at = _evaluate(cluster, target, options, now)
        evidence.append(
            ClusterEvidence(
                name=cluster.name,
                cluster_type=cluster.cluster_type,
                state=state,
                explanation=explanation,
                last_seen_at=cluster.last_seen_at,
                applied_revision=cluster.applied_revision,
                attempted_revision=cluster.attempted_revision,
                ready=cluster.ready,
                ready_since=cluster.ready_since,
                soak_ends_at=soak_ends_at,
                soak_remaining=None
                if soak_ends_at is None
                else max(soak_ends_at - now, timedelta(0)),
                reason=cluster.reason,
                message=cluster.message,
            )
        )

    seen = [cluster.last_seen_at for cluster in facts if cluster.last_seen_at is not None]
    never_reported = len(facts) - len(seen)
    stale = sum(1 for last_seen_at in seen if now - last_seen_at > options.stale_after)
    compliant = sum(1 for item in evidence if item.state is ClusterState.COMPLIANT)
    verdict, reasons, earliest_pass_at = _verdict(target, evidence, options, now)
    return GateDecision(
        target=target,
        verdict=verdict,
        reasons=reasons,
        evaluated_at=now,
        expected=len(facts),
        reporting=len(seen) - stale,
        stale=stale,
        never_reported=never_reported,
        compliant=compliant,
        clusters=tuple(evidence),
        earliest_pass_at=earliest_pass_at,
        oldest_report_at=min(seen, default=None),
    )


def _verdict(
    target: Target, evidence: list[ClusterEvidence], options: GateOptions, now: datetime
) -> tuple[Verdict, tuple[str, ...], datetime | None]:
    failures = [
        f"{item.name}: {item.explanation}" for item in evidence if item.state is ClusterState.FAILED
    ]
    if failures:
        return Verdict.FAILED, tuple(failures), None

    environment = target.environment
    if not evidence:
        return Verdict.PENDING, (f"no clusters expected in {environment}",), None
    reasons = [
        f"{item.name}: {item.explanation}"
        for item in evidence
        if item.state is not ClusterState.COMPLIANT
    ]
    if len(evidence) < options.min_clusters:
        reasons.insert(
            0,
            f"{len(evidence)} cluster(s) expected in {environment}; "
            f"at least {options.min_clusters} required",
        )
        return Verdict.PENDING, tuple(reasons), None
    if any(item.state not in _ON_TRACK for item in evidence):
        return Verdict.PENDING, tuple(reasons), None

    # Every cluster runs the target, Ready: only time stands between the gate and passing.
    opens_at = max(item.soak_ends_at for item in evidence if item.soak_ends_at is not None)
    if not options.allow_stale:
        # No cluster is stale now (rule 3); the first to go stale ends the passing interval.
        oldest_seen, oldest = min(
            (item.last_seen_at, item.name) for item in evidence if item.last_seen_at is not None
        )
        fresh_until = oldest_seen + options.stale_after
        if fresh_until < opens_at:
            reasons.append(
                f"{oldest}: its last report goes stale at {fresh_until}, before the soak ends "
                f"at {opens_at}; a newer report is needed"
            )
            return Verdict.PENDING, tuple(reasons), None
    if now < opens_at:
        return Verdict.PENDING, tuple(reasons), opens_at
    return (
        Verdict.PASSED,
        (
            f"all {len(evidence)} expected cluster(s) in {environment} run {target} "
            f"and have been Ready for at least {format_duration(options.soak)}",
        ),
        opens_at,
    )
