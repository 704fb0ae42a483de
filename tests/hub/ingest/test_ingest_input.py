"""Report ingest at its edge: who may report, what a report may hold, and how it is read."""

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hub.ingest.schemas import MAX_MESSAGE_CHARS, MAX_REPORT_BYTES_HEADER, TRUNCATION_MARK
from hub.pages.headers import PAGES_POLICY
from tests.conftest import MakeAgent, MakeClient, RegisterCluster
from tests.support import DIGEST, SHA_A, SHA_B, Agent, Store, bearer, kustomization
from tests.support import report as report_body

# --- who may report -----------------------------------------------------------------------


async def test_token_of_another_cluster_is_refused(
    make_agent: MakeAgent, register_cluster: RegisterCluster, store: Store
) -> None:
    victim = await make_agent("drone-dev-1")
    intruder_token = await register_cluster("large-dev-1")
    victim.token = intruder_token

    response = await victim.send([kustomization("app")])

    assert response.status_code == 403
    assert response.json()["error"] == "cluster_mismatch"
    assert "'large-dev-1'" in response.json()["detail"]
    assert "'drone-dev-1'" in response.json()["detail"]
    assert await store.objects("drone-dev-1") == {}
    assert await store.objects("large-dev-1") == {}
    assert await store.agent_sessions("large-dev-1") == {}


@pytest.mark.parametrize(
    "headers",
    [{}, bearer("fmc_not-a-token-anyone-was-given"), {"Authorization": "Basic dXNlcjpwdw=="}],
    ids=["missing", "unknown", "not-bearer"],
)
async def test_report_without_a_valid_token_is_unauthenticated(
    agent: Agent, headers: dict[str, str], store: Store
) -> None:
    body = report_body(agent.cluster, sequence=1, observed_at=agent.clock.now)

    response = await agent.client.post("/api/v1/reports", json=body, headers=headers)

    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"
    assert response.headers["www-authenticate"] == "Bearer"
    assert await store.agent_sessions(agent.cluster) == {}


async def test_report_answers_carry_the_hubs_headers_and_other_methods_are_refused(
    agent: Agent,
) -> None:
    accepted = await agent.send([kustomization("app")])
    refused = await agent.client.post("/api/v1/reports", json={}, headers=bearer("fmc_unknown"))
    listed = await agent.client.get("/api/v1/reports", headers=bearer(agent.token))

    assert (accepted.status_code, refused.status_code) == (200, 401)
    for answer in (accepted, refused):
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert answer.headers["content-security-policy"] == PAGES_POLICY
    assert accepted.headers[MAX_REPORT_BYTES_HEADER] == str(4 * 1024 * 1024)
    assert listed.status_code == 405
    assert listed.json() == {"error": "method_not_allowed", "detail": "Method Not Allowed"}
    assert listed.headers["allow"] == "POST"


async def test_report_of_a_time_before_1970_without_a_valid_token_is_unauthenticated(
    agent: Agent,
) -> None:
    body = report_body(agent.cluster, sequence=1, observed_at=agent.clock.now)

    response = await agent.client.post(
        "/api/v1/reports",
        json=body | {"observed_at": "0001-01-01T00:00:00Z"},
        headers=bearer("fmc_not-a-token-anyone-was-given"),
    )

    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"


async def test_revoked_token_is_refused_at_once(agent: Agent, admin_token: str) -> None:
    await agent.send_ok([kustomization("app")])

    revoked = await agent.client.delete(
        f"/api/v1/clusters/{agent.cluster}/token", headers=bearer(admin_token)
    )
    response = await agent.send([kustomization("app")])

    assert revoked.status_code == 204
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


async def test_api_token_cannot_report(agent: Agent, admin_token: str) -> None:
    agent.token = admin_token

    response = await agent.send([kustomization("app")])

    assert response.status_code == 401


# --- what a report may hold ---------------------------------------------------------------


def _without(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in body.items() if name != key}


def _with_objects(body: dict[str, Any], *objects: dict[str, Any]) -> dict[str, Any]:
    return body | {"objects": list(objects)}


