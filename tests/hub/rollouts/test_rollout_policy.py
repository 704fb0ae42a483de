"""The rules of a rollout's state (hub/rollouts/policy.py), on values alone: where the
histories the store plays (test_rollouts.py) do not reach."""

from datetime import UTC, datetime, timedelta

import pytest

from hub.models.rollout import ROLLOUT_STATES
from hub.rollouts.policy import Facts, RolloutState, Stall, judge

T = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
STALL_AFTER = timedelta(minutes=30)


def at(minutes: float) -> datetime:
    return T + timedelta(minutes=minutes)


def facts(*reached: float, converged: float | None = None, failed: float | None = None) -> Facts:
    return Facts(
        started_at=T,
        reached_at=[at(minutes) for minutes in reached],
        converged_at=None if converged is None else at(converged),
        failed_at=None if failed is None else at(failed),
    )


def test_stalled_from_the_stall_after_on() -> None:
    just_before = judge(facts(10), as_of=at(39.9), stall_after=STALL_AFTER)
    on_time = judge(facts(10), as_of=at(40), stall_after=STALL_AFTER)

    assert (just_before.state, just_before.since, just_before.stalls) == (
        RolloutState.IN_PROGRESS,
        T,
        (),
    )
    assert (on_time.state, on_time.since, on_time.stalls) == (
        RolloutState.STALLED,
        at(40),
        (Stall(at(40), None),),
    )
    assert on_time.last_progress_at == at(10)


def test_a_cluster_reaching_it_ends_a_stall() -> None:
    judged = judge(facts(50, 60), as_of=at(70), stall_after=STALL_AFTER)

    assert (judged.state, judged.since) == (RolloutState.IN_PROGRESS, at(50))
    assert judged.stalls == (Stall(at(30), at(50)),)


def test_failed_until_converged_and_a_failure_ends_its_stalls() -> None:
    failed = judge(facts(5, failed=45), as_of=at(200), stall_after=STALL_AFTER)
    converged = judge(
        facts(5, 120, failed=45, converged=120), as_of=at(200), stall_after=STALL_AFTER
    )

    # Stalled from B+35 until the failure; nothing after it counts as a stall.
    assert (failed.state, failed.since) == (RolloutState.FAILED, at(45))
    assert failed.stalls == (Stall(at(35), at(45)),)
    assert (converged.state, converged.since) == (RolloutState.CONVERGED, at(120))
    assert converged.stalls == failed.stalls
    assert converged.last_progress_at == at(120)


def test_a_cluster_that_got_there_first_reached_it_when_it_began() -> None:
    judged = judge(facts(-5), as_of=at(31), stall_after=STALL_AFTER)

    assert judged.last_progress_at == T
    assert (judged.state, judged.since) == (RolloutState.STALLED, at(30))


def test_the_stall_after_must_be_positive() -> None:
    with pytest.raises(ValueError, match="stall_after must be positive"):
        judge(facts(), as_of=at(1), stall_after=timedelta(0))


def test_the_states_are_those_the_store_takes() -> None:
    assert [state.value for state in RolloutState] == list(ROLLOUT_STATES)
