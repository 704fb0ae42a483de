"""Operational endpoints (/healthz, /readyz, /metrics) and the OpenAPI document."""

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
from sqlalchemy.engine import make_url

from hub.app import create_app
from tests.conftest import MakeAgent, hub_settings
from tests.support import Agent, Samples, kustomization, samples


async def test_healthz(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_when_the_database_answers(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ready"}


async def test_readyz_when_the_database_is_unreachable(database_url: str) -> None:
    missing = make_url(database_url).set(database=f"fleetmark_missing_{uuid.uuid4().hex[:8]}")
    app = create_app(hub_settings(), missing.render_as_string(hide_password=False))

    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hub") as client,
    ):
        ready = await client.get("/readyz")
        alive = await client.get("/healthz")

    assert ready.status_code == 503
    assert ready.json() == {
        "status": "unavailable",
        "detail": "database unreachable: OperationalError",
    }
    assert alive.status_code == 200


def reports(values: Samples) -> dict[str, float]:
    return {
        dict(labels)["outcome"]: value
        for (name, labels), value in values.items()
        if name == "fleetmark_reports_total"
    }


async def test_metrics_count_reports(agent: Agent) -> None:
    await agent.send_ok([kustomization("a"), kustomization("b")], sequence=1)
    await agent.send_ok([kustomization("a"), kustomization("b")], sequence=1)
    await agent.send_ok([kustomization("a", ready=False), kustomization("b")], sequence=2)
    assert (await agent.send([kustomization("a")], sequence=0)).status_code == 422
    unknown_token = dataclasses.replace(agent, token="fm_not-a-token")
    assert (await unknown_token.send([kustomization("a")])).status_code == 401
    other_cluster = dataclasses.replace(agent, cluster="drone-dev-2")
    assert (await other_cluster.send([kustomization("a")])).status_code == 403

    response = await agent.client.get("/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    values = samples(response.text)
    # Every outcome is exported from the start, counted or not.
    assert reports(values) == {
        "accepted": 2,
        "duplicate": 1,
        "invalid": 1,
        "unauthorized": 1,
        "forbidden": 1,
        "too_large": 0,
        "unavailable": 0,
        "failed": 0,
    }
    assert values[("fleetmark_object_changes_total", frozenset())] == 3
    request_count = "fleetmark_http_request_duration_seconds_count"
    route = {("method", "POST"), ("route", "/api/v1/reports")}
    assert values[(request_count, frozenset(route | {("status", "200")}))] == 3
    assert values[(request_count, frozenset(route | {("status", "422")}))] == 1
    assert values[(request_count, frozenset(route | {("status", "401")}))] == 1


async def test_metrics_count_reports_over_the_size_limit(make_agent: MakeAgent) -> None:
    agent = await make_agent()
    small = await agent.client.get("/metrics")
    assert reports(samples(small.text))["too_large"] == 0

    big = [kustomization(f"object-{index}", message="x" * 1000) for index in range(5000)]
    assert (await agent.send(big)).status_code == 413

    values = samples((await agent.client.get("/metrics")).text)
    assert reports(values)["too_large"] == 1


async def test_metrics_label_unknown_paths_by_one_value(client: httpx.AsyncClient) -> None:
    for path in ("/nope", "/wp-admin", "/api/v1/../etc"):
        assert (await client.get(path)).status_code == 404

    values = samples((await client.get("/metrics")).text)

    unmatched = frozenset({("method", "GET"), ("route", "unmatched"), ("status", "404")})
    assert values[("fleetmark_http_request_duration_seconds_count", unmatched)] == 3


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


async def test_openapi_documents_the_report_body(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()

    post = document["paths"]["/api/v1/reports"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/Report"}
    schemas = document["components"]["schemas"]
    report = schemas["Report"]
    assert set(report["required"]) >= {"schema", "cluster", "agent", "sequence", "observed_at"}
    assert set(report["properties"]) == {
        "schema",
        "cluster",
        "agent",
        "sequence",
        "observed_at",
        "full_snapshot",
        "objects",
        "skipped_kinds",
        "snapshot_part",
    }
    assert report["properties"]["schema"]["const"] == "fleetmark.report/v1"
    for ref in set(refs(document)):
        assert ref.removeprefix("#/components/schemas/") in schemas, f"dangling {ref}"
    assert post["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ReportReply"
    }
    for status in ("200", "413"):
        assert "X-Fleetmark-Max-Report-Bytes" in post["responses"][status]["headers"], status
