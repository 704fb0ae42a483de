"""Suspects: of the platform commits and workload versions applied in a period, those that
clusters regressed after more often than comparable clusters that had not applied them.

Pure: the suspects service hands over what the store found (which clusters applied what, when,
and when each turned not Ready) with the window W; this module counts and judges. The rules
(docs/suspects.md), per environment and scope (its platform branch, or one workload):

Counting (`count`), for a target T (a platform commit, or a workload version):
- a regression: one of a cluster's objects of the scope turning not Ready (Ready false after
  a report that was not), at its report's time;
- exposed: the clusters that applied or attempted T in the period, each from its first report
  of it (t); an exposed cluster regressed after T when it has a regression in [t, t + W];
- control: the scope's other clusters; T's span runs from the first exposed cluster's t to
  the last one's t + W, and a control cluster regressed when it has a regression in the span
  (a span at least as long as W: the control rate errs high, never low).

Judging (`judge`), for each target, with a exposed regressions of n_e exposed clusters and c
of n_c control clusters:
- score: the relative risk with +1 smoothing, ((a + 1) / (n_e + 1)) / ((c + 1) / (n_c + 1));
- p: Fisher's exact test, one-sided (exposed clusters regress more often), of
  [[a, n_e - a], [c, n_c - c]];
- T scores when a >= min_regressions, p < P_VALUE and score > 1;
- T is inconclusive when a >= min_regressions and the control rate c / n_c is at least
  CONTROL_RATE_HIGH: the clusters that had not applied it regressed as well;
- when three or more unrelated targets score (FLEET_WIDE), each that scores is inconclusive:
  a fleet-wide incident, not a change. Two targets are related when more than half of the
  clusters that regressed after the one with fewer regressed after the other too (the same
  regressions, seen after two changes applied together);
- otherwise a target that scores is a suspect; the others are not.
Ranked: suspects, then inconclusive, then the others; within each, by score, then p, then by
exposed regressions, then by name. The answer is `suspects` when one is, else `inconclusive`
when one is, else `none`.
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from hub.client.text import format_duration

__all__ = [
    "CONTROL_RATE_HIGH",
    "FLEET_WIDE",
    "P_VALUE",
    "Answer",
    "Counted",
    "Counts",
    "Judged",
    "Regressed",
    "Regression",
    "ScopeFacts",
    "Target",
    "Verdict",
    "answer",
    "count",
    "judge",
    "score",
]

# Fisher's exact test must give less than this for a target to score.
P_VALUE = 0.01
# A control group regressing this often (a fraction) leaves nothing to tell a change by.
CONTROL_RATE_HIGH = 0.05
# This many unrelated targets scoring at once: a fleet-wide incident.
FLEET_WIDE = 3
# The commonest reasons an answer names per target.
REASONS_NAMED = 3


@dataclass(frozen=True, slots=True)
class Target:
    """A platform commit (workload None; revision: its sha) or a workload version applied in
    an environment."""

    environment: str
    workload: str | None
    revision: str

    def __str__(self) -> str:
        if self.workload is None:
            return f"platform commit {self.revision[:12]}"
        return f"{self.workload} {self.revision}"


@dataclass(frozen=True, slots=True)
class Regression:
    at: datetime
    reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeFacts:
    """What the store found of one scope of an environment (its platform branch, or one
    workload) over the period and W after it."""

    environment: str
    # None: the platform branch.
    workload: str | None
    # How many clusters the scope has (those named below among them).
    clusters: int
    # Each cluster's regressions, in time order.
    regressions: Mapping[str, Sequence[Regression]]
    # Per revision applied in the period: when each cluster that did first applied (or
    # attempted) it.
    applied: Mapping[str, Mapping[str, datetime]]


@dataclass(frozen=True, slots=True)
class Counts:
    exposed: int
    exposed_regressed: int
    control: int
    control_regressed: int

    def __post_init__(self) -> None:
        if not 0 <= self.exposed_regressed <= self.exposed:
            raise ValueError(f"exposed_regressed: must be within 0..{self.exposed}")
        if not 0 <= self.control_regressed <= self.control:
            raise ValueError(f"control_regressed: must be within 0..{self.control}")

    @property
    def control_rate(self) -> float | None:
        return self.control_regressed / self.control if self.control else None


@dataclass(frozen=True, slots=True)
class Regressed:
    """An exposed cluster that regressed after the target."""

    cluster: str
    applied_at: datetime
    regressed_at: datetime
    reason: str | None


@dataclass(frozen=True, slots=True)
class Counted:
    target: Target
    counts: Counts
    # The exposed clusters that regressed, by name.
    regressed: tuple[Regressed, ...]
    first_applied_at: datetime
    last_applied_at: datetime


class Verdict(StrEnum):
    SUSPECT = "suspect"
    INCONCLUSIVE = "inconclusive"
    NOT_SUSPECT = "not_suspect"


@dataclass(frozen=True, slots=True)
class Judged:
    counted: Counted
    verdict: Verdict
    score: float
    p_value: float
    # Why, in one sentence.
    explanation: str
    # The commonest reasons the regressed clusters gave, with how many gave each.
    reasons: tuple[tuple[str, int], ...]


class Answer(StrEnum):
    SUSPECTS = "suspects"
    INCONCLUSIVE = "inconclusive"
    NONE = "none"


def _first(regressions: Sequence[Regression], start: datetime, end: datetime) -> Regression | None:
    return next((item for item in regressions if start <= item.at <= end), None)


def count(facts: ScopeFacts, revision: str, window: timedelta) -> Counted:
    """The exposed and control clusters of one revision applied in the period, and which of
    them regressed."""
    if window <= timedelta(0):
        raise ValueError(f"window: must be positive, got {window}")
    exposed = facts.applied[revision]
    if not exposed:
        raise ValueError(f"revision {revision!r}: no cluster applied it")
    regressed = []
    for cluster, applied_at in sorted(exposed.items()):
        found = _first(facts.regressions.get(cluster, ()), applied_at, applied_at + window)
        if found is not None:
            regressed.append(Regressed(cluster, applied_at, found.at, found.reason))
    first, last = min(exposed.values()), max(exposed.values())
    control_regressed = sum(
        1
        for cluster, regressions in facts.regressions.items()
        if cluster not in exposed and _first(regressions, first, last + window) is not None
    )
    return Counted(
        target=Target(facts.environment, facts.workload, revision),
        counts=Counts(
            len(exposed), len(regressed), facts.clusters - len(exposed), control_regressed
        ),
        regressed=tuple(regressed),
        first_applied_at=first,
        last_applied_at=last,
    )


def score(counts: Counts) -> tuple[float, float]:
    """The relative risk with +1 smoothing, and the one-sided p of Fisher's exact test."""
    # Imported here: scipy.stats takes seconds to import, and every hub process and command
    # would pay them at start-up for the one question that needs it.
    from scipy.stats import fisher_exact

    a, n_e = counts.exposed_regressed, counts.exposed
    c, n_c = counts.control_regressed, counts.control
    relative_risk = ((a + 1) / (n_e + 1)) / ((c + 1) / (n_c + 1))
    table = [[a, n_e - a], [c, n_c - c]]
    p_value = float(fisher_exact(table, alternative="greater").pvalue)
    return relative_risk, p_value


