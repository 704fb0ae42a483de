"""What state a rollout is in, since when, and when it was stalled (docs/concepts.md, "Rollouts").

Pure: the rollouts job (hub/rollouts/service.py) hands over the clusters' facts as of the DORA
job's refresh (`as_of`) with the stall-after; this module reads no clock or store. The rules,
first match wins: converged (final), failed, stalled, in_progress.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

__all__ = ["Facts", "Judged", "RolloutState", "Stall", "judge"]


class RolloutState(StrEnum):
    IN_PROGRESS = "in_progress"
    CONVERGED = "converged"
    FAILED = "failed"
    STALLED = "stalled"


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """A rollout as the DORA job judged it, facts before `as_of` only."""

    started_at: datetime
    # When each expected cluster reached it that did, in any order.
    reached_at: Sequence[datetime]
    converged_at: datetime | None
    failed_at: datetime | None


@dataclass(frozen=True, slots=True)
class Stall:
    started_at: datetime
    # None: still stalled.
    ended_at: datetime | None


@dataclass(frozen=True, slots=True)
class Judged:
    state: RolloutState
    since: datetime
    last_progress_at: datetime
    stalls: tuple[Stall, ...]


def judge(facts: Facts, *, as_of: datetime, stall_after: timedelta) -> Judged:
    """The rollout's state at `as_of` and its stalls until then."""
    if stall_after <= timedelta(0):
        raise ValueError(f"stall_after must be positive, not {stall_after}")
    # A cluster cannot reach a rollout before it starts; the start counts as progress.
    progress = sorted({facts.started_at, *(max(t, facts.started_at) for t in facts.reached_at)})
    # A failure ends its stalls (it is failed from then on); else convergence or the present.
    active_until = facts.failed_at or facts.converged_at or as_of
    stalls = []
    made = [moment for moment in progress if moment < active_until] or progress[:1]
    for moment, following in zip(made, [*made[1:], None], strict=True):
        stalled_at = moment + stall_after
        if following is not None:
            if stalled_at < following:
                stalls.append(Stall(stalled_at, following))
        elif facts.failed_at is not None or facts.converged_at is not None:
            if stalled_at < active_until:
                stalls.append(Stall(stalled_at, active_until))
        elif stalled_at <= as_of:
            stalls.append(Stall(stalled_at, None))
    last_progress_at = progress[-1]
    if facts.converged_at is not None:
        return Judged(RolloutState.CONVERGED, facts.converged_at, last_progress_at, tuple(stalls))
    if facts.failed_at is not None:
        return Judged(RolloutState.FAILED, facts.failed_at, last_progress_at, tuple(stalls))
    if stalls and stalls[-1].ended_at is None:
        return Judged(RolloutState.STALLED, stalls[-1].started_at, last_progress_at, tuple(stalls))
    since = stalls[-1].ended_at if stalls else facts.started_at
    assert since is not None
    return Judged(RolloutState.IN_PROGRESS, since, last_progress_at, tuple(stalls))
