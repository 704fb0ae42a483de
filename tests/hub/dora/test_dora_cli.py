"""`fleetmark dora` against a hub served on a real port, over the platform history of
tests/hub/dora_history.py: a table per environment for people, JSON for scripts."""

import json
from dataclasses import dataclass
from datetime import timedelta

import pytest
from click.testing import Result

from tests.hub.conftest import ServedFleet, words
from tests.hub.dora_history import (
    LATE_CLUSTER,
    PLATFORM_CLUSTERS,
    Timeline,
    commit_platform,
    play_platform,
    refresh_dora,
)
from tests.hub.harvest import scenario


@dataclass(frozen=True)
class Served:
    live: ServedFleet
    timeline: Timeline


@pytest.fixture
async def served(served_fleet: ServedFleet) -> Served:
    """The platform timeline played up to B+180."""
    live = served_fleet
    timeline = Timeline(live.clock, live.clock.now)
    clusters = {**PLATFORM_CLUSTERS, LATE_CLUSTER[0]: LATE_CLUSTER[1]}
    heads = scenario.build_platform(live.platform, live.app.url)
    scenario.build_app(live.app)
    commits = commit_platform(live.platform, timeline)
    await live.start((name, "dev", kind) for name, kind in clusters.items())
    async with live.clusters() as simulated:
        for name in PLATFORM_CLUSTERS:
            simulated[name].run_platform(heads["dev"])
            await simulated[name].report()
        await play_platform(timeline, simulated, commits, simulated[LATE_CLUSTER[0]])
    timeline.go(180)
    await refresh_dora(live.sessions, timeline.clock.now)
    return Served(live, timeline)


async def fleetmark(served: Served, *args: str) -> Result:
    return await served.live.fleetmark("dora", *args)


async def test_a_table_per_environment_and_json_for_scripts(served: Served) -> None:
    since = served.timeline.at(5)
    window = ["--since", since.isoformat(), "--until", (since + timedelta(days=1)).isoformat()]

    table = await fleetmark(served, *window)
    as_json = await fleetmark(served, "--environment", "dev", *window, "--output", "json")

    assert table.exit_code == 0, table.output
    shown = words(table.stdout)
    assert "rolled up 0s ago" in shown
    assert "dev: platform commits, 2026-11-22 12:07:30 to 2026-11-23 12:07:30" in shown
    assert "deployments 3 (3.00 per day)" in shown
    # 900, 2100 and 1300 seconds.
    assert "lead time median 15m · p90 35m · mean 21m40s" in shown
    assert "change failure rate 33% (1 of 3 rollouts failed)" in shown
    assert "time to restore median 30m · p90 30m · mean 30m (1 restored)" in shown
    assert "rollouts in progress 0" in shown
    assert "stage: platform commits" in shown
    stage = "deployments 0 (0.00 per day) lead time - change failure rate - (no rollout started)"
    assert stage in shown
    assert as_json.exit_code == 0, as_json.output
    body = json.loads(as_json.stdout)
    [dev] = body["environments"]
    assert (dev["environment"], dev["deployments"], dev["change_failure_rate"]) == (
        "dev",
        3,
        pytest.approx(1 / 3),
    )
    assert dev["lead_time"] == {
        "median_seconds": 900.0,
        "p90_seconds": 2100.0,
        "mean_seconds": 1300.0,
    }


async def test_a_workload_and_refusals(served: Served) -> None:
    since = served.timeline.at(5).isoformat()

    unknown = await fleetmark(served, "-e", "qa")
    backwards = await fleetmark(served, "--since", since, "--until", "2026-11-22")
    not_a_time = await fleetmark(served, "--since", "last tuesday")
    no_workload = await fleetmark(served, "--workload", "hello-world-app", "-o", "json")

    assert unknown.exit_code == 2
    assert "error: environment 'qa' is unknown (known: dev, stage) (HTTP 404)" in words(
        unknown.stderr
    )
    assert backwards.exit_code == 2
    assert "error: until: 2026-11-22T00:00:00+00:00 is not after since" in words(backwards.stderr)
    assert not_a_time.exit_code == 2
    assert "error: --since: 'last tuesday' is neither a time" in words(not_a_time.stderr)
    # The workload is assigned in dev and stage, but no cluster here runs it.
    assert no_workload.exit_code == 0, no_workload.output
    body = json.loads(no_workload.stdout)
    assert body["subject"] == "workload_versions"
    assert [item["rollouts_started"] for item in body["environments"]] == [0, 0]
