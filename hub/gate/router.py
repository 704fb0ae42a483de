"""Promotion gate endpoints (read scope): the gate for a platform commit or a workload version,
and the newest platform commit of an environment that passes."""

from typing import Annotated

from fastapi import APIRouter, Query

from hub.client.params import Text
from hub.client.schemas.gate import GateOptions, GateQuery, PromotableQuery
from hub.deps import ReadAccess, ReadContextDep, ReadSessionDep, sort_order
from hub.errors import error_response, error_responses
from hub.gate import service
from hub.gate.schemas import GateResult, Promotable
from hub.sorting import Order

router = APIRouter(
    prefix="/api/v1",
    tags=["gates"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)

_NOT_FOUND = error_response(404, "Unknown environment, cluster type, commit, workload or version.")

ClusterOrder = Annotated[Order, sort_order(service.COLUMNS, "clusters listed")]


def _page(options: GateOptions, order: Order) -> service.ClusterPage:
    return service.ClusterPage(limit=options.limit, offset=options.offset, order=order)


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
    return await service.promotion_gate(
        session,
        environment=query.environment,
        commit=query.commit,
        workload=query.workload,
        version=query.version,
        soak=query.soak,
        stale_after=context.stale_after,
        allow_stale=query.allow_stale,
        min_clusters=query.min_clusters,
        now=context.now,
        cluster_types=query.cluster_types or (),
        selector=query.selector,
        page=_page(query, order),
    )


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
        environment=environment,
        soak=query.soak,
        stale_after=context.stale_after,
        allow_stale=query.allow_stale,
        min_clusters=query.min_clusters,
        max_commits=query.max_commits,
        now=context.now,
        cluster_types=query.cluster_types or (),
        selector=query.selector,
        page=_page(query, order),
    )
