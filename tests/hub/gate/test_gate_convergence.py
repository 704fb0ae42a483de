"""The gate's convergence options, one case per rule: min_converged_ratio passes once that share
of the expected clusters is compliant; max_time_to_converge fails a gate still short of the
clusters it requires that long after the target's commit. Both off, the gate is as before."""

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from hub.gate.policy import ClusterState, GateOptions, Verdict, decide
from tests.hub.gate.test_gate_policy import NOW, OPTIONS, SHA_OLD, TARGET, minutes, running

# Ten drones: eight compliant, one soaking (Ready at the target two minutes ago), one still on
# an older commit.
FLEET = [
    *(running(f"drone-0{index}") for index in range(8)),
    running("drone-08", since=NOW - minutes(2)),
    running("drone-09", applied_revision=f"dev@sha1:{SHA_OLD}", contains_target=False),
]
COMMITTED = NOW - timedelta(hours=2)


def ratio(value: float) -> GateOptions:
    return replace(OPTIONS, min_converged_ratio=value)


def deadline(value: timedelta, options: GateOptions = OPTIONS) -> GateOptions:
    return replace(options, max_time_to_converge=value)


def test_off_the_gate_waits_for_every_cluster_however_long() -> None:
    decision = decide(TARGET, FLEET, OPTIONS, NOW, committed_at=COMMITTED - timedelta(days=30))

    assert decision.verdict is Verdict.PENDING
    assert decision.reasons[0] == "drone-09: applied dev@sha1:" + SHA_OLD + (
        ", which does not contain platform commit 1f2e3d4c5b6a"
    )


def test_passes_once_the_share_asked_for_is_compliant() -> None:
    decision = decide(TARGET, FLEET, ratio(0.8), NOW)

    assert decision.verdict is Verdict.PASSED
    assert decision.reasons == (
        "8 of 10 expected cluster(s) in dev run platform commit 1f2e3d4c5b6a and have been "
        "Ready for at least 10m; 8 (80%) required",
    )
    assert decision.compliant == 8


def test_a_share_run_but_not_soaked_yet_is_pending_until_the_soaks_end() -> None:
    decision = decide(TARGET, FLEET, ratio(0.9), NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.earliest_pass_at == NOW + minutes(8)
    just_before = NOW + minutes(8) - timedelta(microseconds=1)
    assert decide(TARGET, FLEET, ratio(0.9), just_before).verdict is Verdict.PENDING
    # drone-08 soaked: nine of ten compliant.
    assert decide(TARGET, FLEET, ratio(0.9), NOW + minutes(8)).verdict is Verdict.PASSED


def test_below_the_share_is_pending_saying_how_far() -> None:
    short = [*FLEET[:5], *(replace(c, contains_target=False) for c in FLEET[5:8]), *FLEET[8:]]

    decision = decide(TARGET, short, ratio(0.75), NOW)

    assert decision.verdict is Verdict.PENDING
    assert decision.reasons[0] == (
        "6 of 10 expected cluster(s) in dev run platform commit 1f2e3d4c5b6a, Ready; "
        "8 (75%) required"
    )


def test_a_failed_cluster_fails_the_gate_whatever_the_share() -> None:
    failed = replace(FLEET[9], attempted_target=True, ready=False, reason="HealthCheckFailed")

    decision = decide(TARGET, [*FLEET[:9], failed], ratio(0.5), NOW)

    assert decision.verdict is Verdict.FAILED


def test_past_its_time_a_gate_short_of_clusters_fails_saying_so() -> None:
    decision = decide(TARGET, FLEET, deadline(timedelta(hours=1)), NOW, committed_at=COMMITTED)

    assert decision.verdict is Verdict.FAILED
    assert decision.reasons[0] == (
        "platform commit 1f2e3d4c5b6a has not converged in dev within 1h "
        "(max_time_to_converge) of its commit at 2026-11-22 10:00:00 UTC: 9 of 10 expected "
        "cluster(s) run it, Ready; 10 required"
    )
    # The clusters that hold it back follow.
    assert decision.reasons[1].startswith("drone-09: applied dev@sha1:")
    assert decision.earliest_pass_at is None


@pytest.mark.parametrize(
    ("options", "committed_at", "verdict"),
    [
        # Within its time, or exactly at it: pending.
        (deadline(timedelta(hours=3)), COMMITTED, Verdict.PENDING),
        (deadline(timedelta(hours=2)), COMMITTED, Verdict.PENDING),
        # No rollout of the target yet: no commit time to count from.
        (deadline(timedelta(hours=1)), None, Verdict.PENDING),
        # Enough clusters run it Ready: converged, so only the soak is left.
        (deadline(timedelta(hours=1), ratio(0.9)), COMMITTED, Verdict.PENDING),
        (deadline(timedelta(hours=1), ratio(0.95)), COMMITTED, Verdict.FAILED),
    ],
    ids=["within", "at-the-deadline", "no-rollout", "converged-soaking", "short-of-the-share"],
)
def test_the_deadline_counts_from_the_commit_and_only_while_short(
    options: GateOptions, committed_at: datetime | None, verdict: Verdict
) -> None:
    assert decide(TARGET, FLEET, options, NOW, committed_at=committed_at).verdict is verdict


def test_a_converged_fleet_passes_past_its_time() -> None:
    every = [*FLEET[:8], running("drone-08"), running("drone-09")]

    decision = decide(TARGET, every, deadline(timedelta(minutes=5)), NOW, committed_at=COMMITTED)

    assert decision.verdict is Verdict.PASSED
    assert decision.by_state[ClusterState.COMPLIANT] == 10


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("min_converged_ratio", 0.0, "min_converged_ratio: must be above 0 and at most 1"),
        ("min_converged_ratio", 1.5, "min_converged_ratio: must be above 0 and at most 1"),
        ("max_time_to_converge", timedelta(0), "max_time_to_converge: must be positive"),
    ],
)
def test_bad_options_are_refused_naming_them(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message):
        replace(OPTIONS, **{field: value})
