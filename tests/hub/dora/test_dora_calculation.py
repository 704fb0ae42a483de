"""The pure DORA calculation (hub/dora/calculation.py): percentiles, and which rollouts of a
range count in which figure."""

from datetime import UTC, datetime, timedelta

import pytest

from hub.dora.calculation import Rollout, Spread, TimeRange, behind_figures, figures, percentile

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def minutes(count: float) -> datetime:
    return T0 + timedelta(minutes=count)


def rollout(
    revision: str,
    *,
    committed: float,
    started: float,
    completed: float | None,
    failed: float | None = None,
    restored: float | None = None,
) -> Rollout:
    return Rollout(
        environment="prod",
        environment_position=2,
        repository="https://github.com/contoso/platform-gitops",
        branch="prod",
        revision=revision,
        commit_sha=revision,
        committed_at=minutes(committed),
        started_at=minutes(started),
        expected_clusters=3,
        reached_clusters=3 if completed is not None else 1,
        completed_at=None if completed is None else minutes(completed),
        failed_at=None if failed is None else minutes(failed),
        failed_clusters=0 if failed is None else 1,
        failed_cluster=None if failed is None else "prod-eu-1",
        failure_reason=None,
        failure_message=None,
        restored_at=None if restored is None else minutes(restored),
    )


@pytest.mark.parametrize(
    ("values", "percent", "expected"),
    [
        ([7.0], 50, 7.0),
        ([7.0], 90, 7.0),
        ([1.0, 2.0], 50, 1.5),
        ([600.0, 900.0, 2400.0], 50, 900.0),
        # Rank 0.9 * 2 = 1.8: 900 + 0.8 * (2400 - 900).
        ([600.0, 900.0, 2400.0], 90, 2100.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        # Rank 0.9 * 3 = 2.7: 3 + 0.7 * (10 - 3).
        ([1.0, 2.0, 3.0, 10.0], 90, 7.9),
        ([1.0, 2.0, 3.0, 10.0], 100, 10.0),
        ([1.0, 2.0, 3.0, 10.0], 0, 1.0),
    ],
)
def test_percentiles_interpolate_between_closest_ranks(
    values: list[float], percent: float, expected: float
) -> None:
    assert percentile(values, percent) == pytest.approx(expected)


def test_a_spread_of_nothing_is_nothing() -> None:
    assert Spread.of([]) == Spread(None, None, None)
    one = timedelta(minutes=3)
    assert Spread.of([one]) == Spread(one, one, one)


def test_which_rollouts_count_in_which_figure() -> None:
    """[100, 200) minutes:
    a: started 50, completed 120: a deployment of the range (lead time 120 - 40 = 80 min),
       not a rollout started in it;
    b: started 110, failed 115, restored 140, completed 150: lead time 150 - 105 = 45 min,
       failed, restored in 25 min;
    c: started 180, failed 190, not complete nor restored by 200: in progress, unrestored;
    d: started and completed before the range; e: started at 200, after it.
    Lead times 45 and 80 min: median 62.5 min, p90 at rank 0.9: 45 + 0.9 * 35 = 76.5 min."""
    period = TimeRange(minutes(100), minutes(200))
    rollouts = [
        rollout("d", committed=10, started=20, completed=30),
        rollout("a", committed=40, started=50, completed=120),
        rollout("b", committed=105, started=110, completed=150, failed=115, restored=140),
        rollout("c", committed=170, started=180, completed=None, failed=190),
        rollout("e", committed=195, started=200, completed=210),
    ]

    counted = figures(rollouts, period)

    assert counted.deployments == 2
    assert counted.deployments_per_day == pytest.approx(2 / (100 / 1440))
    assert counted.lead_time == Spread(
        timedelta(minutes=62.5), timedelta(minutes=76.5), timedelta(minutes=62.5)
    )
    assert (counted.rollouts_started, counted.rollouts_failed, counted.in_progress) == (2, 2, 1)
    assert counted.change_failure_rate == 1.0
    assert (counted.restored, counted.unrestored) == (1, 1)
    assert counted.time_to_restore == Spread(
        timedelta(minutes=25), timedelta(minutes=25), timedelta(minutes=25)
    )
    assert [
        (item.rollout.revision, item.completed_in_range, item.started_in_range)
        for item in behind_figures(rollouts, period)
    ] == [("a", True, False), ("b", True, True), ("c", False, True)]


def test_an_empty_range_is_refused_and_nothing_counts_as_nothing() -> None:
    with pytest.raises(ValueError, match="is not after since"):
        TimeRange(T0, T0)
    counted = figures([], TimeRange(T0, minutes(60)))
    assert (counted.deployments, counted.deployments_per_day) == (0, 0.0)
    assert counted.change_failure_rate is None
    assert counted.lead_time == counted.time_to_restore == Spread()
    # Every cluster Ready again on the revision before: restored, though never complete.
    rolled_back = rollout("f", committed=0, started=5, completed=None, failed=6, restored=9)
    again = figures([rolled_back], TimeRange(T0, minutes(60)))
    assert (again.deployments, again.in_progress, again.restored) == (0, 1, 1)
    assert again.time_to_restore.median == timedelta(minutes=3)
