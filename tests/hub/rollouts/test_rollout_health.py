"""Rollout health as numbers, on the platform commits' history of tests/hub/dora_history.py
(times in minutes after B): c3, committed at B+120, reached by drone-01, drone-02, drone-03 and
large-01 at B+125, 126, 128 and 130; then c4, committed at B+180, reached by drone-01 at B+185
alone. The same numbers in the API, in /metrics and behind the gate's options."""

import asyncio
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from html import unescape
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.cli.rollouts import rollout_rows
from hub.client.schemas.rollouts import RolloutHealth, RolloutHealthList
from hub.database import write_session
from hub.metrics import rollout_families
from hub.rollouts import service
from hub.text import format_time
from tests.hub.dora.test_dora_rollup import Played, play
from tests.hub.dora_history import PLATFORM_COMMITS, Timeline, commit_at, refresh_dora
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, Samples, samples

ROLLOUTS = "/api/v1/rollouts"
PROMTOOL = shutil.which("promtool")


def words(html: str) -> str:
    """What a page says, as words (tags dropped, entities read)."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


async def as_of(played: Played, sessions: async_sessionmaker[AsyncSession], minutes: float) -> None:
    """The DORA job refreshed at B+`minutes`, and the rollouts job kept what it found."""
    await refresh_dora(sessions, played.timeline.at(minutes))
    async with write_session(sessions) as session:
        await service.keep_rollouts(
            session, stall_after=timedelta(minutes=30), source="https://hub.example"
        )


async def health(client: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    response = await client.get(ROLLOUTS, params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def numbers(item: dict[str, Any]) -> tuple[Any, ...]:
    spread = item["time_to_converge"]
    return (
        item["expected_clusters"],
        item["converged_clusters"],
        item["converged_ratio"],
        item["failed_clusters"],
        spread["p50_seconds"],
        spread["p95_seconds"],
        spread["max_seconds"],
        spread["max_open"],
    )


class Rollouts(Collector):
    """/metrics' rollout series, of the current rollouts as a fleet snapshot reads them."""

    def __init__(self, rollouts: list[RolloutHealth]) -> None:
        self.rollouts = rollouts

    def collect(self) -> Iterator[Metric]:
        return rollout_families(self.rollouts)


async def scrape(sessions: async_sessionmaker[AsyncSession]) -> Samples:
    """The rollout series of an exposition, as Prometheus parses it; promtool, where it is
    installed, finds nothing to say against them."""
    async with sessions() as session:
        registry = CollectorRegistry()
        registry.register(Rollouts(await service.current_health(session)))
    exposition = generate_latest(registry)
    if PROMTOOL is not None:
        linted = await asyncio.to_thread(
            subprocess.run,
            [PROMTOOL, "check", "metrics"],
            input=exposition,
            capture_output=True,
            check=False,
        )
        assert linted.returncode == 0, linted.stdout + linted.stderr
    return samples(exposition.decode())


@pytest.fixture
async def played(
    fleet: Fleet, clock: FakeClock, client: httpx.AsyncClient, read_token: str
) -> Played:
    client.headers["Authorization"] = f"Bearer {read_token}"
    return await play(fleet, Timeline(clock, clock.now), None)