MALFORMED = {
    "missing field": (lambda body: _without(body, "agent"), "agent: Field required"),
    "wrong type": (lambda body: body | {"sequence": "seven"}, "sequence: Input should be"),
    "bad schema": (
        lambda body: body | {"schema": "fleetmark.report/v2"},
        "schema: Input should be 'fleetmark.report/v1'",
    ),
    "naive time": (
        lambda body: body | {"observed_at": "2026-11-22T12:00:00"},
        "observed_at: Input should have timezone info",
    ),
    "year 1": (
        lambda body: body | {"observed_at": "0001-01-01T00:00:00Z"},
        "observed_at: must be from 1970-01-01T00:00:00Z",
    ),
    "before 1970": (
        lambda body: body | {"observed_at": "1969-12-31T23:59:59Z"},
        "observed_at: must be from 1970-01-01T00:00:00Z",
    ),
    "last transition in year 1": (
        lambda body: _with_objects(
            body, kustomization("app", last_transition_at="0001-01-01T00:00:00+14:00")
        ),
        "objects.0.last_transition_at: must be from 1970-01-01T00:00:00Z",
    ),
    "sequence zero": (lambda body: body | {"sequence": 0}, "sequence: Input should be greater"),
    "unknown field": (lambda body: body | {"colour": "red"}, "colour: Extra inputs"),
    "duplicate object": (
        lambda body: _with_objects(body, kustomization("app"), kustomization("app")),
        "objects.1: flux Kustomization flux-system/app appears more than once",
    ),
    "NUL character": (
        lambda body: _with_objects(body, kustomization("app", message="bad\x00byte")),
        "objects.0.message: must not contain a NUL character",
    ),
    "NUL characters in a label and a key": (
        lambda body: body | {"cluster": body["cluster"] | {"labels": {"a\x00": "b\x00"}}},
        "cluster.labels.'a\\x00' (key): must not contain a NUL character; "
        "cluster.labels.'a\\x00': must not contain a NUL character",
    ),
    "bad reconciler": (
        lambda body: _with_objects(body, kustomization("app", reconciler="Flux CD")),
        "objects.0.reconciler: String should match pattern",
    ),
    "nested wrong type": (
        lambda body: _with_objects(body, kustomization("app", ready="maybe")),
        "objects.0.ready: Input should be a valid boolean",
    ),
}


@pytest.mark.parametrize(("mutate", "expected"), MALFORMED.values(), ids=MALFORMED.keys())
async def test_malformed_report_names_the_field(
    agent: Agent, store: Store, mutate: Any, expected: str
) -> None:
    body = mutate(report_body(agent.cluster, sequence=1, observed_at=agent.clock.now))

    response = await agent.client.post("/api/v1/reports", json=body, headers=bearer(agent.token))

    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_input"
    assert expected in response.json()["detail"]
    assert await store.agent_sessions(agent.cluster) == {}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"schema": "fleetmark.report/v1", ', "Invalid JSON"),
        (b"\xff\xfe not even text", "Invalid JSON"),
        (b'{"cluster": {"name": "\\ud800"}}', "Invalid JSON"),
        (b"[]", "Input should be an object"),
        (b"", "Invalid JSON"),
    ],
    ids=["truncated", "binary", "lone-surrogate", "array", "empty"],
)
async def test_body_that_is_not_a_report_object_is_refused(
    agent: Agent, content: bytes, expected: str
) -> None:
    response = await agent.client.post(
        "/api/v1/reports",
        content=content,
        headers=bearer(agent.token) | {"Content-Type": "application/json"},
    )

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_input"
    assert expected in response.json()["detail"]


LIMIT = 2048


@pytest.fixture
async def small_agent(make_client: MakeClient, agent: Agent) -> Agent:
    """The same cluster, talking to a hub that takes reports of at most LIMIT bytes."""
    agent.client = await make_client(max_report_bytes=LIMIT)
    return agent


def _oversized(agent: Agent) -> bytes:
    big = kustomization("app", message="x" * LIMIT)
    body = json.dumps(
        report_body(agent.cluster, sequence=1, observed_at=agent.clock.now, objects=[big])
    )
    return body.encode()


async def test_report_over_the_size_limit_by_content_length(
    small_agent: Agent, store: Store
) -> None:
    body = _oversized(small_agent)

    response = await small_agent.client.post(
        "/api/v1/reports",
        content=body,
        headers=bearer(small_agent.token) | {"Content-Type": "application/json"},
    )

    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"
    assert response.json()["detail"] == f"the report is {len(body)} bytes; the limit is {LIMIT}"
    assert await store.agent_sessions(small_agent.cluster) == {}


