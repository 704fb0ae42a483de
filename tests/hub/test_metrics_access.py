"""Who may read /metrics: in production a token of scope metrics (or admin), the configured
metrics token, or anyone when it is made public; on a port of its own, only there. These
tests use a database of their own: the tokens they make are committed, as the CLI does."""

import secrets
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from hub.app import create_app
from hub.tokens import service as token_service
from hub.tokens.schemas import Scope, TokenRequest
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.served import free_port, hub_environment, served_hub
from tests.support import bearer, samples

METRICS_TOKEN = "m" * 40


@pytest.fixture(scope="module")
def metrics_database(database_server: DatabaseServer) -> Iterator[str]:
    with database_server.migrated_database() as url:
        yield url


async def make_tokens(url: str, *scopes: Scope) -> dict[Scope, str]:
    engine = create_async_engine(url)
    try:
        async with AsyncSession(engine) as session:
            made = {
                scope: await token_service.create(
                    session,
                    TokenRequest(name=f"{scope}-{secrets.token_hex(4)}", scope=scope),
                    token_secret=TOKEN_SECRET,
                )
                for scope in scopes
            }
            await session.commit()
    finally:
        await engine.dispose()
    return {scope: created.token for scope, created in made.items()}


@asynccontextmanager
async def hub(url: str, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(hub_settings(**settings), url)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hub") as client,
    ):
        yield client


async def test_in_production_metrics_need_a_token_of_scope_metrics_or_admin(
    metrics_database: str,
) -> None:
    tokens = await make_tokens(metrics_database, "read", "metrics", "admin")

    async with hub(metrics_database, mode="production") as client:
        anonymous = await client.get("/metrics")
        answers = {
            scope: (await client.get("/metrics", headers=bearer(token))).status_code
            for scope, token in tokens.items()
        }
        fleet = await client.get("/api/v1/fleet", headers=bearer(tokens["metrics"]))

    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"] == "Bearer"
    assert "fleetmark_clusters" not in anonymous.text
    assert answers == {"read": 403, "metrics": 200, "admin": 200}
    # A metrics token reads /metrics and nothing else.
    assert fleet.status_code == 403


async def test_metrics_made_public_need_no_token(metrics_database: str) -> None:
    async with hub(metrics_database, mode="production", metrics_public=True) as client:
        public = await client.get("/metrics")

    assert public.status_code == 200
    assert "fleetmark_store_reachable" in public.text


async def test_the_configured_metrics_token_is_taken_while_the_store_is_down(
    metrics_database: str,
) -> None:
    down = make_url(metrics_database).set(port=free_port()).render_as_string(hide_password=False)
    settings = {"mode": "production", "metrics_token": METRICS_TOKEN}

    async with hub(down, **settings) as client:
        configured = await client.get("/metrics", headers=bearer(METRICS_TOKEN))
        other = await client.get("/metrics", headers=bearer("m" * 39 + "x"))

    assert configured.status_code == 200
    assert ("fleetmark_store_reachable", frozenset()) in samples(configured.text)
    assert other.status_code == 503


async def test_unusual_methods_are_counted_under_one_label(client: httpx.AsyncClient) -> None:
    for method in ("PROPFIND", "PURGE", "BREW", "GET"):
        await client.request(method, "/nope")

    values = samples((await client.get("/metrics")).text)

    methods = {
        dict(labels)["method"]: value
        for (name, labels), value in values.items()
        if name == "fleetmark_http_request_duration_seconds_count"
        and dict(labels)["route"] == "unmatched"
    }
    assert methods == {"other": 3, "GET": 1}


def test_metrics_on_a_port_of_their_own_and_every_secret_from_a_file(
    metrics_database: str, tmp_path: Path
) -> None:
    files = {
        "FLEETMARK_DATABASE_URL_FILE": metrics_database,
        "FLEETMARK_TOKEN_SECRET_FILE": TOKEN_SECRET,
        "FLEETMARK_METRICS_TOKEN_FILE": METRICS_TOKEN,
    }
    environment = hub_environment(metrics_database, tmp_path) | {"FLEETMARK_MODE": "production"}
    for variable, secret in files.items():
        path = tmp_path / variable.lower()
        path.write_text(secret + "\n")
        environment[variable] = str(path)
        environment.pop(variable.removesuffix("_FILE"), None)
    port = free_port()
    environment["FLEETMARK_METRICS_PORT"] = str(port)
    metrics_url = f"http://127.0.0.1:{port}/metrics"

    with served_hub(environment, tmp_path / "hub.log") as served:
        on_the_hubs_port = httpx.get(f"{served.url}/metrics", headers=bearer(METRICS_TOKEN))
        scraped = httpx.get(metrics_url, headers=bearer(METRICS_TOKEN))
        anonymous = httpx.get(metrics_url)
        elsewhere = httpx.get(f"http://127.0.0.1:{port}/readyz")
        report = httpx.post(f"http://127.0.0.1:{port}/api/v1/reports", json={})
        stopping = time.monotonic()
        status = served.stop()
        stopped_in = time.monotonic() - stopping

    assert on_the_hubs_port.status_code == 404
    assert scraped.status_code == 200
    assert "fleetmark_store_reachable 1.0" in scraped.text
    assert anonymous.status_code == 401
    assert (elsewhere.status_code, report.status_code) == (404, 404)
    assert (status, stopped_in < 10) == (0, True)
    assert "Traceback" not in served.output()
    with pytest.raises(httpx.ConnectError):
        httpx.get(metrics_url)
