"""`fleetmark diff` against a hub served on a real port: the table (a column per environment,
desired → deployed, config keys that differ, why), JSON for scripts, and what the hub refuses."""

import json

import pytest
from click.testing import Result

from tests.hub.conftest import ServedFleet, serve_diff_scenario, words


@pytest.fixture
async def served(served_fleet: ServedFleet) -> ServedFleet:
    await serve_diff_scenario(served_fleet)
    return served_fleet


async def fleetmark(served: ServedFleet, *args: str) -> Result:
    # Wide enough that no cell is cut.
    return await served.fleetmark("diff", *args, columns=240)


async def test_the_table_shows_each_environment_side_by_side_and_why(served: ServedFleet) -> None:
    result = await fleetmark(served, "dev", "stage")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "workload" in line)
    assert header.split()[:5] == ["workload", "cluster", "type", "dev", "stage"]
    drone = words("\n".join(lines[lines.index(next(x for x in lines if "drone" in x)) :]))
    assert drone.startswith(
        "hello-world-app drone functional-test uat-test CLUSTER_NAME: Drone | - "
        "awaiting promotion to stage"
    )
    assert "1.1.0 → 1.1.0 on 1 1.0.0 → 1.0.0 on 1 DATABASE_URL:" in drone
    assert "ENVIRONMENT: Dev | Stage" in drone
    large = words(result.stdout[result.stdout.index("large") :])
    assert "1.0.0 → nothing on 1 (failing)" in large
    assert "failed in stage" in large
    assert "page 1 of 1 · differing rows 1-2 of 2 · last page" in words(result.stdout)


async def test_json_for_scripts_and_every_row_with_all(served: ServedFleet) -> None:
    result = await fleetmark(
        served, "stage", "dev", "--all", "--ignore-key", "ENVIRONMENT", "-o", "json"
    )
    filtered = await fleetmark(served, "dev", "stage", "--workload", "other-app")

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["environments"] == ["stage", "dev"]
    assert body["filters"]["only_differences"] is False
    assert body["filters"]["ignored_keys"] == ["ENVIRONMENT"]
    assert [row["cluster_type"] for row in body["rows"]["items"]] == ["drone", "large"]
    drone = body["rows"]["items"][0]
    assert [cell["desired"]["version"] for cell in drone["environments"]] == ["1.0.0", "1.1.0"]
    assert "ENVIRONMENT" not in [item["key"] for item in drone["differences"]]
    assert filtered.exit_code == 2, filtered.output
    assert "workload 'other-app' is unknown (known: hello-world-app)" in filtered.stderr


async def test_what_the_hub_refuses_ends_the_command(served: ServedFleet) -> None:
    unknown = await fleetmark(served, "dev", "qa")
    alone = await fleetmark(served, "dev")
    bad_limit = await fleetmark(served, "dev", "stage", "--limit", "0")

    assert unknown.exit_code == 2
    assert "error: environment 'qa' is unknown (known: dev, stage) (HTTP 404)" in words(
        unknown.stderr
    )
    assert alone.exit_code == 2
    assert (
        "error: environment: give at least two environments to compare (given: dev) (HTTP 422)"
        in words(alone.stderr)
    )
    assert bad_limit.exit_code == 2
    assert "--limit" in bad_limit.stderr
