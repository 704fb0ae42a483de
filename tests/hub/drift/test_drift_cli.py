"""`fleetmark drift` against a hub served on a real port: the table with short evidence and its
summary line, JSON for scripts, the history, and what the hub refuses."""

import csv
import io
import json
from dataclasses import dataclass

import pytest
from click.testing import Result

from hub.client.text import format_duration
from tests.hub.conftest import ServedFleet, words
from tests.hub.drifting import committed_at, evaluate
from tests.hub.harvest import scenario

CLUSTERS = [
    ("drone-dev", "dev", "drone"),
    ("large-dev", "dev", "large"),
    ("drone-stage", "stage", "drone"),
]


@dataclass(frozen=True)
class Served:
    live: ServedFleet
    # How long ago the first commit the dev clusters miss was made, and when the job ran.
    behind_for: str
    judged_at: str


@pytest.fixture
async def served(served_fleet: ServedFleet) -> Served:
    """The scenario's repositories harvested with one more dev commit; drone-dev still runs the
    previous one, large-dev failed to sync the new one, drone-stage runs stage's head; judged
    by the drift job five minutes after the reports."""
    live, clock = served_fleet, served_fleet.clock
    heads = scenario.build_platform(live.platform, live.app.url)
    scenario.build_app(live.app)
    newer = live.platform.commit("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await live.start(CLUSTERS)
    async with live.clusters() as clusters:
        clusters["drone-dev"].run_platform(heads["dev"])
        clusters["large-dev"].run_platform(
            heads["dev"], attempted=newer, ready=False, reason="SyncFailed"
        )
        clusters["drone-stage"].run_platform(heads["stage"])
        for cluster in clusters.values():
            await cluster.report()
    clock.advance(minutes=5)
    async with live.sessions() as session:
        await evaluate(session, clock)
    missed = committed_at(live.platform, newer)
    return Served(
        live,
        behind_for=format_duration(clock.now - missed),
        judged_at=f"{clock.now:%Y-%m-%d %H:%M:%S}",
    )


async def fleetmark(served: Served, *args: str) -> Result:
    # Wide enough that no table row wraps: each row reads as one line.
    return await served.live.fleetmark("drift", *args, columns=220)


async def test_the_drift_table_and_its_summary(served: Served) -> None:
    result = await fleetmark(served)

    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: words(line) for line in result.stdout.splitlines() if line.strip()}
    behind = f"1 commit behind for {served.behind_for}"
    assert lines["drone-dev"] == (
        f"drone-dev dev/drone Kustomization/flux-system/flux-system {behind} 0s ago"
    )
    assert lines["large-dev"] == (
        f"large-dev dev/large Application/argocd/platform {behind}; failing: SyncFailed 0s ago"
    )
    assert "drone-stage" not in lines
    assert "page 1 of 1 · rows 1-2 of 2 · last page" in words(result.stdout)
    assert "2 drifted objects in 2 clusters · behind 2, failing 1 · judged 0s ago" in words(
        result.stdout
    )


async def test_json_for_scripts_with_filters(served: Served) -> None:
    failing = await fleetmark(served, "--reason", "failing", "--output", "json")
    everything = await fleetmark(served, "--all", "-e", "stage", "-o", "json")

    assert failing.exit_code == 0, failing.output
    body = json.loads(failing.stdout)
    assert body["total"] == 1
    [item] = body["items"]
    assert item["cluster"] == "large-dev"
    assert [reason["reason"] for reason in item["reasons"]] == ["behind", "failing"]
    assert item["reasons"][1]["reconciler_reason"] == "SyncFailed"
    assert everything.exit_code == 0, everything.output
    stage = json.loads(everything.stdout)
    assert [(item["cluster"], item["drifted"]) for item in stage["items"]] == [
        ("drone-stage", False)
    ]


