"""`fleetmark demo --fast` as a new user runs it: a process of its own on a free port and a data
directory of its own; the story's end state read through the API, then Ctrl-C, after which
nothing it started is left running."""

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from hub.cli import app as cli
from hub.demo.story import NEW_DATABASE_URL, STEPS
from tests.demo_run import (
    STOP_TIMEOUT,
    STORY_TIMEOUT,
    TOLD,
    Demo,
    environment,
    git,
    nothing_runs_in,
    port_is_free,
    running_in,
)
from tests.served import FLEETMARK, free_port


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    started = Demo(tmp_path / "demo", tmp_path / "demo.log")
    try:
        yield started
    finally:
        # Ctrl-C even when the test failed: killed, the demo would leave its PostgreSQL behind.
        started.stop()


def drift_reasons(demo: Demo) -> dict[tuple[str, str | None], list[str]]:
    report = demo.get("/api/v1/drift", limit=1000)
    return {
        (item["cluster"], (item["object"] or {}).get("name")): [
            f"{reason['reason']}: {reason['detail']}" for reason in item["reasons"]
        ]
        for item in report["items"]
    }


def printed_commands(output: str) -> list[str]:
    """The commands the demo suggests to run in another terminal, as it printed them."""
    lines = output.split("then, in another terminal", 1)[1].splitlines()[1:]
    commands = []
    for line in lines:
        if line.startswith("    "):
            commands.append(line.strip())
        elif not line.startswith("  "):
            break
    return commands


def shell_words(command: str) -> list[str]:
    """`command` as a shell reads it: split into words, its substitutions done."""
    done = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {command}"],
        env=environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split("\0")[:-1]


def run_as_printed(output: str) -> dict[str, int]:
    """Each command the demo printed, as a shell in the demo's directory would run it: its
    program found as printed, its arguments run in-process (gate wait not kept waiting)."""
    export, *commands = printed_commands(output)
    assert export.startswith("export "), export
    variables = dict(word.split("=", 1) for word in shell_words(export.removeprefix("export ")))
    codes = {}
    for command in commands:
        program, *args = shell_words(command)
        found = shutil.which(program, path=environment().get("PATH"))
        assert found is not None, f"{program} does not run from {Path.cwd()}"
        assert Path(found).resolve() == Path(FLEETMARK).resolve()
        if args[:2] == ["gate", "wait"]:
            args += ["--timeout", "0s"]
        result = CliRunner().invoke(cli, args, env=variables)
        codes[" ".join(args[:4] if args[:2] == ["gate", "wait"] else args[:2])] = result.exit_code
        assert result.exit_code != 2, f"{command}:\n{result.output}"
    return codes


def test_the_demo_tells_the_story_and_ctrl_c_leaves_nothing_running(demo: Demo) -> None:
    seconds = demo.wait_for_story()
    output = demo.output()
    print(f"fleetmark demo --fast told its story in {seconds:.1f} s")

    assert httpx.get(f"{demo.url}/healthz", timeout=10.0).json() == {"status": "ok"}
    assert f"{demo.url}/docs" in output
    assert "stale after 3 s" in output
    assert "fleetmark gate wait --environment dev" in output
    assert "fleetmark gate wait --environment stage" in output
    for number in range(1, len(STEPS) + 1):
        assert f"step {number} of {len(STEPS)}:" in output
    # Every suggested command runs as printed, the venv active or not.
    codes = run_as_printed(output)
    assert codes.keys() == {
        "status",
        "drift",
        "diff dev",
        "gate wait --environment stage",
        "gate wait --environment dev",
    }
    # The suggested gates: stage's passes once the story is told, dev's is still pending.
    assert codes["gate wait --environment stage"] == 0
    assert codes["gate wait --environment dev"] == 3

    # The promotion: stage's platform branch promotes the control plane's newest main commit,
    # and stage runs hello-world 1.1.0.
    repositories = demo.data_dir / "repositories"
    promoted = git(
        repositories / "platform-gitops", "show", "stage:.github/tracking/Promoted_Commit_Id"
    )
    assert promoted == git(repositories / "control-plane", "rev-parse", "main")
    diff = demo.get("/api/v1/diff", environment=["dev", "stage"])
    rows = {row["cluster_type"]: row for row in diff["rows"]["items"]}
    large_stage = {cell["environment"]: cell for cell in rows["large"]["environments"]}["stage"]
    assert large_stage["desired"]["version"] == "1.1.0"
    assert [version["version"] for version in large_stage["deployed"]["versions"]] == ["1.1.0"]

    # The config change for the large cluster type on stage.
    assert large_stage["config"]["DATABASE_URL"] == NEW_DATABASE_URL
    assert any(
        difference["kind"] == "config" and NEW_DATABASE_URL in difference["detail"]
        for difference in rows["large"]["differences"]
    )

    # Drifting, failing, silent.
    reasons = drift_reasons(demo)
    assert any(reason.startswith("behind:") for reason in reasons["drone-dev-2", "flux-system"])
    failing = reasons["drone-stage-1", "hello-world-app-uat-test"]
    assert any(reason.startswith("failing:") and "ImagePullBackOff" in reason for reason in failing)
    assert any(reason.startswith("stale:") for reason in reasons["large-dev-2", "platform"])
    clusters = {
        cluster["name"]: cluster
        for cluster in demo.get("/api/v1/fleet", limit=1000)["clusters"]["items"]
    }
    assert clusters["drone-stage-1"]["objects"]["failing"] > 0
    assert clusters["large-dev-2"]["agent"] == "stale"
    # drone-dev-2 stays behind because its reconciliation is suspended, and says so.
    suspended = clusters["drone-dev-2"]["objects"]["suspended"]
    assert suspended > 0
    assert {name for name, cluster in clusters.items() if cluster["objects"]["suspended"]} == {
        "drone-dev-2"
    }
    fleet_page = httpx.get(f"{demo.url}/", timeout=10.0).text
    assert f"{suspended} suspended" in fleet_page

    # The hub's events, each printed as the demo's receiver got it, signed.
    stage_head = git(repositories / "platform-gitops", "rev-parse", "stage")
    demo.wait_for_output(f"event fleetmark.gate.passed gates/stage/{stage_head}")
    output = demo.output()
    assert "event fleetmark.cluster.stale environments/dev/clusters" in output
    assert "event fleetmark.drift.started environments/dev/drift" in output
    assert "event fleetmark.drift.started environments/stage/drift" in output

    # The decommissioned cluster is no longer expected.
    dev_head = git(repositories / "platform-gitops", "rev-parse", "dev")
    gate = demo.get("/api/v1/gates/promotion", environment="dev", commit=dev_head, limit=1000)
    expected = {cluster["name"] for cluster in gate["clusters"]["items"]}
    assert "small-dev-1" in expected
    assert "small-dev-2" not in expected
    assert not any(cluster == "small-dev-2" for cluster, _ in drift_reasons(demo))

    assert demo.stop() == 0, demo.output()
    assert "demo stopped" in demo.output()
    assert nothing_runs_in(demo.data_dir) == []
    assert port_is_free(demo.port)


