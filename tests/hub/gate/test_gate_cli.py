"""`fleetmark gate wait`: its polling through simulated time against the app (ASGI), and the
command itself with its exit codes against a hub served on a real port."""

import asyncio
import csv
import io
import json
from dataclasses import dataclass

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from hub.cli import app as cli
from hub.cli.gate import GateUnusable, Outcome, Poll, wait_for_gate
from hub.gate.policy import Verdict
from tests.agent.conftest import LiveHub, free_port
from tests.hub.conftest import ServedFleet, words
from tests.hub.harvest import scenario
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock

# --- the polling, in simulated time -----------------------------------------------------------


@pytest.fixture
async def dev(fleet: Fleet, client: httpx.AsyncClient, read_token: str) -> Fleet:
    """A drone (Flux) and a large (Argo CD) in dev; the client asks with a read token."""
    await fleet.add("drone-01", "drone")
    await fleet.add("large-01", "large")
    client.headers["Authorization"] = f"Bearer {read_token}"
    return fleet


@dataclass
class Time:
    """The hub's clock seen as the command's monotonic clock; sleeping moves it on, and the
    fleet keeps reporting as time goes by."""

    clock: FakeClock
    fleet: Fleet

    def __post_init__(self) -> None:
        self.origin = self.clock.now
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return (self.clock.now - self.origin).total_seconds()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.clock.advance(seconds=seconds)
        await self.fleet.report()


def verdicts(polls: list[Poll]) -> list[Verdict | None]:
    return [None if poll.result is None else poll.result.verdict for poll in polls]


