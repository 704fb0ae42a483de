"""The agent's /metrics: what it sent, spooled and had rejected, as Prometheus scrapes it."""

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.client import HubClient
from agent.kube import Backoff, ClusterReader
from agent.runner import AgentRunner
from agent.settings import AgentSettings
from tests.agent import examples
from tests.agent.apiserver import FakeApiServer, served, until
from tests.agent.conftest import TOKEN, FakeHub

KUSTOMIZATIONS = "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations"


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(served("kustomizations")) as server:
        server.put("kustomizations", examples.kustomization())
        yield server


async def scrape(port: int) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """The content type and every sample of the agent's /metrics."""
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert response.status_code == 200
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }
    return response.headers["Content-Type"], samples


def reports(outcome: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return "fleetmark_agent_reports_total", (("outcome", outcome),)


async def test_metrics_count_what_was_sent_spooled_and_rejected(
    api: FakeApiServer, fake_hub: FakeHub, tmp_path: Path
) -> None:
    settings = AgentSettings(
        hub_url="http://hub.test",
        cluster_name="drone-dev-1",
        instance="fleetmark-agent-abcde",
        kinds="Kustomization",
        kube_host=api.url,
        spool_dir=tmp_path / "spool",
        lease_namespace="fleetmark",
        health_host="127.0.0.1",
        health_port=0,
        min_interval=0,
        retry_period=0.05,
    )
    # The first list fails once: the stream tries again, and that is a watch restart.
    api.fail(KUSTOMIZATIONS, 500, times=1)
    reader = ClusterReader.connect(
        host=api.url, request_timeout=5, backoff=lambda: Backoff(0.01, 0.05)
    )
    client = HubClient(
        "http://hub.test",
        token=TOKEN,
        transport=httpx.MockTransport(fake_hub.handler),
        attempts=1,
    )
    runner = AgentRunner(settings, reader=reader, client=client)
    task = asyncio.create_task(runner.run())
    try:
        await until(lambda: fake_hub.taken)  # report 1: sent

        fake_hub.reject[2] = (422, {"error": "invalid_report", "detail": "no"})
        api.put("kustomizations", examples.kustomization(applied=f"main@sha1:{examples.SHA_B}"))
        await until(lambda: runner.status().get("sequence") == 2)  # report 2: rejected

        fake_hub.down = True
        api.put("kustomizations", examples.kustomization(applied=f"main@sha1:{examples.SHA_C}"))
        await until(lambda: runner.status().get("sequence") == 3)  # report 3: spooled

        content_type, samples = await scrape(runner.health.port)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert content_type.startswith("text/plain")
    assert samples[reports("sent")] == 1
    assert samples[reports("rejected")] == 1
    assert samples[reports("spooled")] == 1
    assert samples[reports("replayed")] == 0
    assert samples[reports("split")] == 0
    (spooled,) = (tmp_path / "spool").glob("*.json")
    # The rejected report and its reason count against the spool's bound too.
    rejected = sum(path.stat().st_size for path in (tmp_path / "spool" / "rejected").iterdir())
    assert samples[("fleetmark_agent_spool_bytes", ())] == spooled.stat().st_size + rejected
    assert samples[("fleetmark_agent_spool_reports", ())] == 1
    assert samples[("fleetmark_agent_watch_restarts_total", ())] == 1
    assert samples[("fleetmark_agent_leader", ())] == 1