def demo_refusing(*args: str) -> Result:
    """`fleetmark demo --fast ARGS` run in this process, without the user's fleetmark settings:
    for what the command refuses before it starts anything."""
    unset: dict[str, str | None] = {key: None for key in os.environ if key.startswith("FLEETMARK_")}
    return CliRunner().invoke(cli, ["demo", "--fast", *args], env=unset)


def test_a_directory_the_demo_did_not_make_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    result = demo_refusing("--data-dir", str(tmp_path), "--port", str(free_port()))
    assert result.exit_code == 2, result.output
    assert "holds something other than a fleetmark demo" in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = demo_refusing("--data-dir", str(tmp_path / "demo"), "--port", str(port))
    assert result.exit_code == 2, result.output
    assert f"--port {port}: cannot listen" in result.stderr
    assert running_in(tmp_path) == []


def test_sigterm_in_the_middle_of_the_story_stops_everything(demo: Demo) -> None:
    started = time.monotonic()
    while "step 1 of" not in demo.output():
        assert demo.process.poll() is None, f"the demo exited:\n{demo.output()}"
        assert time.monotonic() - started < STORY_TIMEOUT, demo.output()
        time.sleep(0.2)

    demo.process.send_signal(signal.SIGTERM)

    assert demo.process.wait(timeout=STOP_TIMEOUT) == 0, demo.output()
    assert TOLD not in demo.output()
    assert "demo stopped" in demo.output()
    assert nothing_runs_in(demo.data_dir) == []
    assert port_is_free(demo.port)


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (["--token-file", "admin.token"], "--token-file: only with --hub"),
        (["--git-listen", "127.0.0.1:8000"], "--git-listen: only with --hub"),
        (["--hub", "http://127.0.0.1:1"], "--hub needs --token-file"),
        (["--hub", "http://127.0.0.1:1", "--port", "8081"], "--port is the port of the demo's"),
        (
            ["--hub", "http://127.0.0.1:1", "--token-file", "admin.token"],
            "--hub needs --git-listen HOST:PORT",
        ),
        (
            ["--hub", "http://127.0.0.1:1", "--token-file", "admin.token", "--git-listen", "8000"],
            "--git-listen must be HOST:PORT",
        ),
    ],
)
def test_a_story_for_a_running_hub_needs_its_options_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], refused: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "admin.token").write_text(f"fma_{'a' * 43}\n")
    (tmp_path / "admin.token").chmod(0o600)

    result = CliRunner().invoke(cli, ["demo", "--data-dir", str(tmp_path / "demo"), *args])

    assert result.exit_code == 2, result.output
    assert refused in result.output
    assert not (tmp_path / "demo").exists()  # refused before anything was written
