"""The environment diff's pure comparison: which version is newer, the promotion order, and
the reason given for each difference."""

from datetime import UTC, datetime
from typing import Any

import pytest

from hub.envdiff.compare import (
    CellState,
    Deployed,
    Difference,
    DifferenceKind,
    Reason,
    Side,
    cell_state,
    differences,
    newer,
    promotion_order,
)

IN_SYNC = Deployed(clusters=2, in_sync=2)


def side(environment: str, version: str | None = "1.0.0", **values: Any) -> Side:
    return Side(environment=environment, assigned=True, version=version, **values)


def reasons(found: list[Difference]) -> list[tuple[str, str | None]]:
    return [(item.reason.value, item.environment) for item in found]


@pytest.mark.parametrize(
    ("earlier", "later", "expected"),
    [
        ("1.1.0", "1.0.0", True),
        ("v1.10.0", "1.9.3", True),
        ("1.2", "1.2.0", False),
        ("1.2.0", "1.2.0-rc.1", True),
        ("1.2.0-rc.1", "1.2.0", False),
        ("1.0.0", "1.1.0", False),
    ],
)
def test_dotted_versions_compare_numerically(earlier: str, later: str, expected: bool) -> None:
    assert newer(side("dev", earlier), side("stage", later)) is expected


def test_versions_that_are_no_numbers_compare_by_when_their_manifests_were_committed() -> None:
    monday, tuesday = datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 17, tzinfo=UTC)

    assert newer(
        side("dev", "build-b", version_since=tuesday), side("s", "build-a", version_since=monday)
    )
    assert not newer(
        side("dev", "build-a", version_since=monday), side("s", "build-b", version_since=tuesday)
    )
    assert newer(side("dev", "build-b"), side("stage", "build-a")) is None
    assert newer(side("dev", None), side("stage", "1.0.0")) is None


def test_the_declared_order_wins_only_when_every_environment_has_one() -> None:
    declared = {"dev": 0, "stage": 1, "prod": 2}

    assert promotion_order(["prod", "dev", "stage"], declared) == ["dev", "stage", "prod"]
    assert promotion_order(["prod", "dev"], declared | {"prod": None}) == ["prod", "dev"]


def test_each_environment_is_compared_with_the_one_before_it_in_promotion_order() -> None:
    sides = [side("prod", "1.0.0"), side("dev", "1.2.0"), side("stage", "1.1.0")]

    found = differences(sides, ["dev", "stage", "prod"])

    assert [(d.reason, d.environment, d.compared_with) for d in found] == [
        (Reason.AWAITING_PROMOTION, "stage", "dev"),
        (Reason.AWAITING_PROMOTION, "prod", "stage"),
    ]
    assert found[0].detail == "1.2.0 has yet to reach stage (dev: 1.2.0; stage: 1.1.0)"


def test_a_later_environment_ahead_of_an_earlier_one_has_diverged() -> None:
    found = differences([side("dev", "1.0.0"), side("stage", "1.0.1")], ["dev", "stage"])

    assert reasons(found) == [("diverged", "stage")]
    assert found[0].detail == "stage is not behind dev (dev: 1.0.0; stage: 1.0.1)"


def test_a_pin_explains_the_difference_whichever_side_has_it() -> None:
    pinned = side("stage", None, pinned_ref="refs/tags/v1.0.0")

    found = differences([side("dev", "1.1.0"), pinned], ["dev", "stage"])

    assert reasons(found) == [("pinned", "stage")]
    assert found[0].detail == (
        "stage follows a fixed revision (dev: 1.1.0; stage: pinned to refs/tags/v1.0.0)"
    )
    assert differences([pinned, pinned], ["dev", "stage"]) == []


def test_config_keys_that_differ_carry_every_value_and_missing_ones_as_none() -> None:
    dev = side("dev", config={"ENVIRONMENT": "Dev", "REGION": "East US", "SAME": "x"})
    stage = side("stage", config={"ENVIRONMENT": "Stage", "SAME": "x"})

    found = differences([dev, stage], ["dev", "stage"])
    ignoring = differences([dev, stage], ["dev", "stage"], frozenset({"ENVIRONMENT"}))

    assert [(d.kind, d.key, d.values) for d in found] == [
        (DifferenceKind.CONFIG, "ENVIRONMENT", {"dev": "Dev", "stage": "Stage"}),
        (DifferenceKind.CONFIG, "REGION", {"dev": "East US", "stage": None}),
    ]
    assert found[1].detail == "dev: 'East US', stage: (missing)"
    assert [d.key for d in ignoring] == ["REGION"]


def test_an_environment_without_the_assignment_is_named_and_not_compared() -> None:
    missing = Side(environment="stage", assigned=False)

    found = differences([side("dev", "1.1.0"), missing, side("prod")], ["dev", "stage", "prod"])

    assert reasons(found) == [("not_assigned", "stage"), ("awaiting_promotion", "prod")]
    assert found[0].detail == "not assigned in stage (only in dev, prod)"
    assert found[1].compared_with == "dev"


def test_failing_clusters_come_before_drifted_ones_and_say_why() -> None:
    failing = Deployed(
        clusters=3, in_sync=1, failing=1, drifted=1, failure="kustomize build failed"
    )
    behind = Deployed(clusters=2, in_sync=1, drifted=1, other_versions=("1.0.0",))
    live = Deployed(clusters=1, drifted=1, live_drift=1)

    found = differences(
        [
            side("dev", "1.1.0", deployed=failing),
            side("stage", "1.1.0", deployed=behind),
            side("prod", "1.1.0", deployed=live),
        ],
        ["dev", "stage", "prod"],
    )

    assert reasons(found) == [("failed", "dev"), ("drifted", "stage"), ("drifted", "prod")]
    assert [d.detail for d in found] == [
        "1 of 3 clusters in dev failing: kustomize build failed",
        "1 of 2 clusters in stage drifted (running 1.0.0 instead of 1.1.0)",
        "1 of 1 cluster in prod drifted (1 with live drift)",
    ]


def test_identical_environments_have_no_differences() -> None:
    config = {"ENVIRONMENT": "Stage"}
    same = [side(name, "1.0.0", config=config, deployed=IN_SYNC) for name in ("stage", "prod")]

    assert differences(same, ["stage", "prod"]) == []
    assert cell_state(same[0]) is CellState.IN_SYNC


def test_a_cell_says_in_a_word_what_its_clusters_do() -> None:
    assert cell_state(Side("dev", assigned=False)) is CellState.NOT_ASSIGNED
    assert cell_state(side("dev")) is CellState.NO_CLUSTERS
    assert cell_state(side("dev", deployed=Deployed(clusters=2, in_sync=1, not_reporting=1))) is (
        CellState.NOT_REPORTING
    )
    assert cell_state(side("dev", deployed=Deployed(clusters=1, failing=1))) is CellState.FAILING
