"""Subscriptions through the API (admin): the secret answered once, URLs refused with a clear
error, deliveries listed and a dead one retried, a test event."""

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from tests.conftest import MakeClient
from tests.support import bearer

HOOK = "https://hooks.example.com/fleetmark"
ENDPOINTS = [
    ("GET", "/api/v1/subscriptions", None),
    ("POST", "/api/v1/subscriptions", {"name": "ops", "url": HOOK}),
    ("GET", "/api/v1/subscriptions/ops", None),
    ("DELETE", "/api/v1/subscriptions/ops", None),
    ("GET", "/api/v1/subscriptions/ops/deliveries", None),
    ("POST", "/api/v1/subscriptions/ops/deliveries/1/retry", None),
    ("POST", "/api/v1/subscriptions/ops/test", None),
]


def _id(endpoint: tuple[str, str, object]) -> str:
    return f"{endpoint[0]} {endpoint[1]}"


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS, ids=map(_id, ENDPOINTS))
async def test_subscriptions_need_an_admin_token(
    client: httpx.AsyncClient, read_token: str, method: str, path: str, body: object
) -> None:
    refused = await client.request(method, path, json=body, headers=bearer(read_token))
    assert refused.status_code == 403
    assert refused.json()["error"] == "insufficient_scope"
    anonymous = await client.request(method, path, json=body)
    assert anonymous.status_code == 401


async def test_the_secret_is_answered_once(client: httpx.AsyncClient, admin_token: str) -> None:
    admin = bearer(admin_token)
    created = await client.post(
        "/api/v1/subscriptions",
        json={"name": "ops", "url": HOOK, "event_types": ["fleetmark.gate.passed"]},
        headers=admin,
    )
    assert created.status_code == 201
    body = created.json()
    assert body["secret"].startswith("fmw_")
    assert len(body["secret"]) > 40
    assert body["format"] == "cloudevents"
    assert body["event_types"] == ["fleetmark.gate.passed"]

    listed = await client.get("/api/v1/subscriptions", headers=admin)
    one = await client.get("/api/v1/subscriptions/ops", headers=admin)
    assert [item["name"] for item in listed.json()] == ["ops"]
    for shown in (listed.json()[0], one.json()):
        assert "secret" not in shown
        assert body["secret"] not in str(shown)
        assert shown["url"] == HOOK

    again = await client.post(
        "/api/v1/subscriptions", json={"name": "ops", "url": HOOK}, headers=admin
    )
    assert again.status_code == 409
    assert again.json() == {
        "error": "already_exists",
        "detail": "a subscription named 'ops' exists already",
    }

    removed = await client.delete("/api/v1/subscriptions/ops", headers=admin)
    assert removed.status_code == 204
    gone = await client.get("/api/v1/subscriptions/ops", headers=admin)
    assert gone.status_code == 404
    assert gone.json() == {"error": "unknown_subscription", "detail": "no subscription named 'ops'"}


async def test_a_slack_webhooks_secret_is_answered_by_no_endpoint(
    client: httpx.AsyncClient, admin_token: str
) -> None:
    admin = bearer(admin_token)
    secret = "ZyXwVuTsRqPoNmLkJiHgFeDc"
    url = f"https://hooks.slack.com/services/T0123ABCD/B0123ABCD/{secret}"
    created = await client.post(
        "/api/v1/subscriptions", json={"name": "chat", "url": url, "format": "slack"}, headers=admin
    )
    assert created.status_code == 201
    listed = await client.get("/api/v1/subscriptions", headers=admin)
    one = await client.get("/api/v1/subscriptions/chat", headers=admin)
    for shown in (created.json(), listed.json()[0], one.json()):
        assert shown["url"] == "https://hooks.slack.com/***"
        assert secret not in str(shown)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://hooks.example.com/", "is not https"),
        ("https://169.254.169.254/latest", "169.254.169.254 is a link-local address"),
        ("https://[::1]:8443/", "::1 is a loopback address"),
        ("https://127.1/", "127.1 resolves to 127.0.0.1, which is a loopback address"),
    ],
)
async def test_a_url_that_is_refused_is_named(
    client: httpx.AsyncClient, admin_token: str, url: str, words: str
) -> None:
    refused = await client.post(
        "/api/v1/subscriptions", json={"name": "ops", "url": url}, headers=bearer(admin_token)
    )
    assert refused.status_code == 422
    body = refused.json()
    assert body["error"] == "invalid_input"
    [problem] = body["problems"]
    assert (problem["field"], problem["rule"]) == ("url", "refused_destination")
    assert words in problem["message"]
    assert "FLEETMARK_WEBHOOK_ALLOW_PRIVATE" in problem["message"]


async def test_private_receivers_may_be_allowed(make_client: MakeClient, admin_token: str) -> None:
    client = await make_client(webhook_allow_private=True)
    created = await client.post(
        "/api/v1/subscriptions",
        json={"name": "in-cluster", "url": "http://receiver.ops.svc:8080/", "format": "slack"},
        headers=bearer(admin_token),
    )
    assert created.status_code == 201


async def test_a_test_event_is_listed_and_a_dead_delivery_retried(
    client: httpx.AsyncClient, admin_token: str, session: AsyncSession
) -> None:
    admin = bearer(admin_token)
    await client.post("/api/v1/subscriptions", json={"name": "ops", "url": HOOK}, headers=admin)

    tested = await client.post("/api/v1/subscriptions/ops/test", headers=admin)
    assert tested.status_code == 202
    delivery = tested.json()
    assert (delivery["event_type"], delivery["state"], delivery["attempts"]) == (
        "fleetmark.test",
        "pending",
        0,
    )
    listed = await client.get("/api/v1/subscriptions/ops/deliveries", headers=admin)
    assert [item["id"] for item in listed.json()] == [delivery["id"]]

    path = f"/api/v1/subscriptions/ops/deliveries/{delivery['id']}/retry"
    pending = await client.post(path, headers=admin)
    assert pending.status_code == 409
    assert pending.json()["detail"] == (
        f"delivery {delivery['id']} is pending; only a dead delivery is retried"
    )

    # As the delivery task leaves a delivery whose retry window has passed.
    await session.execute(
        text(
            "UPDATE event_delivery SET state = 'dead', attempts = 9, last_status_code = 503 "
            "WHERE id = :id"
        ),
        {"id": delivery["id"]},
    )
    await session.commit()
    dead = (await client.get("/api/v1/subscriptions/ops/deliveries", headers=admin)).json()[0]
    assert (dead["state"], dead["last_status_code"], dead["next_attempt_at"]) == ("dead", 503, None)
    retried = await client.post(path, headers=admin)
    assert retried.status_code == 200
    assert (retried.json()["state"], retried.json()["attempts"]) == ("pending", 0)

    unknown = await client.post("/api/v1/subscriptions/ops/deliveries/999999/retry", headers=admin)
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "unknown_delivery"
