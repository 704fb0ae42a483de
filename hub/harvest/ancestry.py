"""Ancestry as positions on each branch's first-parent chain: how "is C an ancestor of A?"
becomes one indexed lookup.

The choice. A transitive-closure table answers the question directly but grows with the
square of the history (10,000 commits give up to 50 million pairs). Interval labels on a
spanning tree stay linear but need extra "exception" edges for every merge. What the fleet
asks is narrower: clusters apply branch heads, and a branch's heads follow its first-parent
chain (every merge made by a pull request or by the scheduler keeps the previous head as its
first parent). So each branch numbers its first-parent chain from the root: 0, 1, 2, ...
Every other commit of the branch (the side of a merge) gets the number of the first chain
commit that reaches it, the chain commit that "introduced" it. Then, for a chain commit A:

    C is an ancestor of A  <=>  C is a member of the branch with position <= position(A)

because the ancestors of chain commit n are exactly the commits introduced at 0..n. The
store keeps one `branch_commit` row per (branch, commit): linear in the history, and the
question is two primary-key lookups. New commits only append positions; a force-push or a
merge that drops the old head from the first-parent chain renumbers the branch from the
last chain commit the old and new chains share (`fork point`).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Member:
    sha: str
    position: int
    mainline: bool


def place_members(
    chain: Sequence[str], parents: Mapping[str, Sequence[str]], first_position: int
) -> list[Member]:
    """Positions for new branch members.

    `chain`: the new first-parent chain commits, oldest first, numbered from
    `first_position`; `parents`: the parents of every new member (the commits reachable from
    the newest chain commit and not from the fork point). Parents outside `parents` are
    already members and keep their position.
    """
    members: list[Member] = []
    placed: set[str] = set()
    for offset, sha in enumerate(chain):
        position = first_position + offset
        placed.add(sha)
        members.append(Member(sha, position, mainline=True))
        pending = list(parents[sha][1:])
        while pending:
            side = pending.pop()
            if side in placed or side not in parents:
                continue
            placed.add(side)
            members.append(Member(side, position, mainline=False))
            pending.extend(parents[side])
    return members


def generations(
    commits: Iterable[tuple[str, Sequence[str]]], known: Mapping[str, int]
) -> dict[str, int]:
    """Longest distance from a root, for commits given parents first; `known` holds the
    generations of parents harvested before."""
    result: dict[str, int] = {}
    for sha, parents in commits:
        result[sha] = 1 + max(
            (result[parent] if parent in result else known[parent] for parent in parents),
            default=-1,
        )
    return result
