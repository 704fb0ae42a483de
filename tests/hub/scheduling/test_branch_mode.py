"""Mode `branch`: each change is proposed on a deployment branch for a pull request, the
environment branch moves only when that is merged, and a change is never proposed twice."""

from tests.hub.scheduling.conftest import Schedule
from tests.hub.scheduling.fleet import ControlPlane, Platform
from tests.scheduler_core import scenario
from tests.support import FakeClock


async def test_a_change_is_proposed_on_a_deployment_branch(
    schedule: Schedule, platform: Platform, clock: FakeClock
) -> None:
    outcome = await schedule("dev", mode="branch")

    expected = f"deployment/{clock.now:%Y%m%d-%H%M%S}-dev"
    assert outcome.branch == expected
    assert platform.branches() == {expected: outcome.commit}
    assert "drone/hello-world-app-functional-test/reconciler.yaml" in platform.files(expected)


async def test_the_same_change_is_not_proposed_twice(
    schedule: Schedule, platform: Platform
) -> None:
    first = await schedule("dev", mode="branch")

    again = await schedule("dev", mode="branch")

    assert again.commit is None
    assert again.already_proposed == first.branch
    assert platform.branches().keys() == {first.branch}


async def test_a_proposal_builds_on_the_merged_environment_branch(
    schedule: Schedule,
    control_plane: ControlPlane,
    platform: Platform,
) -> None:
    first = await schedule("dev", mode="branch")
    assert first.commit is not None
    platform.git("update-ref", "refs/heads/dev", first.commit)  # the pull request merged
    merged = await schedule("dev", mode="branch")
    west_us = scenario.config_map(
        "west-us-config", scenario.WEST_US, {"REGION": "West US 2", "DATABASE_URL": "mysql://w"}
    )
    control_plane.commit("dev", {"cluster-types/west-us/west-us-config.yaml": west_us})

    second = await schedule("dev", mode="branch")

    assert merged.commit is None
    assert merged.already_proposed is None
    assert merged.render == "incremental"
    assert second.branch is not None
    assert second.branch != first.branch
    assert platform.head("dev") == first.commit
    assert platform.git("rev-parse", f"{second.branch}^") == first.commit
    assert platform.changed("dev", second.branch) == [
        "large/hello-world-app-performance-test/platform-config.yaml"
    ]
