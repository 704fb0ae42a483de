"""GET /api/v1/gates/decision: the promotion gate as the small, versioned document a promotion
engine reads (fleetmark.gate.decision/v1), its evidence URL, and its contract kept as test data
so that a change to it fails here."""

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from hub.client.operations import GATE_DECISION
from tests.conftest import MakeClient
from tests.hub.client.test_contract import answered
from tests.hub.gate.decisions import DECISION, Decisions, decide, pending_passed_failed
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, bearer

CONTRACT = Path(__file__).parents[2] / "data" / "contracts" / "fleetmark.gate.decision-v1.json"


@pytest.fixture
async def decisions(
    fleet: Fleet, client: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> Decisions:
    return await pending_passed_failed(fleet, client, read_token, clock)


def counts(expected: int, compliant: int, failed: int) -> dict[str, int]:
    return {
        "expected": expected,
        "compliant": compliant,
        "failed": failed,
        "reporting": expected,
        "stale": 0,
        "never_reported": 0,
    }


async def test_pending_passed_and_failed_are_all_answered_200(decisions: Decisions) -> None:
    short = decisions.commit[:12]
    pending, passed, failed = (decisions.bodies[v] for v in ("pending", "passed", "failed"))
    evidence = f"http://hub.test/gate?environment=dev&commit={decisions.commit}"

    assert pending == {
        "schema": "fleetmark.gate.decision/v1",
        "allowed": False,
        "verdict": "pending",
        "reason": f"0 of 2 expected cluster(s) in dev run platform commit {short}, Ready and "
        f"soaked; {pending['reason'].split('; ', 1)[1]}",
        "opens_at": (decisions.applied_at + timedelta(minutes=10))
        .isoformat()
        .replace("+00:00", "Z"),
        "evidence_url": evidence,
        "counts": counts(2, 0, 0),
    }
    assert pending["reason"].split("; ", 1)[1].startswith("drone-01: ")
    assert passed == {
        "schema": "fleetmark.gate.decision/v1",
        "allowed": True,
        "verdict": "passed",
        "reason": f"all 2 expected cluster(s) in dev run platform commit {short} and have been "
        "Ready for at least 10m",
        "opens_at": None,
        "evidence_url": evidence,
        "counts": counts(2, 2, 0),
    }
    assert failed["allowed"] is False
    assert failed["verdict"] == "failed"
    assert failed["opens_at"] is None
    assert failed["counts"] == counts(2, 1, 1)
    assert failed["reason"].startswith(
        f"1 of 2 expected cluster(s) in dev failed on platform commit {short}; large-01: "
    )


async def test_the_evidence_url_opens_the_gate_page_of_the_same_question(
    fleet: Fleet, client: httpx.AsyncClient, read_token: str
) -> None:
    await fleet.add("drone-01", "drone")
    await fleet.add("large-01", "large")
    asked = {
        "environment": "dev",
        "workload": WORKLOAD,
        "version": "1.0.0",
        "soak": "15m",
        "cluster_type": ["drone", "large"],
        "selector": "size=small",
    }

    body = await decide(client, read_token, **asked)
    page = await client.get(body["evidence_url"], headers=bearer(read_token))

    assert body["evidence_url"] == (
        f"http://hub.test/gate?environment=dev&workload={WORKLOAD}&version=1.0.0&soak=900.0"
        "&cluster_type=drone&cluster_type=large&selector=size%3Dsmall"
    )
    assert page.status_code == 200, page.text
    assert f"{WORKLOAD} 1.0.0" in page.text


async def test_the_evidence_url_starts_with_the_public_url_when_set(
    fleet: Fleet, make_client: MakeClient, read_token: str
) -> None:
    client = await make_client(public_url="https://fleetmark.example.com/hub/")
    head = fleet.platform_heads["dev"]

    body = await decide(client, read_token, environment="dev", commit=head)

    assert body["evidence_url"] == (
        f"https://fleetmark.example.com/hub/gate?environment=dev&commit={head}"
    )


async def test_the_decision_needs_a_read_token(fleet: Fleet, client: httpx.AsyncClient) -> None:
    params = {"environment": "dev", "commit": fleet.platform_heads["dev"]}

    response = await client.get(DECISION, params=params)

    assert response.status_code == 401


async def test_unknown_targets_are_404_and_bad_questions_422(
    fleet: Fleet, client: httpx.AsyncClient, read_token: str
) -> None:
    head = fleet.platform_heads["dev"]

    async def get(**params: Any) -> httpx.Response:
        return await client.get(DECISION, params=params, headers=bearer(read_token))

    environment = await get(environment="qa", commit=head)
    version = await get(environment="dev", workload=WORKLOAD, version="9.9.9")
    neither = await get(environment="dev")
    soak = await get(environment="dev", commit=head, soak="soon")

    assert (environment.status_code, environment.json()["error"]) == (404, "unknown_environment")
    assert (version.status_code, version.json()["error"]) == (404, "unknown_version")
    assert neither.status_code == 422
    assert neither.json()["detail"] == (
        "commit, or workload and version: give one of the two, and only one"
    )
    assert soak.status_code == 422
    assert "soak" in soak.json()["detail"]


def test_the_v1_contract_does_not_change(openapi_document: dict[str, Any]) -> None:
    """Engines parse fleetmark.gate.decision/v1 as it is. A new field, type or requirement is
    fleetmark.gate.decision/v2, answered beside v1: never a change to v1."""
    kept = json.loads(CONTRACT.read_text())

    assert answered(openapi_document, GATE_DECISION) == kept, (
        "the answer of GET /api/v1/gates/decision is no longer fleetmark.gate.decision/v1 as "
        f"{CONTRACT.name} keeps it: engines read v1 as it is, so leave v1 alone and add "
        "fleetmark.gate.decision/v2 beside it (docs/integrations.md)"
    )


def test_the_documented_examples_are_v1_documents(openapi_document: dict[str, Any]) -> None:
    content = openapi_document["paths"][GATE_DECISION.path]["get"]["responses"]["200"]["content"]
    examples = content["application/json"]["examples"]

    assert set(examples) == {"passed", "pending", "failed"}
    for verdict, example in examples.items():
        decision = GATE_DECISION.answer.model_validate(example["value"])  # type: ignore[union-attr]
        assert decision.verdict == verdict
        assert decision.allowed == (verdict == "passed")
        assert set(example["value"]) == set(json.loads(CONTRACT.read_text())["properties"])
        assert isinstance(decision.opens_at, datetime | None)
