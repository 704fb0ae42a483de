"""Validity ranges: turning what each commit says into rows that change only when it changes.

A revision is valid from the chain commit where a folder started to say something until
(excluding) the chain commit where it said something else, or was removed. A commit that
leaves a folder as it was adds nothing, so storage grows with changes, not with commits.
"""

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(slots=True)
class NewRevision(Generic[K, V]):
    key: K
    values: V
    valid_from: str
    valid_until: str | None = None


@dataclass(frozen=True, slots=True)
class OpenRevision(Generic[V]):
    """A revision already stored with no end yet."""

    id: int
    values: V


@dataclass(slots=True)
class RangeChanges(Generic[K, V]):
    new: list[NewRevision[K, V]]
    # (stored revision id, the commit it ends at)
    closed: list[tuple[int, str]]


def track(
    stored: Mapping[K, OpenRevision[V]],
    steps: Sequence[tuple[str, Mapping[K, V | None]]],
) -> RangeChanges[K, V]:
    """Apply, commit by commit (oldest first), what changed: a value, or None for removed."""
    current: dict[K, OpenRevision[V] | NewRevision[K, V]] = dict(stored)
    changes: RangeChanges[K, V] = RangeChanges(new=[], closed=[])
    for commit, observed in steps:
        for key, values in observed.items():
            previous = current.get(key)
            if previous is None and values is None:
                continue
            if previous is not None and values is not None and previous.values == values:
                continue
            if isinstance(previous, OpenRevision):
                changes.closed.append((previous.id, commit))
            elif previous is not None:
                previous.valid_until = commit
            if values is None:
                del current[key]
            else:
                revision = NewRevision(key, values, valid_from=commit)
                changes.new.append(revision)
                current[key] = revision
    return changes