async def test_polls_until_the_gate_opens_and_looks_again_exactly_then(
    dev: Fleet, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    for cluster in dev.clusters.values():
        cluster.run_platform(head)
    await dev.report()
    time, polls = Time(clock, dev), []

    waited = await wait_for_gate(
        client,
        {"environment": "dev", "commit": head, "soak": "600"},
        time_limit=1800,
        interval=90,
        show=polls.append,
        monotonic=time.monotonic,
        sleep=time.sleep,
    )

    assert waited.outcome is Outcome.PASSED
    assert verdicts(polls) == [Verdict.PENDING] * 7 + [Verdict.PASSED]
    # Every 90 s, then at the soak's end, which the gate announced.
    assert time.sleeps == [90.0] * 6 + [60.0]
    assert waited.last.elapsed == 600.0


async def test_a_failure_ends_the_wait_at_once(
    dev: Fleet, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    dev.clusters["drone-01"].run_platform(head)
    dev.clusters["large-01"].run_platform(head, ready=False, reason="SyncFailed")
    await dev.report()
    time, polls = Time(clock, dev), []

    waited = await wait_for_gate(
        client,
        {"environment": "dev", "commit": head},
        time_limit=1800,
        interval=10,
        show=polls.append,
        monotonic=time.monotonic,
        sleep=time.sleep,
    )

    assert waited.outcome is Outcome.FAILED
    assert verdicts(polls) == [Verdict.FAILED]
    assert time.sleeps == []


async def test_time_runs_out_while_the_gate_is_pending(
    dev: Fleet, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    for cluster in dev.clusters.values():
        cluster.run_platform(head)
    await dev.report()
    time, polls = Time(clock, dev), []

    waited = await wait_for_gate(
        client,
        {"environment": "dev", "commit": head, "soak": "PT1H"},
        time_limit=300,
        interval=120,
        show=polls.append,
        monotonic=time.monotonic,
        sleep=time.sleep,
    )

    assert waited.outcome is Outcome.TIMED_OUT
    assert verdicts(polls) == [Verdict.PENDING] * 4
    # The last look comes when the time limit is reached, not an interval later.
    assert time.sleeps == [120.0, 120.0, 60.0]


async def test_a_commit_the_hub_has_not_harvested_yet_is_waited_for(
    dev: Fleet, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    newer = dev.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    for cluster in dev.clusters.values():
        cluster.run_platform(newer)
    await dev.report()
    time, polls = Time(clock, dev), []

    async def harvest_meanwhile(seconds: float) -> None:
        await dev.harvest()  # takes the harvest's minute
        await time.sleep(seconds - 60)

    waited = await wait_for_gate(
        client,
        {"environment": "dev", "commit": newer, "soak": "0"},
        time_limit=600,
        interval=60,
        show=polls.append,
        monotonic=time.monotonic,
        sleep=harvest_meanwhile,
    )

    assert waited.outcome is Outcome.PASSED
    assert verdicts(polls) == [None, Verdict.PASSED]
    problem = polls[0].problem
    assert problem is not None
    assert problem.startswith(f"commit {newer} is not on the platform branch of dev")
    assert problem.endswith("(HTTP 404)")


async def test_questions_the_hub_refuses_are_not_waited_on(
    dev: Fleet, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    time = Time(clock, dev)

    async def ask(params: dict[str, str]) -> None:
        await wait_for_gate(
            client,
            params,
            time_limit=600,
            interval=60,
            show=lambda poll: None,
            monotonic=time.monotonic,
            sleep=time.sleep,
        )

    with pytest.raises(GateUnusable, match=r"^environment 'qa' is unknown .* \(HTTP 404\)$"):
        await ask({"environment": "qa", "commit": head})
    with pytest.raises(GateUnusable, match=r"^soak: must not be negative, .* \(HTTP 422\)$"):
        await ask({"environment": "dev", "commit": head, "soak": "-PT1M"})
    del client.headers["Authorization"]
    with pytest.raises(GateUnusable, match=r"\(HTTP 401\)$"):
        await ask({"environment": "dev", "commit": head})
    assert time.sleeps == []


# --- the command, against a served hub --------------------------------------------------------


@dataclass(frozen=True)
class Served:
    hub: LiveHub
    token: str
    dev_head: str
    stage_head: str


@pytest.fixture
async def served(served_fleet: ServedFleet) -> Served:
    """The scenario's repositories harvested; in dev a drone that has run the head for ten
    minutes, in stage a drone whose sync of the head failed."""
    live = served_fleet
    heads = scenario.build_platform(live.platform, live.app.url)
    scenario.build_app(live.app)
    await live.start([("drone-dev", "dev", "drone"), ("drone-stage", "stage", "drone")])
    async with live.clusters() as clusters:
        dev, stage = clusters["drone-dev"], clusters["drone-stage"]
        dev.run_platform(heads["dev"])
        stage.run_platform(None, attempted=heads["stage"], ready=False, reason="BuildFailed")
        await dev.report()
        await stage.report()
        live.clock.advance(minutes=10)
        await dev.report()
    return Served(live.hub, live.token, heads["dev"], heads["stage"])


async def fleetmark(*args: str, env: dict[str, str] | None = None) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, ["gate", "wait", *args], env=env)


async def test_exit_codes_against_a_running_hub(served: Served) -> None:
    env = {"FLEETMARK_HUB_URL": served.hub.url, "FLEETMARK_TOKEN": served.token}
    options = ["--hub", served.hub.url, "--token", served.token]

    passed = await fleetmark(
        "--environment", "dev", "--commit", served.dev_head, "--output", "json", env=env
    )
    failed = await fleetmark("-e", "stage", "--commit", served.stage_head, *options)
    timed_out = await fleetmark(
        "-e", "dev", "--commit", served.dev_head, "--soak", "1h", "--timeout", "0s", *options
    )
    unknown = await fleetmark("-e", "qa", "--commit", served.dev_head, *options)
    refused = await fleetmark(
        "-e", "dev", "--commit", served.dev_head, "--hub", served.hub.url, "--token", "fma_nope"
    )
    bad_option = await fleetmark("-e", "dev", "--commit", served.dev_head, "--timeout", "soon")
    no_interval = await fleetmark("-e", "dev", "--commit", served.dev_head, "--interval", "0s")
    converging = await fleetmark(
        "-e", "dev", "--commit", served.dev_head, "--min-converged-ratio", "0.5",
        "--max-time-to-converge", "2h", "-o", "json", *options,
    )  # fmt: skip
    bad_deadline = await fleetmark(
        "-e", "dev", "--commit", served.dev_head, "--max-time-to-converge", "soon"
    )

    assert passed.exit_code == 0, passed.output
    body = json.loads(passed.stdout)
    assert (body["outcome"], body["gate"]["verdict"]) == ("passed", "passed")
    assert body["gate"]["target"]["commit"] == served.dev_head
    assert failed.exit_code == 1, failed.output
    assert (
        f"drone-stage: reconciling platform commit {served.stage_head[:12]} failed (BuildFailed)"
        in words(failed.stdout)
    )
    assert "gate failed after 0s" in words(failed.stdout)
    assert timed_out.exit_code == 3, timed_out.output
    assert "timed out after 0s, still pending" in words(timed_out.stdout)
    assert "soaking" in timed_out.stdout
    # Progress, on stderr: the verdict, counts and why, as a CI log shows them.
    assert "0s pending · platform commit" in words(timed_out.stderr)
    assert "drone-dev: runs platform commit" in words(timed_out.stderr)
    assert unknown.exit_code == 2
    assert "error: environment 'qa' is unknown (known: dev, stage) (HTTP 404)" in words(
        unknown.stderr
    )
    assert refused.exit_code == 2
    assert "(HTTP 401)" in refused.stderr
    assert bad_option.exit_code == 2
    assert "error: --timeout: 'soon' is not a duration" in words(bad_option.stderr)
    assert no_interval.exit_code == 2
    assert "error: --interval: must be more than nothing, got '0s'" in words(no_interval.stderr)
    # The convergence options reach the hub, which echoes them.
    assert converging.exit_code == 0, converging.output
    echoed = json.loads(converging.stdout)["gate"]["options"]
    assert (echoed["min_converged_ratio"], echoed["max_time_to_converge_seconds"]) == (0.5, 7200)
    assert bad_deadline.exit_code == 2
    assert "error: --max-time-to-converge: 'soon' is not a duration" in words(bad_deadline.stderr)


async def test_an_unreachable_hub_is_waited_for_until_the_timeout() -> None:
    silent = f"http://127.0.0.1:{free_port()}"

    result = await fleetmark(
        "-e", "dev", "--commit", "1f2e3d4c5b6a", "--hub", silent, "--timeout", "0s", "-o", "json"
    )

    assert result.exit_code == 3, result.output
    body = json.loads(result.stdout)
    assert (body["outcome"], body["gate"]) == ("timed_out", None)
    assert body["problem"].startswith("the hub is unreachable")
    assert "waiting: the hub is unreachable" in result.stderr


async def test_the_command_narrows_the_gate_by_cluster_type_and_selector(
    served_fleet: ServedFleet,
) -> None:
    live = served_fleet
    heads = scenario.build_platform(live.platform, live.app.url)
    scenario.build_app(live.app)
    # A host that reports through the file source, and has not yet.
    await live.start([("drone-dev", "dev", "drone"), ("vm-dev", "dev", "small")])
    async with live.clusters() as clusters:
        clusters["drone-dev"].run_platform(heads["dev"])
        await clusters["drone-dev"].report()
        live.clock.advance(minutes=10)
        await clusters["drone-dev"].report()
    options = ["-e", "dev", "--commit", heads["dev"], "--timeout", "0s"]
    options += ["--hub", live.hub.url, "--token", live.token, "-o", "json"]

    everyone = await fleetmark(*options)
    drones = await fleetmark(*options, "--cluster-type", "drone")
    unknown_type = await fleetmark(*options, "-t", "drone", "-t", "large")
    selected = await fleetmark(*options, "--cluster-type", "drone", "-l", "!source")
    unreadable = await fleetmark(*options, "--selector", "source in ()")

    assert everyone.exit_code == 3, everyone.output
    assert json.loads(everyone.stdout)["gate"]["counts"]["never_reported"] == 1
    assert drones.exit_code == 0, drones.output
    assert json.loads(drones.stdout)["gate"]["counts"]["expected"] == 1
    assert unknown_type.exit_code == 2
    assert "cluster type 'large' is unknown in environment 'dev' (known: drone, small)" in words(
        unknown_type.stderr
    )
    assert selected.exit_code == 0, selected.output
    assert unreadable.exit_code == 2
    assert "error: selector: source in (): give at least one value (HTTP 422)" in words(
        unreadable.stderr
    )


async def test_a_log_gets_a_line_every_poll_while_the_gate_is_pending(served: Served) -> None:
    options = ["--hub", served.hub.url, "--token", served.token]

    result = await fleetmark(
        "-e", "dev", "--commit", served.dev_head, "--soak", "1h", "--interval", "0.2",
        "--timeout", "2", *options,
    )  # fmt: skip

    assert result.exit_code == 3, result.output
    polls = [line for line in result.stderr.splitlines() if " pending · platform commit " in line]
    # A look at 0s, then one every 0.2s until two seconds are gone (on a busy machine an answer
    # may take longer than the interval): the soak alone changes nothing.
    assert len(polls) >= 3, result.stderr
    assert all(line.split()[0] in ("0s", "1s", "2s") for line in polls)
    assert all("in dev · 0/1 compliant · 1 reporting" in line for line in polls)
    # The reasons are said once, not at every poll.
    assert result.stderr.count("drone-dev: runs platform commit") == 1


async def test_csv_of_the_clusters_the_gate_judged(served: Served) -> None:
    options = ["--hub", served.hub.url, "--token", served.token]

    result = await fleetmark("-e", "stage", "--commit", served.stage_head, "-o", "csv", *options)

    assert result.exit_code == 1, result.output
    [row] = list(csv.DictReader(io.StringIO(result.stdout)))
    assert (row["cluster"], row["type"], row["state"]) == ("drone-stage", "drone", "failed")
    assert f"{served.stage_head[:12]} failed (BuildFailed)" in row["why"]
