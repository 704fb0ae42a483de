"""The promotion gate's rules, one table row per rule, and its behaviour over time as properties."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.gate.policy import (
    REASONS_NAMED,
    ClusterFacts,
    ClusterState,
    GateDecision,
    GateOptions,
    PlatformCommit,
    Verdict,
    WorkloadVersion,
    decide,
    format_duration,
)

SHA_A = "1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c"
SHA_B = "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3"
SHA_OLD = "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
TARGET = PlatformCommit(environment="dev", sha=SHA_A)
OPTIONS = GateOptions(soak=timedelta(minutes=10), stale_after=timedelta(minutes=10))


def minutes(count: float) -> timedelta:
    return timedelta(minutes=count)


HALF_AN_HOUR_AGO = NOW - timedelta(minutes=30)


def running(name: str, *, since: datetime = HALF_AN_HOUR_AGO, **fields: Any) -> ClusterFacts:
    """A cluster that applied the target at `since`, Ready ever since, reporting a minute ago."""
    values: dict[str, Any] = {
        "name": name,
        "cluster_type": "drone",
        "last_seen_at": NOW - minutes(1),
        "applied_revision": f"dev@sha1:{SHA_A}",
        "contains_target": True,
        "contains_since": since,
        "attempted_revision": f"dev@sha1:{SHA_A}",
        "attempted_target": True,
        "ready": True,
        "ready_since": since,
        "reason": "ReconciliationSucceeded",
        "message": f"Applied revision: dev@sha1:{SHA_A}",
    }
    return ClusterFacts(**(values | fields))


def never_reported(name: str) -> ClusterFacts:
    return ClusterFacts(name=name, cluster_type="drone", last_seen_at=None)


def by_name(decision: GateDecision) -> dict[str, Any]:
    return {cluster.name: cluster for cluster in decision.clusters}


# --- rules ------------------------------------------------------------------------------------


def test_passes_when_every_cluster_runs_the_commit_ready_for_the_soak() -> None:
    clusters = [running("drone-01"), running("drone-02", since=NOW - minutes(12))]

    decision = decide(TARGET, clusters, OPTIONS, NOW)

    assert decision.verdict is Verdict.PASSED
    assert decision.reasons == (
        "all 2 expected cluster(s) in dev run platform commit 1f2e3d4c5b6a "
        "and have been Ready for at least 10m",
    )
    # Opened when the later of the two finished its soak.
    assert decision.earliest_pass_at == NOW - minutes(2)
    assert (decision.expected, decision.reporting, decision.compliant) == (2, 2, 2)
    assert (decision.stale, decision.never_reported) == (0, 0)
    assert {c.state for c in decision.clusters} == {ClusterState.COMPLIANT}
    assert by_name(decision)["drone-02"].soak_remaining == timedelta(0)


def test_pending_while_soaking_until_exactly_the_soak_end() -> None:
    clusters = [running("drone-01"), running("drone-02", since=NOW - minutes(4))]

    decision = decide(TARGET, clusters, OPTIONS, NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.earliest_pass_at == NOW + minutes(6)
    soaking = by_name(decision)["drone-02"]
    assert soaking.state is ClusterState.SOAKING
    assert soaking.soak_ends_at == NOW + minutes(6)
    assert soaking.soak_remaining == minutes(6)
    assert decision.reasons == (
        "drone-02: runs platform commit 1f2e3d4c5b6a, Ready; soak ends in 6m",
    )
    just_before = decide(TARGET, clusters, OPTIONS, NOW + minutes(6) - timedelta(microseconds=1))
    assert just_before.verdict is Verdict.PENDING
    assert decide(TARGET, clusters, OPTIONS, NOW + minutes(6)).verdict is Verdict.PASSED


def test_soak_restarts_when_the_target_runs_again_after_a_break() -> None:
    # Ready for half an hour, but it has run the target (or a descendant) for three minutes.
    cluster = running("drone-01", ready_since=NOW - minutes(30), contains_since=NOW - minutes(3))

    decision = decide(TARGET, [cluster], OPTIONS, NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.earliest_pass_at == NOW + minutes(7)


def test_zero_soak_passes_as_soon_as_ready() -> None:
    options = replace(OPTIONS, soak=timedelta(0))

    decision = decide(TARGET, [running("drone-01", since=NOW)], options, NOW)

    assert decision.verdict is Verdict.PASSED
    assert decision.earliest_pass_at == NOW


def test_a_cluster_at_a_descendant_commit_counts() -> None:
    descendant = running(
        "drone-02",
        applied_revision=f"dev@sha1:{SHA_B}",
        attempted_revision=f"dev@sha1:{SHA_B}",
        attempted_target=False,
    )

    decision = decide(TARGET, [running("drone-01"), descendant], OPTIONS, NOW)

    assert decision.verdict is Verdict.PASSED
    assert by_name(decision)["drone-02"].applied_revision == f"dev@sha1:{SHA_B}"


@pytest.mark.parametrize(
    ("fields", "state", "explanation"),
    [
        (
            {"applied_revision": f"dev@sha1:{SHA_OLD}", "contains_target": False},
            ClusterState.NOT_APPLIED,
            f"applied dev@sha1:{SHA_OLD}, which does not contain platform commit 1f2e3d4c5b6a",
        ),
        (
            {
                "applied_revision": None,
                "contains_target": False,
                "attempted_revision": None,
                "attempted_target": False,
                "ready": None,
            },
            ClusterState.NOT_APPLIED,
            "has applied nothing yet",
        ),
        (
            {"applied_revision": f"dev@sha1:{SHA_B}", "contains_target": None},
            ClusterState.UNKNOWN_REVISION,
            f"applied dev@sha1:{SHA_B}, which is not in the harvested history yet",
        ),
        (
            {"ready": None, "ready_since": None, "reason": "Progressing", "message": "applying"},
            ClusterState.NOT_READY,
            "runs platform commit 1f2e3d4c5b6a, readiness unknown (Progressing: applying)",
        ),
        # Failing on a newer attempt while the target stays applied: not this commit's failure.
        (
            {
                "attempted_revision": f"dev@sha1:{SHA_B}",
                "attempted_target": False,
                "ready": False,
                "ready_since": None,
                "reason": "BuildFailed",
                "message": "kustomize build failed",
            },
            ClusterState.NOT_READY,
            "runs platform commit 1f2e3d4c5b6a, not Ready (BuildFailed: kustomize build failed)",
        ),
        # Still reconciling the target: not a failure (yet).
        (
            {"contains_target": False, "applied_revision": None, "ready": None},
            ClusterState.NOT_APPLIED,
            "has applied nothing yet",
        ),
    ],
    ids=[
        "behind",
        "nothing-applied",
        "unknown-commit",
        "readiness-unknown",
        "failing-a-newer-attempt",
        "attempting-the-target",
    ],
)
def test_a_cluster_not_running_the_commit_ready_keeps_the_gate_pending(
    fields: dict[str, Any], state: ClusterState, explanation: str
) -> None:
    decision = decide(TARGET, [running("drone-01"), running("drone-02", **fields)], OPTIONS, NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.earliest_pass_at is None
    blocking = by_name(decision)["drone-02"]
    assert (blocking.state, blocking.explanation) == (state, explanation)
    assert decision.reasons == (f"drone-02: {explanation}",)
    assert decision.compliant == 1


def test_fails_at_once_when_a_cluster_fails_to_reconcile_the_commit() -> None:
    failing = running(
        "large-01",
        ready=False,
        ready_since=None,
        reason="HealthCheckFailed",
        message="Deployment/hello-world-app not ready",
    )
    clusters = [running("drone-01", since=NOW - minutes(1)), failing, never_reported("drone-09")]

    decision = decide(TARGET, clusters, OPTIONS, NOW)

    assert decision.verdict is Verdict.FAILED
    assert decision.reasons == (
        "large-01: reconciling platform commit 1f2e3d4c5b6a failed "
        "(HealthCheckFailed: Deployment/hello-world-app not ready)",
    )
    assert decision.earliest_pass_at is None
    evidence = by_name(decision)["large-01"]
    assert evidence.state is ClusterState.FAILED
    assert evidence.message == "Deployment/hello-world-app not ready"


def test_a_reported_failure_stands_after_the_cluster_goes_silent() -> None:
    failing = running("large-01", ready=False, ready_since=None, last_seen_at=NOW - minutes(90))

    decision = decide(TARGET, [failing], OPTIONS, NOW)

    assert decision.verdict is Verdict.FAILED
    assert decision.stale == 1


def test_a_stale_cluster_blocks() -> None:
    silent = running("drone-02", last_seen_at=NOW - minutes(11))

    decision = decide(TARGET, [running("drone-01"), silent], OPTIONS, NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.reasons == ("drone-02: no report for 11m (stale after 10m)",)
    assert by_name(decision)["drone-02"].state is ClusterState.STALE
    assert (decision.expected, decision.reporting, decision.stale) == (2, 1, 1)
    assert decision.earliest_pass_at is None
    assert decision.oldest_report_at == NOW - minutes(11)


def test_silence_up_to_the_threshold_is_not_stale() -> None:
    cluster = running("drone-01", last_seen_at=NOW - OPTIONS.stale_after)

    decision = decide(TARGET, [cluster], OPTIONS, NOW)

    assert decision.verdict is Verdict.PASSED
    assert decision.stale == 0


def test_allow_stale_judges_a_silent_cluster_on_its_last_report() -> None:
    options = replace(OPTIONS, allow_stale=True)
    silent = running("drone-02", last_seen_at=NOW - minutes(45))

    decision = decide(TARGET, [running("drone-01"), silent], options, NOW)

    assert decision.verdict is Verdict.PASSED
    evidence = by_name(decision)["drone-02"]
    assert evidence.state is ClusterState.COMPLIANT
    assert evidence.explanation == (
        "runs platform commit 1f2e3d4c5b6a, Ready and soaked; judged on its last report, 45m old"
    )
    assert (decision.reporting, decision.stale) == (1, 1)


def test_allow_stale_still_needs_the_commit_applied() -> None:
    options = replace(OPTIONS, allow_stale=True)
    behind = running(
        "drone-02",
        last_seen_at=NOW - minutes(45),
        applied_revision=f"dev@sha1:{SHA_OLD}",
        contains_target=False,
    )

    decision = decide(TARGET, [running("drone-01"), behind], options, NOW)

    assert decision.verdict is Verdict.PENDING
    assert by_name(decision)["drone-02"].state is ClusterState.NOT_APPLIED


@pytest.mark.parametrize("allow_stale", [False, True])
def test_an_expected_cluster_that_never_reported_blocks(allow_stale: bool) -> None:
    options = replace(OPTIONS, allow_stale=allow_stale)

    decision = decide(TARGET, [running("drone-01"), never_reported("drone-02")], options, NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.reasons == ("drone-02: registered, but its agent never reported",)
    assert (decision.expected, decision.reporting, decision.never_reported) == (2, 1, 1)
    assert decision.earliest_pass_at is None
    # Freshness is about the clusters that did report.
    assert decision.oldest_report_at == NOW - minutes(1)


@pytest.mark.parametrize(
    "target",
    [TARGET, WorkloadVersion(environment="dev", workload="hello-world-app", version="1.1.0")],
    ids=["platform-commit", "workload-version"],
)
def test_no_expected_cluster_is_pending_with_that_reason(
    target: PlatformCommit | WorkloadVersion,
) -> None:
    decision = decide(target, [], OPTIONS, NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.reasons == ("no clusters expected in dev",)
    assert decision.earliest_pass_at is None
    assert (decision.expected, decision.oldest_report_at) == (0, None)


def test_fewer_expected_clusters_than_min_clusters_is_pending() -> None:
    options = replace(OPTIONS, min_clusters=3)

    decision = decide(TARGET, [running("drone-01"), running("drone-02")], options, NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.reasons == ("2 cluster(s) expected in dev; at least 3 required",)
    assert decision.earliest_pass_at is None


def test_a_soak_that_outlasts_the_data_opens_at_its_end_naming_who_must_report() -> None:
    # Soak ends in 8 minutes; drone-01's last report goes stale in 5, drone-02's in 9.
    clusters = [
        running("drone-01", since=NOW - minutes(2), last_seen_at=NOW - minutes(5)),
        running("drone-02", since=NOW - minutes(2), last_seen_at=NOW - minutes(1)),
    ]

    decision = decide(TARGET, clusters, OPTIONS, NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.earliest_pass_at == NOW + minutes(8)
    assert (decision.reports_needed, decision.reports_needed_count) == (("drone-01",), 1)
    assert decision.reasons[-1] == (
        # As the pages print times: to the second, in UTC.
        "1 cluster(s) must report again before the soak ends at 2026-11-22 12:08:00 UTC: "
        "their last reports go stale first (drone-01)"
    )
    allowed = decide(TARGET, clusters, replace(OPTIONS, allow_stale=True), NOW)
    assert allowed.earliest_pass_at == NOW + minutes(8)
    assert allowed.reports_needed == ()


def test_workload_version_reasons_name_the_version() -> None:
    target = WorkloadVersion(environment="stage", workload="hello-world-app", version="1.1.0")
    failing = running("large-01", ready=False, ready_since=None, reason="Degraded", message=None)

    decision = decide(target, [failing], OPTIONS, NOW)

    assert decision.reasons == ("large-01: reconciling hello-world-app 1.1.0 failed (Degraded)",)


def test_cluster_order_does_not_matter() -> None:
    clusters = [running("large-01"), never_reported("drone-02"), running("drone-01")]

    forward = decide(TARGET, clusters, OPTIONS, NOW)
    backward = decide(TARGET, list(reversed(clusters)), OPTIONS, NOW)

    assert forward == backward
    # Furthest from compliance first, then by name.
    assert [c.name for c in forward.clusters] == ["drone-02", "drone-01", "large-01"]


def test_reasons_name_the_clusters_furthest_from_compliance_and_count_the_others() -> None:
    behind = {"applied_revision": f"dev@sha1:{SHA_OLD}", "contains_target": False}
    clusters = [
        *(running(f"drone-{n:02}", **behind) for n in range(REASONS_NAMED + 5)),
        never_reported("large-01"),
        running("large-02"),
    ]

    decision = decide(TARGET, clusters, OPTIONS, NOW)

    assert decision.reasons[0] == "large-01: registered, but its agent never reported"
    assert decision.reasons[1].startswith("drone-00: applied dev@sha1:")
    assert len(decision.reasons) == REASONS_NAMED + 1
    assert decision.reasons[-1] == "… and 6 more cluster(s) not compliant"
    assert decision.by_state[ClusterState.NOT_APPLIED] == REASONS_NAMED + 5
    assert decision.by_state[ClusterState.COMPLIANT] == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: GateOptions(soak=minutes(-1), stale_after=minutes(10)), "soak: must not be"),
        (lambda: GateOptions(soak=minutes(1), stale_after=timedelta(0)), "stale_after: must be"),
        (
            lambda: GateOptions(soak=minutes(1), stale_after=minutes(1), min_clusters=0),
            "min_clusters: must be at least 1",
        ),
        (
            lambda: running("drone-01", ready_since=None),
            "cluster 'drone-01': ready_since is required when ready is True",
        ),
        (
            lambda: running("drone-01", contains_since=None),
            "cluster 'drone-01': contains_since is required when contains_target is True",
        ),
        (
            lambda: decide(TARGET, [running("drone-01"), running("drone-01")], OPTIONS, NOW),
            "clusters: each cluster is expected once; repeated: ['drone-01']",
        ),
        (
            lambda: decide(TARGET, [], OPTIONS, NOW.replace(tzinfo=None)),
            "now: must be timezone-aware",
        ),
    ],
    ids=[
        "negative-soak",
        "zero-stale-after",
        "zero-min-clusters",
        "ready-without-since",
        "applied-without-since",
        "repeated-cluster",
        "naive-now",
    ],
)
def test_bad_input_is_refused_naming_the_field(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("[", r"\[")):
        make()


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(seconds=-5), "0s"),
        (timedelta(milliseconds=1), "1s"),
        (minutes(10), "10m"),
        (timedelta(hours=1, minutes=2, seconds=5), "1h2m5s"),
        (timedelta(days=2, seconds=1), "2d1s"),
    ],
)
def test_durations_read_in_whole_seconds_rounded_up(delta: timedelta, text: str) -> None:
    assert format_duration(delta) == text


# --- over time --------------------------------------------------------------------------------

NAMES = ["drone-01", "drone-02", "large-01", "large-02", "small-01"]
# Every fact lies within four hours before NOW; options span the same range.
OFFSETS = st.integers(min_value=-4 * 3600, max_value=0).map(lambda s: NOW + timedelta(seconds=s))


@st.composite
def cluster_facts(draw: st.DrawFn, name: str) -> ClusterFacts:
    last_seen_at = draw(st.none() | OFFSETS)
    if last_seen_at is None:
        return never_reported(name)
    contains_target = draw(st.sampled_from([True, True, False, None]))
    ready = draw(st.sampled_from([True, True, False, None]))
    return ClusterFacts(
        name=name,
        cluster_type=name.split("-")[0],
        last_seen_at=last_seen_at,
        applied_revision=f"dev@sha1:{SHA_A}" if contains_target else f"dev@sha1:{SHA_OLD}",
        contains_target=contains_target,
        contains_since=draw(OFFSETS) if contains_target else None,
        attempted_revision=f"dev@sha1:{SHA_A}",
        attempted_target=draw(st.booleans()),
        ready=ready,
        ready_since=draw(OFFSETS) if ready else None,
    )


@st.composite
def fleets(draw: st.DrawFn) -> list[ClusterFacts]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=len(NAMES)))
    return [draw(cluster_facts(name)) for name in names]


gate_options = st.builds(
    GateOptions,
    soak=st.integers(min_value=0, max_value=3 * 3600).map(lambda s: timedelta(seconds=s)),
    stale_after=st.integers(min_value=1, max_value=3 * 3600).map(lambda s: timedelta(seconds=s)),
    allow_stale=st.booleans(),
    min_clusters=st.integers(min_value=1, max_value=3),
)
LATER = st.lists(
    st.integers(min_value=0, max_value=8 * 3600).map(lambda s: timedelta(seconds=s)), max_size=8
)


@settings(max_examples=300)
@given(clusters=fleets(), options=gate_options, later=LATER)
def test_earliest_pass_at_is_exactly_when_the_gate_opens(
    clusters: list[ClusterFacts], options: GateOptions, later: list[timedelta]
) -> None:
    decision = decide(TARGET, clusters, options, NOW)
    opens_at = decision.earliest_pass_at

    if opens_at is None:
        # Without new facts it never passes, however long one waits.
        for delta in later:
            assert decide(TARGET, clusters, options, NOW + delta).verdict is not Verdict.PASSED
        return
    assert (decision.verdict is Verdict.PASSED) == (opens_at <= NOW)
    # It opens then if the clusters named as needing a report report again by then.
    assert decision.reports_needed_count == len(decision.reports_needed)
    reporting = [
        replace(cluster, last_seen_at=max(opens_at, NOW))
        if cluster.name in decision.reports_needed
        else cluster
        for cluster in clusters
    ]
    at_opening = decide(TARGET, reporting, options, max(opens_at, NOW))
    assert at_opening.verdict is Verdict.PASSED
    assert at_opening.earliest_pass_at == opens_at
    before = opens_at - timedelta(microseconds=1)
    assert decide(TARGET, reporting, options, before).verdict is not Verdict.PASSED


@settings(max_examples=300)
@given(clusters=fleets(), options=gate_options, later=LATER)
def test_once_passed_the_gate_stays_passed_while_the_data_is_fresh(
    clusters: list[ClusterFacts], options: GateOptions, later: list[timedelta]
) -> None:
    decision = decide(TARGET, clusters, options, NOW)
    if decision.verdict is not Verdict.PASSED:
        return
    assert decision.oldest_report_at is not None
    fresh_until = decision.oldest_report_at + options.stale_after
    for delta in later:
        verdict = decide(TARGET, clusters, options, NOW + delta).verdict
        expected_passed = options.allow_stale or NOW + delta <= fresh_until
        assert (verdict is Verdict.PASSED) == expected_passed


@settings(max_examples=300)
@given(clusters=fleets(), options=gate_options, later=LATER)
def test_failure_depends_on_the_facts_not_on_time(
    clusters: list[ClusterFacts], options: GateOptions, later: list[timedelta]
) -> None:
    failed = any(c.attempted_target and c.ready is False for c in clusters)
    for delta in [timedelta(0), *later]:
        decision = decide(TARGET, clusters, options, NOW + delta)
        assert (decision.verdict is Verdict.FAILED) == failed
        assert decision.expected == len(clusters)
        assert decision.expected == decision.reporting + decision.stale + decision.never_reported
        assert decision.reasons, "every verdict says why"


@st.composite
def on_track_fleets(draw: st.DrawFn) -> list[ClusterFacts]:
    """Fleets in which every cluster reported the target applied and Ready."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=len(NAMES)))
    return [
        running(
            name,
            last_seen_at=draw(OFFSETS),
            contains_since=draw(OFFSETS),
            ready_since=draw(OFFSETS),
        )
        for name in names
    ]


@settings(max_examples=300)
@given(clusters=on_track_fleets(), options=gate_options, later=LATER)
def test_an_on_track_fleet_passes_from_the_last_soak_end_while_the_data_is_fresh(
    clusters: list[ClusterFacts], options: GateOptions, later: list[timedelta]
) -> None:
    soaked_at = max(max(c.ready_since, c.contains_since) for c in clusters) + options.soak
    fresh_until = min(c.last_seen_at for c in clusters) + options.stale_after
    enough = len(clusters) >= options.min_clusters
    for delta in [timedelta(0), *later]:
        now = NOW + delta
        decision = decide(TARGET, clusters, options, now)
        passes = enough and soaked_at <= now and (options.allow_stale or now <= fresh_until)
        assert (decision.verdict is Verdict.PASSED) == passes
        can_still_pass = enough and (options.allow_stale or now <= fresh_until)
        assert decision.earliest_pass_at == (soaked_at if can_still_pass else None)
        must_report = sorted(
            (c.last_seen_at, c.name)
            for c in clusters
            if c.last_seen_at + options.stale_after < soaked_at
        )
        assert decision.reports_needed == (
            tuple(name for _, name in must_report)
            if can_still_pass and not options.allow_stale
            else ()
        )
