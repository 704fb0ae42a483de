"""How the environments of one diff row differ, and why (docs/concepts.md, "Environment diff").

Pure: the service hands over what each environment is meant to run and what its clusters run;
nothing here reads the store. A row is one workload on one cluster type, seen in each
compared environment.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from itertools import pairwise

__all__ = [
    "CellState",
    "Deployed",
    "Difference",
    "DifferenceKind",
    "Reason",
    "Side",
    "cell_state",
    "differences",
    "newer",
    "promotion_order",
]

_VERSION = re.compile(r"^[vV]?(\d+(?:\.\d+)*)(?:[-+~.]?(.*))?$")


class DifferenceKind(StrEnum):
    ASSIGNMENT = "assignment"
    VERSION = "version"
    CONFIG = "config"
    DEPLOYMENT = "deployment"


class Reason(StrEnum):
    NOT_ASSIGNED = "not_assigned"
    AWAITING_PROMOTION = "awaiting_promotion"
    PINNED = "pinned"
    DIVERGED = "diverged"
    CONFIG = "config"
    FAILED = "failed"
    DRIFTED = "drifted"


class CellState(StrEnum):
    """One environment of a row, in a word."""

    NOT_ASSIGNED = "not_assigned"
    NO_CLUSTERS = "no_clusters"
    FAILING = "failing"
    DRIFTED = "drifted"
    NOT_REPORTING = "not_reporting"
    IN_SYNC = "in_sync"


@dataclass(frozen=True, slots=True)
class Deployed:
    """What the clusters of an environment's cluster type run for one assignment."""

    clusters: int = 0
    in_sync: int = 0
    drifted: int = 0
    failing: int = 0
    live_drift: int = 0
    # Clusters of the cluster type that report no object following the assignment.
    not_reporting: int = 0
    # Applied versions (or commits, where no version is known) other than the desired one.
    other_versions: tuple[str, ...] = ()
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class Side:
    """One environment of a row: None-valued when the workload is not assigned there."""

    environment: str
    assigned: bool
    version: str | None = None
    pinned_ref: str | None = None
    # When the app commit that brought the current manifests was made.
    version_since: datetime | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    deployed: Deployed = field(default_factory=Deployed)


@dataclass(frozen=True, slots=True)
class Difference:
    kind: DifferenceKind
    reason: Reason
    detail: str
    # The environment the difference is about (None: about all of them, a config key).
    environment: str | None = None
    # For a version: the environment before it in promotion order it was compared with.
    compared_with: str | None = None
    key: str | None = None
    # For a config key: its value per environment that has the assignment (None: missing).
    values: dict[str, str | None] | None = None


def promotion_order(given: Sequence[str], positions: Mapping[str, int | None]) -> list[str]:
    """The declared promotion order when every compared environment has a position, else the
    order the caller gave: `diff dev stage prod` names the chain."""
    if all(positions.get(name) is not None for name in given):
        return sorted(given, key=lambda name: (positions[name], name))
    return list(given)


def _version_key(version: str) -> tuple[tuple[int, ...], int, str] | None:
    found = _VERSION.match(version.strip())
    if found is None:
        return None
    numbers = tuple(int(part) for part in found[1].split("."))
    # Trailing zeros do not make a version newer: 1.2 == 1.2.0.
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers = numbers[:-1]
    suffix = found[2] or ""
    # A release ranks above its pre-releases (`1.2.0-rc.1` < `1.2.0`).
    return numbers, 0 if suffix else 1, suffix


def newer(earlier: Side, later: Side) -> bool | None:
    """Whether `earlier` is meant to run a newer version than `later`; None: cannot tell."""
    if earlier.version is None or later.version is None:
        return None
    first, second = _version_key(earlier.version), _version_key(later.version)
    if first is not None and second is not None:
        return first > second
    if earlier.version_since is not None and later.version_since is not None:
        return earlier.version_since > later.version_since
    return None


def _shown(side: Side) -> str:
    if side.pinned_ref is not None:
        return f"pinned to {side.pinned_ref}"
    return side.version or "an unknown version"


