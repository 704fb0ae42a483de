"""Promotion gate endpoints (read scope): the gate for a platform commit or a workload version,
the same gate as the decision a promotion engine reads, and the newest platform commit of an
environment that passes."""

from typing import Annotated, Any

from fastapi import APIRouter, Query

from hub.client.params import Text
from hub.client.schemas.gate import GateQuery, PromotableQuery
from hub.database import ReadSession
from hub.deps import (
    PublicUrlDep,
    ReadAccess,
    ReadContext,
    ReadContextDep,
    ReadSessionDep,
    sort_order,
)
from hub.errors import error_response, error_responses
from hub.gate import service
from hub.gate.schemas import DECISION_SCHEMA, GateResult, Promotable, PromotionDecision
from hub.sorting import OWN_ORDER, Order

router = APIRouter(
    prefix="/api/v1",
    tags=["gates"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)

_NOT_FOUND = error_response(404, "Unknown environment, cluster type, commit, workload or version.")

ClusterOrder = Annotated[Order, sort_order(service.COLUMNS, "clusters listed")]


async def _gate(
    session: ReadSession, context: ReadContext, query: GateQuery, order: Order
) -> GateResult:
    return await service.promotion_gate(
        session,
        query,
        now=context.now,
        stale_after=context.stale_after,
        order=order,
        halting=context.halting,
    )


@router.get("/gates/promotion", response_model=GateResult, responses=_NOT_FOUND)
async def promotion_gate(
    session: ReadSessionDep,
    context: ReadContextDep,
    order: ClusterOrder,
    query: Annotated[GateQuery, Query()],
) -> GateResult:
    """May the platform commit (or the workload version) leave the environment? passed,
    pending or failed, with counts over every expected cluster and the evidence of a page of
    them, those furthest from compliance first."""
    return await _gate(session, context, query, order)


def _example(verdict: str, reason: str, opens_at: str | None, **counts: int) -> dict[str, Any]:
    return {
        "summary": verdict,
        "value": {
            "schema": DECISION_SCHEMA,
            "allowed": verdict == "passed",
            "verdict": verdict,
            "reason": reason,
            "opens_at": opens_at,
            "evidence_url": "https://fleetmark.example.com/gate?environment=dev&commit=4f2a9c1d7e30",
            "counts": {"reporting": 3, "stale": 0, "never_reported": 0} | counts,
        },
    }


DECISION_EXAMPLES = {
    "passed": _example(
        "passed",
        "all 3 expected cluster(s) in dev run platform commit 4f2a9c1d7e30 and have been Ready "
        "for at least 10m",
        None,
        expected=3,
        compliant=3,
        failed=0,
    ),
    "pending": _example(
        "pending",
        "1 of 3 expected cluster(s) in dev run platform commit 4f2a9c1d7e30, Ready and soaked; "
        "drone-02: runs platform commit 4f2a9c1d7e30, Ready; soak ends in 5m",
        "2026-05-04T09:45:00Z",
        expected=3,
        compliant=1,
        failed=0,
    ),
    "failed": _example(
        "failed",
        "1 of 3 expected cluster(s) in dev failed on platform commit 4f2a9c1d7e30; drone-02: "
        "reconciling platform commit 4f2a9c1d7e30 failed (HealthCheckFailed)",
        None,
        expected=3,
        compliant=2,
        failed=1,
    ),
}


def document_decision_examples(document: dict[str, Any]) -> None:
    """Puts the decision's examples in the OpenAPI document: FastAPI drops the nulls of the
    examples a route declares, and `opens_at` is null unless the gate is pending."""
    answer = document["paths"]["/api/v1/gates/decision"]["get"]["responses"]["200"]
    answer["content"]["application/json"]["examples"] = DECISION_EXAMPLES


@router.get("/gates/decision", response_model=PromotionDecision, responses=_NOT_FOUND)
async def gate_decision(
    session: ReadSessionDep,
    context: ReadContextDep,
    public_url: PublicUrlDep,
    query: Annotated[GateQuery, Query()],
) -> PromotionDecision:
    """The promotion gate as a decision any promotion engine reads (fleetmark.gate.decision/v1,
    docs/api.md): 200 for passed, pending and failed alike, `allowed` true only for
    passed. `limit` and `offset` only page the evidence page it links to."""
    result = await _gate(session, context, query.model_copy(update={"limit": 1}), OWN_ORDER)
    return service.decision(result, service.evidence_url(public_url, query))


@router.get(
    "/environments/{environment}/promotable", response_model=Promotable, responses=_NOT_FOUND
)
async def promotable(
    environment: Text,
    session: ReadSessionDep,
    context: ReadContextDep,
    order: ClusterOrder,
    query: Annotated[PromotableQuery, Query()],
) -> Promotable:
    """The newest commit of the environment's platform branch whose gate passes (walking back
    its first-parent chain from the head), with that gate's evidence."""
    return await service.promotable(
        session,
        environment,
        query,
        now=context.now,
        stale_after=context.stale_after,
        order=order,
        halting=context.halting,
    )