async def test_report_over_the_size_limit_without_content_length(
    small_agent: Agent, store: Store
) -> None:
    body = _oversized(small_agent)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 512):
            yield body[start : start + 512]

    request = small_agent.client.build_request(
        "POST",
        "/api/v1/reports",
        content=chunks(),
        headers=bearer(small_agent.token) | {"Content-Type": "application/json"},
    )
    assert "content-length" not in request.headers
    response = await small_agent.client.send(request)

    assert response.status_code == 413
    assert response.json()["detail"] == f"the report is over the limit of {LIMIT} bytes"
    assert await store.agent_sessions(small_agent.cluster) == {}


async def test_report_under_the_size_limit_is_taken(small_agent: Agent) -> None:
    reply = await small_agent.send_ok([kustomization("app")])

    assert reply["accepted"] == 1


# --- how a report is read -----------------------------------------------------------------


async def test_non_ascii_text_is_kept_intact(agent: Agent, store: Store, read_token: str) -> None:
    message = "同期に失敗しました: イメージを取得できません 🚀🔥 — naïve café"
    record = kustomization(
        "アプリ-🚀", reason="取得失敗", message=message, source={"path": "クラスター/ドローン"}
    )

    await agent.send_ok([record])

    stored = (await store.objects(agent.cluster))["アプリ-🚀"]
    assert (stored["reason"], stored["message"], stored["source_path"]) == (
        "取得失敗",
        message,
        "クラスター/ドローン",
    )
    detail = await agent.client.get(f"/api/v1/clusters/{agent.cluster}", headers=bearer(read_token))
    (shown,) = detail.json()["objects"]
    assert (shown["name"], shown["message"], shown["source_path"]) == (
        "アプリ-🚀",
        message,
        "クラスター/ドローン",
    )


async def test_very_long_message_is_stored_truncated(agent: Agent, store: Store) -> None:
    message = "helm upgrade failed: " + "ü" * 1_000_000

    reply = await agent.send_ok([kustomization("app", message=message)])

    assert reply["accepted"] == 1
    stored = (await store.objects(agent.cluster))["app"]["message"]
    assert len(stored) == MAX_MESSAGE_CHARS
    assert stored.endswith(TRUNCATION_MARK)
    assert message.startswith(stored.removesuffix(TRUNCATION_MARK))
    (transition,) = await store.transitions(agent.cluster)
    assert transition["message"] == stored


REVISIONS = {
    "flux git": (f"main@sha1:{SHA_A}", SHA_A, None),
    "flux git full ref": (f"refs/heads/main@sha1:{SHA_A}", SHA_A, None),
    "flux git legacy": (f"main/{SHA_A}", SHA_A, None),
    "sha1 prefix": (f"sha1:{SHA_A}", SHA_A, None),
    "bare sha": (SHA_A, SHA_A, None),
    "bare sha upper case": (SHA_A.upper(), SHA_A, None),
    "oci tag and digest": (f"v1.2.3@sha256:{DIGEST}", None, "v1.2.3"),
    "oci digest": (f"sha256:{DIGEST}", None, f"sha256:{DIGEST}"),
    "helm chart": ("1.2.3", None, "1.2.3"),
    "helm chart with build": ("0.4.0-rc.1+build.7", None, "0.4.0-rc.1+build.7"),
}


@pytest.mark.parametrize(("revision", "sha", "version"), REVISIONS.values(), ids=REVISIONS.keys())
async def test_revision_forms_are_parsed(
    agent: Agent, store: Store, revision: str, sha: str | None, version: str | None
) -> None:
    await agent.send_ok([kustomization("app", revision)])

    stored = (await store.objects(agent.cluster))["app"]
    assert stored["applied_revision"] == revision
    assert (stored["applied_sha"], stored["applied_version"]) == (sha, version)
    assert stored["attempted_sha"] == sha
    (transition,) = await store.transitions(agent.cluster)
    assert (transition["applied_sha"], transition["applied_version"]) == (sha, version)


async def test_failed_upgrade_keeps_applied_and_attempted_apart(agent: Agent, store: Store) -> None:
    record = kustomization(
        "app",
        f"main@sha1:{SHA_A}",
        attempted_revision=f"main@sha1:{SHA_B}",
        ready=False,
        reason="ReconciliationFailed",
    )

    await agent.send_ok([record])

    stored = (await store.objects(agent.cluster))["app"]
    assert (stored["applied_sha"], stored["attempted_sha"]) == (SHA_A, SHA_B)