def _version_difference(earlier: Side, later: Side) -> Difference | None:
    if (earlier.version, earlier.pinned_ref) == (later.version, later.pinned_ref):
        return None
    said = f"{earlier.environment}: {_shown(earlier)}; {later.environment}: {_shown(later)}"
    if earlier.pinned_ref is not None or later.pinned_ref is not None:
        pinned = later if later.pinned_ref is not None else earlier
        reason, detail = Reason.PINNED, f"{pinned.environment} follows a fixed revision ({said})"
    elif newer(earlier, later):
        reason = Reason.AWAITING_PROMOTION
        detail = f"{earlier.version} has yet to reach {later.environment} ({said})"
    else:
        reason = Reason.DIVERGED
        detail = f"{later.environment} is not behind {earlier.environment} ({said})"
    return Difference(
        DifferenceKind.VERSION,
        reason,
        detail,
        environment=pinned.environment if reason is Reason.PINNED else later.environment,
        compared_with=earlier.environment,
    )


def _config_differences(sides: Sequence[Side], ignored: frozenset[str]) -> list[Difference]:
    keys = sorted({key for side in sides for key in side.config} - ignored)
    found = []
    for key in keys:
        values = {side.environment: side.config.get(key) for side in sides}
        if len(set(values.values())) > 1:
            said = ", ".join(
                f"{name}: {'(missing)' if value is None else repr(value)}"
                for name, value in values.items()
            )
            found.append(
                Difference(DifferenceKind.CONFIG, Reason.CONFIG, said, key=key, values=values)
            )
    return found


def _deployment_difference(side: Side) -> Difference | None:
    deployed = side.deployed
    of = f"of {deployed.clusters} cluster{'s' if deployed.clusters != 1 else ''}"
    if deployed.failing:
        because = f": {deployed.failure}" if deployed.failure else ""
        return Difference(
            DifferenceKind.DEPLOYMENT,
            Reason.FAILED,
            f"{deployed.failing} {of} in {side.environment} failing{because}",
            environment=side.environment,
        )
    if deployed.drifted:
        runs = ", ".join(deployed.other_versions)
        what = [f"running {runs} instead of {_shown(side)}"] if runs else []
        if deployed.live_drift:
            what.append(f"{deployed.live_drift} with live drift")
        return Difference(
            DifferenceKind.DEPLOYMENT,
            Reason.DRIFTED,
            f"{deployed.drifted} {of} in {side.environment} drifted"
            + (f" ({'; '.join(what)})" if what else " (suspended)"),
            environment=side.environment,
        )
    return None


def differences(
    sides: Sequence[Side], order: Sequence[str], ignored_keys: frozenset[str] = frozenset()
) -> list[Difference]:
    """Every difference of a row; `sides` in the caller's order, `order` the promotion order."""
    assigned = [side for side in sides if side.assigned]
    found: list[Difference] = []
    if assigned and len(assigned) < len(sides):
        where = ", ".join(side.environment for side in assigned)
        found += [
            Difference(
                DifferenceKind.ASSIGNMENT,
                Reason.NOT_ASSIGNED,
                f"not assigned in {side.environment} (only in {where})",
                environment=side.environment,
            )
            for side in sides
            if not side.assigned
        ]
    by_name = {side.environment: side for side in assigned}
    chain = [by_name[name] for name in order if name in by_name]
    for earlier, later in pairwise(chain):
        if (difference := _version_difference(earlier, later)) is not None:
            found.append(difference)
    if len(assigned) > 1:
        found += _config_differences(assigned, ignored_keys)
    for side in assigned:
        if (difference := _deployment_difference(side)) is not None:
            found.append(difference)
    return found


def cell_state(side: Side) -> CellState:
    deployed = side.deployed
    if not side.assigned:
        return CellState.NOT_ASSIGNED
    if deployed.clusters == 0:
        return CellState.NO_CLUSTERS
    if deployed.failing:
        return CellState.FAILING
    if deployed.drifted:
        return CellState.DRIFTED
    if deployed.not_reporting:
        return CellState.NOT_REPORTING
    return CellState.IN_SYNC
