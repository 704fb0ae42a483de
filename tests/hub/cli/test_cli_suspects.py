"""`fleetmark suspect` and `fleetmark gate clear-halt` against a hub served on a real port: the
answer for an environment, a halt cleared with who and why, and refusals in words."""

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.conftest import DatabaseServer
from tests.hub.cli.conftest import Hub, Served, serving, words

SHA = "4f2a9c1d7e30" + "0" * 28


@pytest.fixture(scope="module")
def hub(database_server: DatabaseServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    with serving(database_server, tmp_path_factory) as hub:
        yield hub


def halt(database_url: str) -> int:
    """A halt of a platform commit in prod, as the halts job keeps one."""
    evidence = {
        "environment": "prod",
        "kind": "platform_commit",
        "workload": None,
        "revision": SHA,
        "description": f"platform commit {SHA[:12]}",
        "verdict": "suspect",
        "score": 15.6,
        "p_value": 0.007,
        "explanation": "3 of 30 (10%) exposed and 0 of 120 (0%) control cluster(s) regressed",
        "counts": {"exposed": 30, "exposed_regressed": 3, "control": 120, "control_regressed": 0},
        "reasons": [{"reason": "HealthCheckFailed", "clusters": 3}],
        "clusters": [],
        "first_applied_at": "2026-11-30T10:00:00Z",
        "last_applied_at": "2026-11-30T10:05:00Z",
    }
    with psycopg.connect(database_url.replace("+psycopg", "")) as connection:
        connection.execute(
            "INSERT INTO environment (name, position) VALUES ('prod', 2) ON CONFLICT DO NOTHING"
        )
        row = connection.execute(
            "INSERT INTO rollout_halt (environment, revision, started_at, evidence) "
            "VALUES ('prod', %s, %s, %s) RETURNING id",
            (SHA, datetime(2026, 11, 30, 10, 20, tzinfo=UTC), Jsonb(evidence)),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_suspects_of_an_environment_and_a_halt_cleared(served: Served) -> None:
    halt_id = halt(served.database_url)

    quiet = served.admin("suspect", "-e", "prod", "--since", "2h", "-o", "json")
    assert quiet.exit_code == 0, quiet.output
    answer = json.loads(quiet.stdout)
    assert (answer["environment"], answer["verdict"], answer["items"]) == ("prod", "none", [])

    cleared = served.admin(
        "gate", "clear-halt", str(halt_id), "--reason", "a node pool, not the commit",
        "--by", "alice",
    )  # fmt: skip
    assert cleared.exit_code == 0, cleared.output
    assert words(cleared.stdout) == (
        f"halt {halt_id} of platform commit {SHA[:12]} in prod cleared by alice"
    )
    again = served.admin("gate", "clear-halt", str(halt_id), "--reason", "twice")
    assert again.exit_code != 0
    assert f"halt {halt_id} ended already (cleared at" in words(again.output)


def test_refusals_name_what_is_wrong(served: Served) -> None:
    unknown = served.admin("suspect", "-e", "nowhere")
    assert unknown.exit_code != 0
    assert "nowhere" in words(unknown.output)
    backwards = served.admin(
        "suspect",
        "-e",
        "prod",
        "--since",
        "2026-11-30T12:00:00Z",
        "--until",
        "2026-11-30T11:00:00Z",
    )
    assert backwards.exit_code != 0
    assert "since: must be before until" in words(backwards.output)
