"""Ancestry as positions on each branch's first-parent chain: how "is C an ancestor of A?"
becomes one indexed lookup.

Why positions, and how a force-push renumbers, is in docs/contributing.md ("Commit ancestry").
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


def reaches(commit: str, *, repository: str, floor: str, settled: str, found: str) -> str:
    """SQL: whether the harvested commit whose id is `commit`, or one of its ancestors, is
    `found`; for the gate and drift, which ask it of commits that positions alone do not place.

    Ancestors are walked through their parents (every harvested commit keeps them) within
    repository `repository`, down to generation `floor`: an ancestor always has a smaller
    generation, so nothing older can descend from what is looked for. The walk stops at a commit
    `settled`, one whose branch positions answer for all its ancestors. `settled` and `found`
    are conditions on the walked commit, `walk` (id, sha); each is asked of one commit at a
    time, so both are best scalar subqueries (an EXISTS may be planned as a hash of every
    candidate row, built per walk).
    """
    return f"""EXISTS (
        WITH RECURSIVE walk (id, sha, parents) AS (
            SELECT w.id, w.sha, w.parent_shas FROM git_commit w WHERE w.id = {commit}
            UNION
            SELECT p.id, p.sha, p.parent_shas
            FROM walk
            CROSS JOIN LATERAL unnest(walk.parents) AS parent (sha)
            -- LIMIT 1: a lookup by the unique (repository_id, sha), whatever the estimates.
            CROSS JOIN LATERAL (
                SELECT p.id, p.sha, p.parent_shas, p.generation FROM git_commit p
                WHERE p.repository_id = {repository} AND p.sha = parent.sha LIMIT 1
            ) AS p
            WHERE p.generation >= {floor} AND NOT ({settled})
        )
        SELECT FROM walk WHERE {found})"""  # noqa: S608 - composed from constants
