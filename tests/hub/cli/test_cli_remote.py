"""The administration commands against a hub served on a real port, with an admin token from a
file: clusters, tokens and repositories through the API, a harvest and a scheduling run the hub
starts (202) and the command follows to the end, and what is refused, in words.

Also the suspects of an environment, and a halt cleared with who and why.

The module's tests share one hub (uvicorn in a thread) over one committed database: each names
the tokens it makes for itself, and only test_clusters_through_the_api registers clusters."""

import csv
import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.conftest import DatabaseServer
from tests.hub.cli.conftest import Hub, Served, fleetmark, serving, token_in, words
from tests.hub.harvest import scenario
from tests.hub.harvest.gitrepo import WorkRepo
from tests.hub.scheduling.fleet import reference_fleet
from tests.served import free_port
from tests.support import bearer


@pytest.fixture(scope="module")
def hub(database_server: DatabaseServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    with serving(database_server, tmp_path_factory) as hub:
        yield hub


def test_clusters_through_the_api(served: Served) -> None:
    registered = served.admin(
        "clusters",
        "register",
        "drone-1",
        "--environment",
        "dev",
        "--cluster-type",
        "drone",
        "--label",
        "region=east",
    )
    rotated = served.admin("clusters", "rotate", "drone-1")
    revoked = served.admin("clusters", "revoke", "drone-1")
    served.admin("clusters", "register", "drone-2")
    unplaced = served.admin("clusters", "list")
    placed = served.admin("clusters", "place", "drone-2", "-e", "dev", "-t", "drone")
    decommissioned = served.admin("clusters", "decommission", "drone-2")
    listed = served.admin("clusters", "list", "-o", "json")
    everything = served.admin("clusters", "list", "--decommissioned")

    assert registered.exit_code == 0, registered.output
    assert "Registered cluster drone-1" in registered.stdout
    token_in(registered, "fmc_")
    assert rotated.exit_code == 0, rotated.output
    assert token_in(rotated, "fmc_") != token_in(registered, "fmc_")
    assert revoked.exit_code == 0, revoked.output
    assert "Revoked the token of cluster drone-1." in revoked.stdout
    [row] = [line for line in unplaced.stdout.splitlines() if "drone-2" in line]
    assert "unplaced" in row
    assert placed.exit_code == 0, placed.output
    assert "Cluster drone-2 placed in dev/drone." in words(placed.stdout)
    assert decommissioned.exit_code == 0, decommissioned.output
    assert "Cluster drone-2 decommissioned at" in words(decommissioned.stdout)
    [item] = json.loads(listed.stdout)["items"]
    assert (item["name"], item["labels"], item["token_active"]) == (
        "drone-1",
        {"region": "east"},
        False,
    )
    assert "drone-2" in everything.stdout
    assert "decommissioned 20" in everything.stdout
    assert "2 of 2 clusters" in everything.stdout


def test_tokens_through_the_api(served: Served) -> None:
    created = served.admin("tokens", "create", "ci", "--scope", "read")
    listed = served.admin("tokens", "list", "-o", "json")
    revoked = served.admin("tokens", "revoke", "ci")
    again = served.admin("tokens", "revoke", "ci")
    table = served.admin("tokens", "list")

    assert created.exit_code == 0, created.output
    assert "Created read token ci" in created.stdout
    # By name: "root" is the module's admin token; other tests' tokens may lie between.
    names = [t["name"] for t in json.loads(listed.stdout)]
    assert names == sorted(names)
    assert [
        (t["name"], t["scope"]) for t in json.loads(listed.stdout) if t["name"] in ("ci", "root")
    ] == [
        ("ci", "read"),
        ("root", "admin"),
    ]
    assert revoked.exit_code == 0, revoked.output
    assert again.exit_code == 2
    assert "error: no active API token named 'ci' (HTTP 404)" in words(again.stderr)
    assert re.search(r"\bci read 20\S+ \S+ 20\S+ \S+", words(table.stdout)), table.stdout


def test_repositories_and_a_harvest_the_hub_runs(served: Served) -> None:
    platform = WorkRepo(served.tmp_path / "remotes" / "platform-gitops")
    heads = scenario.build_platform(platform, "https://example.com/app-gitops")

    added = served.admin(
        "repositories",
        "add",
        platform.url,
        "--role",
        "platform",
        "--branch",
        "dev",
        "--branch",
        "stage",
    )
    twice = served.admin("repositories", "add", platform.url, "--role", "platform")
    harvested = served.admin("harvest", "--interval", "0.1")
    listed = served.admin("repositories", "list", "-o", "json")
    unknown = served.admin("harvest", "--repo", "https://example.com/nowhere", "--interval", "0.1")

    assert added.exit_code == 0, added.output
    assert "Added repository" in added.stdout
    assert twice.exit_code == 2
    assert "is already configured; remove it first to change it (HTTP 409)" in words(twice.stderr)
    assert harvested.exit_code == 0, harvested.output
    assert re.search(r"harvest run \d+: running for \d+ s", harvested.stderr), harvested.stderr
    assert re.search(r"harvest run \d+: succeeded", harvested.stderr)
    rows = words(harvested.stdout.replace("│", " "))
    for branch in ("dev", "stage"):
        assert re.search(rf"{branch} \d+ {heads[branch][:12]}", rows), rows
    # The application repository it names is discovered, not added.
    [repository] = [item for item in json.loads(listed.stdout) if item["source"] == "api"]
    assert {b["name"]: b["head_sha"] for b in repository["branches"]} == {
        "dev": heads["dev"],
        "stage": heads["stage"],
    }
    assert unknown.exit_code == 2
    assert re.search(r"harvest run \d+: failed", unknown.stderr)
    assert (
        "error: the harvest failed: repository https://example.com/nowhere is unknown (known: "
        in words(unknown.stderr)
    )

    removed = served.admin("repositories", "remove", str(repository["id"]))
    after = served.admin("repositories", "list")
    assert removed.exit_code == 0, removed.output
    assert "(removed)" in after.stdout


def test_a_scheduling_run_the_hub_runs(served: Served) -> None:
    control_plane, platform = reference_fleet(served.tmp_path / "fleet")
    options = ["--control-plane", str(control_plane.path), "--gitops", str(platform.path)]

    scheduled = served.admin("schedule", *options, "-e", "dev", "--interval", "0.1")
    unknown = served.admin("schedule", *options, "-e", "prod", "--interval", "0.1")

    head = platform.head("dev")
    assert head is not None
    assert scheduled.exit_code == 0, scheduled.output
    assert re.search(r"schedule run \d+: succeeded", scheduled.stderr)
    assert f"committed {head[:12]} to dev" in words(scheduled.stdout)
    assert "2 assignments, 0 failed" in words(scheduled.stdout)
    assert unknown.exit_code == 2
    assert "nothing written: environment 'prod' was not loaded" in words(unknown.stdout)


def test_what_is_refused_says_why(served: Served) -> None:
    made = served.admin("tokens", "create", "refused-reader")
    reader = served.write_token("read-token", token_in(made))
    empty = served.write_token("empty-token", "  ")
    hub = ["--hub", served.hub.url]

    no_token = fleetmark("clusters", "list", *hub)
    read_only = fleetmark("clusters", "register", "x", *hub, "--token-file", str(reader))
    unknown = served.admin("clusters", "rotate", "no-such-cluster")
    missing = fleetmark("tokens", "list", *hub, "--token-file", str(served.tmp_path / "nope"))
    blank = fleetmark("tokens", "list", *hub, "--token-file", str(empty))
    unreachable_url = f"http://127.0.0.1:{free_port()}"
    unreachable = fleetmark("clusters", "list", "--hub", unreachable_url, "--token", "t")
    both = fleetmark("clusters", "list", *hub, "--database-url", served.database_url)
    bad_label = served.admin("clusters", "register", "y", "--label", "nothing")

    assert no_token.exit_code == 2
    assert (
        "error: an API token is required (Authorization: Bearer <token>) (HTTP 401); give an "
        "API token with --token, --token-file or FLEETMARK_TOKEN"
    ) in words(no_token.stderr)
    assert read_only.exit_code == 2
    assert "this needs a token with scope 'admin'; yours has 'read' (HTTP 403)" in words(
        read_only.stderr
    )
    assert unknown.exit_code == 2
    assert "error: cluster 'no-such-cluster' is unknown (" in words(unknown.stderr)
    assert missing.exit_code == 2
    assert (
        f"--token-file {served.tmp_path / 'nope'}: cannot be read (No such file or directory)"
        in (words(missing.stderr))
    )
    assert blank.exit_code == 2
    assert f"--token-file {empty}: is empty" in words(blank.stderr)
    assert unreachable.exit_code == 2
    assert f"error: the hub at {unreachable_url} is unreachable" in words(unreachable.stderr)
    assert both.exit_code == 2
    assert "give --hub, or --data-dir/--database-url on the hub's host; not both" in words(
        both.stderr
    )
    assert bad_label.exit_code == 2
    assert "--label 'nothing': expected KEY=VALUE" in words(bad_label.stderr)


def test_the_read_commands_take_a_token_file(served: Served) -> None:
    made = served.admin("tokens", "create", "status-reader")
    reader = served.write_token("read-token", token_in(made))

    status = fleetmark("status", "--hub", served.hub.url, "--token-file", str(reader))
    history = fleetmark("history", "--hub", served.hub.url, "--token-file", str(reader))
    gate = fleetmark(
        "gate",
        "wait",
        "-e",
        "dev",
        "--commit",
        "1234567",
        "--hub",
        served.hub.url,
        "--token-file",
        str(served.tmp_path / "nope"),
    )

    assert status.exit_code == 0, status.output
    assert history.exit_code == 0, history.output
    assert gate.exit_code == 2
    assert "cannot be read" in gate.stderr


def test_a_token_file_of_more_than_one_line_is_refused_naming_it_never_showing_it(
    served: Served,
) -> None:
    token = served.admin_file.read_text().strip()
    pasted = served.write_token("pasted-token", f"{token}\n\nfmc_second-secret\n")
    trailing = served.write_token("trailing-blank-lines", f"\n{token}\n\n  \n")

    refused = fleetmark("tokens", "list", "--hub", served.hub.url, "--token-file", str(pasted))
    taken = fleetmark("tokens", "list", "--hub", served.hub.url, "--token-file", str(trailing))

    assert refused.exit_code == 2
    assert (
        f"error: --token-file {pasted}: holds 2 lines; it must hold the secret alone, on one line"
        in words(refused.stderr)
    )
    assert token not in refused.output
    assert "second-secret" not in refused.output
    assert taken.exit_code == 0, taken.output


def test_a_token_file_others_may_read_is_used_with_a_warning_naming_it(served: Served) -> None:
    token = served.admin_file.read_text().strip()
    shared = served.write_token("shared-token", token, mode=0o644)
    group = served.write_token("group-token", token, mode=0o640)

    open_to_all = fleetmark("tokens", "list", "--hub", served.hub.url, "--token-file", str(shared))
    open_to_group = fleetmark("tokens", "list", "--hub", served.hub.url, "--token-file", str(group))
    private = served.admin("tokens", "list")

    assert open_to_all.exit_code == open_to_group.exit_code == 0, open_to_all.output
    assert (
        f"warning: --token-file {shared}: its group or others may read it (mode 0644); chmod 600 it"
    ) in words(open_to_all.stderr)
    assert f"warning: --token-file {group}: its group or others may read it (mode 0640)" in words(
        open_to_group.stderr
    )
    assert private.exit_code == 0, private.output
    assert "warning" not in private.stderr


def test_a_run_asked_for_answers_202_with_where_to_poll(served: Served) -> None:
    token = served.admin_file.read_text().strip()
    with httpx.Client(base_url=served.hub.url, headers=bearer(token)) as client:
        accepted = client.post("/api/v1/runs/harvest", json={"backfill": False})
        unknown = client.get("/api/v1/runs/999999")
        bad = client.post("/api/v1/runs/harvest", json={"repositories": "x"})
        polled = client.get(accepted.headers["location"])

    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["outcome"] == "running"
    assert accepted.headers["location"] == f"/api/v1/runs/{accepted.json()['id']}"
    assert polled.status_code == 200
    assert polled.json()["job"] == "harvest"
    assert unknown.status_code == 404
    assert unknown.json() == {
        "error": "unknown_run",
        "detail": "no harvest or scheduling run 999999",
    }
    assert bad.status_code == 422


# --- suspects and halts ---------------------------------------------------------------------

SHA = "4f2a9c1d7e30" + "0" * 28


def halt(database_url: str) -> int:
    """A halt of a platform commit in prod, as the halts job keeps one."""
    evidence = {
        "environment": "live",
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
            "INSERT INTO environment (name, position) VALUES ('live', 2) ON CONFLICT DO NOTHING"
        )
        row = connection.execute(
            "INSERT INTO rollout_halt (environment, revision, started_at, evidence) "
            "VALUES ('live', %s, %s, %s) RETURNING id",
            (SHA, datetime(2026, 11, 30, 10, 20, tzinfo=UTC), Jsonb(evidence)),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_suspects_of_an_environment_and_a_halt_cleared(served: Served) -> None:
    halt_id = halt(served.database_url)

    quiet = served.admin("suspect", "-e", "live", "--since", "2h", "-o", "json")
    assert quiet.exit_code == 0, quiet.output
    answer = json.loads(quiet.stdout)
    assert (answer["environment"], answer["verdict"], answer["items"]) == ("live", "none", [])

    cleared = served.admin(
        "gate", "clear-halt", str(halt_id), "--reason", "a node pool, not the commit",
        "--by", "alice",
    )  # fmt: skip
    assert cleared.exit_code == 0, cleared.output
    assert words(cleared.stdout) == (
        f"halt {halt_id} of platform commit {SHA[:12]} in live cleared by alice"
    )
    again = served.admin("gate", "clear-halt", str(halt_id), "--reason", "twice")
    assert again.exit_code != 0
    assert f"halt {halt_id} ended already (cleared at" in words(again.output)


def test_suspect_refusals_name_what_is_wrong(served: Served) -> None:
    unknown = served.admin("suspect", "-e", "nowhere")
    assert unknown.exit_code != 0
    assert "nowhere" in words(unknown.output)
    backwards = served.admin(
        "suspect",
        "-e",
        "live",
        "--since",
        "2026-11-30T12:00:00Z",
        "--until",
        "2026-11-30T11:00:00Z",
    )
    assert backwards.exit_code != 0
    assert "since: must be before until" in words(backwards.output)


def test_the_timeline_a_page_at_a_time(served: Served) -> None:
    """Two clusters decommissioned in an environment of their own are its timeline, newest
    first, a page at a time with the cursor the table ends with."""
    for name in ("edge-1", "edge-2"):
        served.admin("clusters", "register", name, "--environment", "lab", "--cluster-type", "edge")
        served.admin("clusters", "decommission", name)

    first = served.admin("timeline", "-e", "lab", "--since", "1h", "--limit", "1")
    [cursor] = re.findall(r"next: --cursor (\S+)", first.stdout)
    second = served.admin(
        "timeline", "-e", "lab", "--since", "1h", "--limit", "1", "--cursor", cursor
    )
    both = served.admin("timeline", "--since", "1h", "-e", "lab", "--output", "json")
    rows = served.admin("timeline", "--since", "1h", "--cluster", "edge-1", "--output", "csv")
    refused = served.admin("timeline", "--cursor", "not-a-cursor")

    assert first.exit_code == 0, first.output
    assert "cluster edge-2 decommissioned" in words(first.stdout)
    assert second.exit_code == 0, second.output
    assert "cluster edge-1 decommissioned" in words(second.stdout)
    assert "last page" in second.stdout
    answer = json.loads(both.stdout)
    assert [item["detail"]["cluster"] for item in answer["items"]] == ["edge-2", "edge-1"]
    assert answer["next"] is None
    [row] = list(csv.DictReader(io.StringIO(rows.stdout)))
    assert (row["kind"], row["environment"], row["clusters"]) == (
        "cluster.decommissioned",
        "lab",
        "1",
    )
    assert refused.exit_code != 0
    assert "cursor: not a cursor the hub gave" in words(refused.output)