async def test_the_history(served: Served) -> None:
    table = await fleetmark(served, "--history")
    objects = await fleetmark(served, "--history", "--objects", "--open", "-o", "json")

    assert table.exit_code == 0, table.output
    lines = {line.split()[0]: words(line) for line in table.stdout.splitlines() if line.strip()}
    assert lines["drone-dev"] == (
        f"drone-dev dev/drone - 0s 1 drifted {served.judged_at} to open (0s: behind)"
    )
    assert lines["large-dev"] == (
        f"large-dev dev/large - 0s 1 drifted {served.judged_at} to open (0s: behind, failing)"
    )
    assert "page 1 of 1 · clusters 1-2 of 2 · last page" in words(table.stdout)
    assert objects.exit_code == 0, objects.output
    body = json.loads(objects.stdout)
    assert body["level"] == "object"
    assert [(item["cluster"], item["object"]["name"]) for item in body["items"]] == [
        ("drone-dev", "flux-system"),
        ("large-dev", "platform"),
    ]


async def test_what_the_hub_refuses_ends_the_command_with_2(served: Served) -> None:
    unknown = await fleetmark(served, "-e", "qa")
    bad_reason = await fleetmark(served, "--reason", "sideways")
    misplaced = await fleetmark(served, "--history", "--reason", "behind")

    assert unknown.exit_code == 2
    assert "error: environment 'qa' is unknown (known: dev, stage) (HTTP 404)" in words(
        unknown.stderr
    )
    assert bad_reason.exit_code == 2
    assert "'sideways' is not one of" in words(bad_reason.output)
    assert misplaced.exit_code == 2
    assert "error: --reason does not apply with --history" in words(misplaced.stderr)


async def test_exit_code_says_whether_anything_is_drifted(served: Served) -> None:
    drifted = await fleetmark(served, "--exit-code")
    in_sync = await fleetmark(served, "-e", "stage", "--exit-code", "-o", "json")
    without = await fleetmark(served)
    unknown = await fleetmark(served, "-e", "qa", "--exit-code")
    with_history = await fleetmark(served, "--history", "--exit-code")

    assert drifted.exit_code == 1, drifted.output
    assert "2 drifted objects in 2 clusters" in words(drifted.stdout)
    assert in_sync.exit_code == 0, in_sync.output
    assert json.loads(in_sync.stdout)["summary"]["drifted_objects"] == 0
    assert without.exit_code == 0
    assert unknown.exit_code == 2
    assert "environment 'qa' is unknown" in unknown.stderr
    assert with_history.exit_code == 2
    assert "error: --exit-code does not apply with --history" in words(with_history.stderr)


async def test_csv_for_scripts(served: Served) -> None:
    result = await fleetmark(served, "--output", "csv")
    history = await fleetmark(served, "--history", "-o", "csv")

    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(row["cluster"], row["env/type"], row["reasons"]) for row in rows] == [
        ("drone-dev", "dev/drone", f"1 commit behind for {served.behind_for}"),
        ("large-dev", "dev/large", f"1 commit behind for {served.behind_for}; failing: SyncFailed"),
    ]
    # A time, not "0s ago": a script compares it.
    assert {row["drifted since"] for row in rows} == {served.judged_at.replace(" ", "T") + "+00:00"}
    assert history.exit_code == 0, history.output
    assert [row["cluster"] for row in csv.DictReader(io.StringIO(history.stdout))] == [
        "drone-dev",
        "large-dev",
    ]


async def test_status_counts_drift_as_drift_does(served: Served) -> None:
    drift = await fleetmark(served, "-o", "json")
    status = await served.live.fleetmark("status", "-o", "json")
    table = await served.live.fleetmark("status", columns=220)

    summary = json.loads(drift.stdout)["summary"]
    totals = json.loads(status.stdout)["totals"]
    assert totals["drift_total"] == summary["drifted_objects"] == 2
    counts = ("drift_behind", "drift_failing", "drift_stale", "drift_live", "drift_other")
    assert [totals[name] for name in counts] == [2, 1, 0, 0, 0]
    assert "drifted behind failing stale live drift other" in words(table.stdout)
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines() if line.strip()}
    # The last six columns: drifted, behind, failing, stale, live drift, other.
    assert rows["all"][-6:] == ["2", "2", "1", "0", "0", "0"]
    assert rows["large-dev"][-6:] == ["1", "1", "1", "0", "0", "0"]
    assert rows["drone-stage"][-6:] == ["0", "0", "0", "0", "0", "0"]