async def test_the_current_rollouts_numbers_follow_its_clusters(
    played: Played,
    fleet: Fleet,
    client: httpx.AsyncClient,
    sessions: async_sessionmaker[AsyncSession],
    clock: FakeClock,
) -> None:
    minute = 60.0
    # At B+127 c3 is the newest rollout: reached 5 and 6 minutes after its commit by two of
    # four clusters; the max is the time so far, 7 minutes, open.
    await as_of(played, sessions, 127)
    [dev] = await health(client)
    assert (dev["environment"], dev["workload"], dev["state"]) == ("dev", None, "in_progress")
    committed_at = datetime.fromisoformat(dev["committed_at"])
    assert committed_at == played.timeline.at(PLATFORM_COMMITS["c3"])
    assert numbers(dev) == (4, 2, 0.5, 0, 5.5 * minute, 5.95 * minute, 7 * minute, True)

    # Converged at B+130: 5, 6, 8 and 10 minutes; p95 between the two slowest, linearly.
    await as_of(played, sessions, 180)
    [dev] = await health(client, environment="dev")
    assert dev["state"] == "converged"
    assert numbers(dev) == (4, 4, 1.0, 0, 7 * minute, 9.7 * minute, 10 * minute, False)

    # c4, committed at B+180, reached by drone-01 at B+185 and by no other cluster since.
    c4 = commit_at(
        fleet.platform,
        "dev",
        "Promote dev: c4",
        {"drone/README.md": "c4\n"},
        played.timeline.at(180),
    )
    await fleet.harvest()
    played.timeline.go(185)
    fleet.clusters["drone-01"].run_platform(c4)
    await fleet.clusters["drone-01"].report()
    # drone-01 reports again; the others have been silent since B+130 at the latest.
    played.timeline.go(249)
    await fleet.clusters["drone-01"].report()
    played.timeline.go(250)
    await as_of(played, sessions, 250)
    [dev] = await health(client)
    assert (dev["revision"], dev["commit"]) == (c4, c4)
    assert numbers(dev) == (4, 1, 0.25, 0, 5 * minute, 5 * minute, 70 * minute, True)
    # `fleetmark rollouts` shows the max still open as the time so far, and counting (the
    # commit whole, off a terminal).
    shown = rollout_rows(RolloutHealthList.model_validate({"items": [dev]}))
    assert shown.rows == [
        (
            "dev",
            "(platform)",
            c4,
            "stalled",
            "1/4",
            0,
            "5m",
            "5m",
            "1h10m+",
            played.timeline.at(250),
        ),
    ]
    assert await health(client, workload="hello-world-app") == []
    page = await client.get("/rollouts")
    assert page.status_code == 200, page.text
    table = page.text.split('id="rollouts">', 1)[1].split("</table>", 1)[0]
    assert words(table) == (
        f"environment workload revision state converged failed p50 p95 max as of dev platform "
        f"commits {c4[:12]} stalled 1 of 4 0 5m 5m 1h10m so far "
        f"{format_time(played.timeline.at(250))}"
    )

    # /metrics: a series per workload ('' for the platform commits) and environment, the
    # version only in the info metric.
    platform = (("workload", ""), ("environment", "dev"))

    def series(name: str, *labels: tuple[str, str]) -> tuple[str, frozenset[tuple[str, str]]]:
        return name, frozenset((*platform, *labels))

    assert await scrape(sessions) == {
        series("fleetmark_rollout_converged_ratio"): 0.25,
        series("fleetmark_rollout_time_to_converge_seconds", ("quantile", "0.5")): 5 * minute,
        series("fleetmark_rollout_time_to_converge_seconds", ("quantile", "0.95")): 5 * minute,
        series("fleetmark_rollout_time_to_converge_seconds", ("quantile", "1")): 70 * minute,
        series("fleetmark_rollout_failed_clusters"): 0,
        series("fleetmark_rollout_info", ("version", c4)): 1,
    }

    # The gate: pending while c4 is within its time, failed past it, saying so; passed once
    # the share of the clusters asked for is compliant (drone-01 soaked long since).
    async def gate(**options: Any) -> dict[str, Any]:
        params = {"environment": "dev", "commit": c4} | options
        response = await client.get("/api/v1/gates/promotion", params=params)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    assert (await gate())["verdict"] == "pending"
    assert (await gate(max_time_to_converge="2h"))["verdict"] == "pending"
    late = await gate(max_time_to_converge="1h")
    assert late["verdict"] == "failed"
    assert late["reasons"][0] == (
        f"platform commit {c4[:12]} has not converged in dev within 1h (max_time_to_converge) "
        f"of its commit at {played.timeline.at(180):%Y-%m-%d %H:%M:%S} UTC: 1 of 4 expected "
        "cluster(s) run it, Ready; 4 required"
    )
    assert late["options"]["max_time_to_converge_seconds"] == 3600
    assert late["options"]["min_converged_ratio"] is None
    half = await gate(min_converged_ratio=0.5, max_time_to_converge="2h")
    assert half["verdict"] == "pending"
    assert half["reasons"][0] == (
        f"1 of 4 expected cluster(s) in dev run platform commit {c4[:12]}, Ready; 2 (50%) required"
    )
    quarter = await gate(min_converged_ratio=0.25, max_time_to_converge="1h")
    assert quarter["verdict"] == "passed"
    assert quarter["options"]["min_converged_ratio"] == 0.25


@pytest.mark.parametrize(
    ("path", "params", "status", "words"),
    [
        (ROLLOUTS, {"environment": "nowhere"}, 404, "nowhere"),
        (ROLLOUTS, {"workload": "nothing"}, 404, "nothing"),
        ("/api/v1/gates/promotion", {"min_converged_ratio": "0"}, 422, "min_converged_ratio"),
        ("/api/v1/gates/promotion", {"min_converged_ratio": "1.5"}, 422, "min_converged_ratio"),
        ("/api/v1/gates/decision", {"max_time_to_converge": "soon"}, 422, "max_time_to_converge"),
        ("/api/v1/gates/promotion", {"max_time_to_converge": "0"}, 422, "max_time_to_converge"),
    ],
)
async def test_bad_parameters_are_refused_naming_them(
    client: httpx.AsyncClient,
    read_token: str,
    path: str,
    params: dict[str, str],
    status: int,
    words: str,
) -> None:
    target = {} if path == ROLLOUTS else {"environment": "dev", "commit": "4f2a9c1d7e30"}
    response = await client.get(
        path, params=target | params, headers={"Authorization": f"Bearer {read_token}"}
    )
    assert response.status_code == status, response.text
    assert words in response.text
