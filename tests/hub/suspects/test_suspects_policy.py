"""The suspects' statistics: counts in, verdicts out (hub/suspects/policy.py)."""

from datetime import UTC, datetime, timedelta

import pytest
from scipy.stats import fisher_exact

from hub.suspects.policy import (
    Answer,
    Counted,
    Counts,
    Regressed,
    Regression,
    ScopeFacts,
    Target,
    Verdict,
    count,
    judge,
    score,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
W = timedelta(minutes=15)


def counted(
    revision: str,
    counts: Counts,
    regressed: list[str] | None = None,
    workload: str | None = None,
) -> Counted:
    """A target with these counts; its regressed clusters default to its own names."""
    names = regressed or [f"{revision}-{n}" for n in range(counts.exposed_regressed)]
    return Counted(
        target=Target("prod", workload, revision),
        counts=counts,
        regressed=tuple(Regressed(name, T0, T0, "HealthCheckFailed") for name in names),
        first_applied_at=T0,
        last_applied_at=T0,
    )


def test_the_score_is_the_smoothed_relative_risk_and_fisher_one_sided() -> None:
    counts = Counts(exposed=30, exposed_regressed=3, control=170, control_regressed=0)
    relative_risk, p_value = score(counts)
    assert relative_risk == pytest.approx((4 / 31) / (1 / 171))
    assert p_value == pytest.approx(fisher_exact([[3, 27], [0, 170]], alternative="greater").pvalue)
    assert p_value < 0.01


def test_a_change_that_breaks_a_tenth_of_its_clusters_is_the_only_suspect() -> None:
    bad = counted("bad", Counts(30, 3, 170, 0))
    good = counted("good", Counts(40, 0, 160, 3))
    answer, judged = judge([good, bad], min_regressions=3, window=W)
    assert answer is Answer.SUSPECTS
    assert [(j.counted.target.revision, j.verdict) for j in judged] == [
        ("bad", Verdict.SUSPECT),
        ("good", Verdict.NOT_SUSPECT),
    ]
    assert judged[0].reasons == (("HealthCheckFailed", 3),)
    assert judged[0].explanation.startswith(
        "3 of 30 (10%) exposed and 0 of 170 (0%) control cluster(s) regressed within 15m: "
    )


def test_too_few_regressions_or_too_weak_a_test_make_no_suspect() -> None:
    # Two regressions: under the minimum, however strong.
    few = counted("few", Counts(10, 2, 190, 0))
    # Three of thirty against none of thirty: p = 0.12.
    weak = counted("weak", Counts(30, 3, 30, 0))
    answer, judged = judge([few, weak], min_regressions=3, window=W)
    assert answer is Answer.NONE
    assert {j.verdict for j in judged} == {Verdict.NOT_SUSPECT}
    # The minimum is a setting.
    assert judge([few], min_regressions=2, window=W)[0] is Answer.SUSPECTS


def test_a_control_group_that_regressed_too_is_inconclusive() -> None:
    everywhere = counted("everywhere", Counts(30, 20, 170, 40))
    answer, judged = judge([everywhere], min_regressions=3, window=W)
    assert answer is Answer.INCONCLUSIVE
    assert judged[0].verdict is Verdict.INCONCLUSIVE
    assert "the control group regressed as well (24%)" in judged[0].explanation


def test_three_unrelated_scoring_changes_are_a_fleet_wide_incident() -> None:
    three = [counted(name, Counts(30, 4, 170, 0)) for name in ("a", "b", "c")]
    answer, judged = judge(three, min_regressions=3, window=W)
    assert answer is Answer.INCONCLUSIVE
    assert {j.verdict for j in judged} == {Verdict.INCONCLUSIVE}
    assert "3 unrelated changes score at once" in judged[0].explanation


def test_changes_that_share_their_regressed_clusters_are_one_incident() -> None:
    shared = ["x-1", "x-2", "x-3", "x-4"]
    related = [counted(name, Counts(30, 4, 170, 0), regressed=shared) for name in ("a", "b", "c")]
    answer, judged = judge(related, min_regressions=3, window=W)
    assert answer is Answer.SUSPECTS
    assert {j.verdict for j in judged} == {Verdict.SUSPECT}


def test_counting_exposed_and_control_clusters_within_the_window() -> None:
    facts = ScopeFacts(
        environment="prod",
        workload=None,
        clusters=5,
        regressions={
            # Within W of applying: counts.
            "a": [Regression(T0 + timedelta(minutes=14), "HealthCheckFailed")],
            # Past W: does not.
            "b": [Regression(T0 + timedelta(minutes=16), "HealthCheckFailed")],
            # A control cluster regressing in the span (first apply to last apply + W).
            "d": [Regression(T0 + timedelta(minutes=20), "OOMKilled")],
            # Before the span: not counted.
            "e": [Regression(T0 - timedelta(minutes=1), "OOMKilled")],
        },
        applied={"c1": {"a": T0, "b": T0, "c": T0 + timedelta(minutes=10)}},
    )
    result = count(facts, "c1", W)
    assert result.counts == Counts(exposed=3, exposed_regressed=1, control=2, control_regressed=1)
    assert [item.cluster for item in result.regressed] == ["a"]
    assert result.last_applied_at == T0 + timedelta(minutes=10)


def test_impossible_counts_and_settings_are_refused() -> None:
    with pytest.raises(ValueError, match=r"exposed_regressed: must be within 0\.\.3"):
        Counts(3, 4, 10, 0)
    with pytest.raises(ValueError, match="min_regressions: must be at least 1"):
        judge([], min_regressions=0, window=W)
