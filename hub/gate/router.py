"""Promotion gate endpoints (read scope): the gate for a platform commit or a workload version,
and the newest platform commit of an environment that passes."""

from typing import Annotated

from fastapi import APIRouter, Query

from hub.client.text import Duration
from hub.deps import ReadAccess, ReadContextDep, ReadSessionDep, sort_order
from hub.errors import error_response, error_responses
from hub.gate import service
from hub.gate.schemas import GateResult, Promotable
from hub.params import Count, Limit, Offset, Text, TextList
from hub.sorting import Order

router = APIRouter(
    prefix="/api/v1",
    tags=["gates"],
    dependencies=[ReadAccess],
    responses=error_responses(401, 403, 422, 503),
)

_NOT_FOUND = error_response(404, "Unknown environment, cluster type, commit, workload or version.")

Soak = Annotated[
    Duration,
    Query(
        description="How long every expected cluster must have run the target, Ready: "
        "seconds (600), ISO 8601 (PT10M) or 10m, 1h30m.",
    ),
]
AllowStale = Annotated[
    bool,
    Query(description="Judge a silent cluster on its last report instead of blocking on it."),
]
MinClusters = Annotated[
    Count, Query(description="Pending unless at least this many clusters are expected.")
]
ClustersListed = Annotated[
    Limit,
    Query(
        description="Expected clusters listed with their evidence, furthest from compliance "
        "first; the counts cover them all.",
    ),
]
ClustersSkipped = Annotated[Offset, Query(description="Expected clusters skipped before the list.")]
ClusterOrder = Annotated[Order, sort_order(service.COLUMNS, "clusters listed")]
ClusterTypes = Annotated[
    TextList | None,
    Query(
        alias="cluster_type",
        description="Only the expected clusters of this cluster type; repeatable (any of them).",
    ),
]
Selector = Annotated[
    Text | None,
    Query(
        description="Only the expected clusters whose labels it selects, as kubectl's -l: "
        "key=value,key!=value,key in (a,b),key notin (a),key,!key.",
    ),
]


@router.get("/gates/promotion", response_model=GateResult, responses=_NOT_FOUND)
async def promotion_gate(
    session: ReadSessionDep,
    context: ReadContextDep,
    order: ClusterOrder,
    environment: Annotated[Text, Query(description="The environment the target is in.")],
    commit: Annotated[
        Text | None, Query(description="A platform GitOps commit: full sha or a prefix of 7+.")
    ] = None,
    workload: Text | None = None,
    version: Annotated[Text | None, Query(description="With workload: its version.")] = None,
    soak: Soak = service.DEFAULT_SOAK,
    allow_stale: AllowStale = False,
    min_clusters: MinClusters = 1,
    cluster_types: ClusterTypes = None,
    selector: Selector = None,
    limit: ClustersListed = 100,
    offset: ClustersSkipped = 0,
) -> GateResult:
    """May the platform commit (or the workload version) leave the environment? passed,
    pending or failed, with counts over every expected cluster and the evidence of a page of
    them, those furthest from compliance first."""
    return await service.promotion_gate(
        session,
        environment=environment,
        commit=commit,
        workload=workload,
        version=version,
        soak=soak,
        stale_after=context.stale_after,
        allow_stale=allow_stale,
        min_clusters=min_clusters,
        now=context.now,
        cluster_types=cluster_types or (),
        selector=selector,
        page=service.ClusterPage(limit=limit, offset=offset, order=order),
    )


@router.get(
    "/environments/{environment}/promotable", response_model=Promotable, responses=_NOT_FOUND
)
async def promotable(
    environment: Text,
    session: ReadSessionDep,
    context: ReadContextDep,
    order: ClusterOrder,
    soak: Soak = service.DEFAULT_SOAK,
    allow_stale: AllowStale = False,
    min_clusters: MinClusters = 1,
    max_commits: Annotated[
        int,
        Query(
            ge=1,
            le=service.MAX_PROMOTABLE_COMMITS,
            description="How many commits of the branch to walk back at most.",
        ),
    ] = 50,
    cluster_types: ClusterTypes = None,
    selector: Selector = None,
    limit: ClustersListed = 100,
    offset: ClustersSkipped = 0,
) -> Promotable:
    """The newest commit of the environment's platform branch whose gate passes (walking back
    its first-parent chain from the head), with that gate's evidence."""
    return await service.promotable(
        session,
        environment=environment,
        soak=soak,
        stale_after=context.stale_after,
        allow_stale=allow_stale,
        min_clusters=min_clusters,
        max_commits=max_commits,
        now=context.now,
        cluster_types=cluster_types or (),
        selector=selector,
        page=service.ClusterPage(limit=limit, offset=offset, order=order),
    )
