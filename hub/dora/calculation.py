"""DORA figures from rollouts: the pure core of the DORA queries.

The store's `dora_rollout` (migration 0008_dora) and `dora_rolled_up` (0020) give one row per
rollout; this module takes those rows and a time range and returns the figures, as
docs/concepts.md ("DORA metrics") defines them. Nothing here reads the store or the clock.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = [
    "Counted",
    "Figures",
    "Rollout",
    "Spread",
    "TimeRange",
    "behind_figures",
    "figures",
    "percentile",
]

_DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class TimeRange:
    """[since, until): what the figures are about."""

    since: datetime
    until: datetime

    def __post_init__(self) -> None:
        if self.until <= self.since:
            raise ValueError(f"until {self.until.isoformat()} is not after since {self.since}")

    def __contains__(self, moment: object) -> bool:
        return isinstance(moment, datetime) and self.since <= moment < self.until

    @property
    def days(self) -> float:
        return (self.until - self.since) / _DAY


@dataclass(frozen=True, slots=True)
class Rollout:
    """A row of `dora_rollout` or `dora_rolled_up`."""

    environment: str
    environment_position: int | None
    # Of a platform commit's branch; None for a workload version.
    repository: str | None
    branch: str | None
    # The commit sha, or the version.
    revision: str
    # The commit that brought the revision: the platform commit, or the first app commit
    # that carried the version.
    commit_sha: str
    committed_at: datetime
    started_at: datetime
    expected_clusters: int
    reached_clusters: int
    completed_at: datetime | None
    failed_at: datetime | None
    failed_clusters: int
    failed_cluster: str | None
    failure_reason: str | None
    failure_message: str | None
    restored_at: datetime | None

    @property
    def lead_time(self) -> timedelta | None:
        return None if self.completed_at is None else self.completed_at - self.committed_at

    @property
    def time_to_restore(self) -> timedelta | None:
        if self.failed_at is None or self.restored_at is None:
            return None
        return self.restored_at - self.failed_at


@dataclass(frozen=True, slots=True)
class Spread:
    """Median, 90th percentile and mean of some durations; None each when there are none."""

    median: timedelta | None = None
    p90: timedelta | None = None
    mean: timedelta | None = None

    @classmethod
    def of(cls, durations: Iterable[timedelta]) -> "Spread":
        seconds = sorted(duration.total_seconds() for duration in durations)
        if not seconds:
            return cls()
        return cls(
            median=timedelta(seconds=percentile(seconds, 50)),
            p90=timedelta(seconds=percentile(seconds, 90)),
            mean=timedelta(seconds=math.fsum(seconds) / len(seconds)),
        )


@dataclass(frozen=True, slots=True)
class Figures:
    deployments: int
    deployments_per_day: float
    lead_time: Spread
    rollouts_started: int
    rollouts_failed: int
    # Started in the range and not completed by its end.
    in_progress: int
    # None without rollouts started in the range.
    change_failure_rate: float | None
    restored: int
    unrestored: int
    time_to_restore: Spread


def percentile(ordered: Sequence[float], percent: float) -> float:
    """The `percent`-th percentile of sorted values, interpolating linearly between ranks."""
    if not ordered:
        raise ValueError("no values")
    rank = percent / 100 * (len(ordered) - 1)
    below = math.floor(rank)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (rank - below)


def _completed_in(rollout: Rollout, period: TimeRange) -> bool:
    return rollout.completed_at in period


def _started_in(rollout: Rollout, period: TimeRange) -> bool:
    return rollout.started_at in period


def figures(rollouts: Iterable[Rollout], period: TimeRange) -> Figures:
    """The DORA figures of one environment (or one workload in it) over `period`."""
    listed = list(rollouts)
    deployed = [rollout for rollout in listed if _completed_in(rollout, period)]
    started = [rollout for rollout in listed if _started_in(rollout, period)]
    failed = [rollout for rollout in started if rollout.failed_at is not None]
    restore_times = [
        restore for rollout in failed if (restore := rollout.time_to_restore) is not None
    ]
    return Figures(
        deployments=len(deployed),
        deployments_per_day=len(deployed) / period.days,
        lead_time=Spread.of(
            lead_time for rollout in deployed if (lead_time := rollout.lead_time) is not None
        ),
        rollouts_started=len(started),
        rollouts_failed=len(failed),
        in_progress=sum(1 for rollout in started if not _completed_in(rollout, period)),
        change_failure_rate=len(failed) / len(started) if started else None,
        restored=len(restore_times),
        unrestored=len(failed) - len(restore_times),
        time_to_restore=Spread.of(restore_times),
    )


@dataclass(frozen=True, slots=True)
class Counted:
    """A rollout behind the figures of a range, and which figures it counts in."""

    rollout: Rollout
    # Deployment frequency and lead time.
    completed_in_range: bool
    # Change failure rate and time to restore.
    started_in_range: bool


def behind_figures(rollouts: Iterable[Rollout], period: TimeRange) -> list[Counted]:
    """The rollouts the figures of `period` count, in the order given."""
    counted = (
        Counted(rollout, _completed_in(rollout, period), _started_in(rollout, period))
        for rollout in rollouts
    )
    return [item for item in counted if item.completed_in_range or item.started_in_range]