def _related(one: Counted, other: Counted) -> bool:
    mine = {item.cluster for item in one.regressed}
    theirs = {item.cluster for item in other.regressed}
    return 2 * len(mine & theirs) > min(len(mine), len(theirs))


def _unrelated_groups(scoring: Sequence[Counted]) -> int:
    """How many groups of related targets the scoring ones form (related: transitively)."""
    groups: list[list[Counted]] = []
    for counted in scoring:
        joined = [group for group in groups if any(_related(counted, g) for g in group)]
        merged = [counted] + [member for group in joined for member in group]
        groups = [group for group in groups if group not in joined] + [merged]
    return len(groups)


def _reasons(counted: Counted) -> tuple[tuple[str, int], ...]:
    tally = Counter(item.reason or "(no reason given)" for item in counted.regressed)
    return tuple(sorted(tally.items(), key=lambda pair: (-pair[1], pair[0]))[:REASONS_NAMED])


def _rate(regressed: int, of: int) -> str:
    return f"{regressed} of {of} ({regressed / of:.0%})" if of else "0 of 0"


def judge(
    counted: Iterable[Counted], *, min_regressions: int, window: timedelta
) -> tuple[Answer, list[Judged]]:
    """The verdict of every target, ranked, and the answer over them all."""
    if min_regressions < 1:
        raise ValueError(f"min_regressions: must be at least 1, got {min_regressions}")
    items = list(counted)
    scored = {item.target: score(item.counts) for item in items}

    def scores(item: Counted) -> bool:
        relative_risk, p_value = scored[item.target]
        enough = item.counts.exposed_regressed >= min_regressions
        return enough and p_value < P_VALUE and relative_risk > 1

    scoring = [item for item in items if scores(item)]
    fleet_wide = _unrelated_groups(scoring) >= FLEET_WIDE
    judged = []
    for item in items:
        counts = item.counts
        relative_risk, p_value = scored[item.target]
        exposed = _rate(counts.exposed_regressed, counts.exposed)
        control = _rate(counts.control_regressed, counts.control)
        rates = (
            f"{exposed} exposed and {control} control cluster(s) regressed within "
            f"{format_duration(window)}"
        )
        control_rate = counts.control_rate
        if counts.exposed_regressed >= min_regressions and (
            control_rate is not None and control_rate >= CONTROL_RATE_HIGH
        ):
            verdict = Verdict.INCONCLUSIVE
            why = f"the control group regressed as well ({control_rate:.0%}); {rates}"
        elif item in scoring and fleet_wide:
            verdict = Verdict.INCONCLUSIVE
            why = f"{len(scoring)} unrelated changes score at once (a fleet-wide incident); {rates}"
        elif item in scoring:
            verdict = Verdict.SUSPECT
            why = f"{rates}: {relative_risk:.1f} times the control rate (p = {p_value:.2g})"
        else:
            verdict = Verdict.NOT_SUSPECT
            why = rates
        judged.append(Judged(item, verdict, relative_risk, p_value, why, _reasons(item)))
    order = list(Verdict)
    judged.sort(
        key=lambda j: (
            order.index(j.verdict),
            -j.score,
            j.p_value,
            -j.counted.counts.exposed_regressed,
            j.counted.target.workload or "",
            j.counted.target.revision,
        )
    )
    return answer(judged), judged


def answer(judged: Sequence[Judged]) -> Answer:
    verdicts = {item.verdict for item in judged}
    if Verdict.SUSPECT in verdicts:
        return Answer.SUSPECTS
    if Verdict.INCONCLUSIVE in verdicts:
        return Answer.INCONCLUSIVE
    return Answer.NONE
