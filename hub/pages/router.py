"""The built-in pages (docs/pages.md): each a view of an API answer, rendered on the hub by the
services the REST API calls, with the same parameters and paging, its filters in the query
string so its URL can be shared. No script; not API operations, so not in the OpenAPI document.
"""

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.routing import APIRoute

from hub.client.params import Limit, Offset, Text
from hub.client.schemas.fleet import HistoryQuery
from hub.client.schemas.gate import DEFAULT_SOAK, GateQuery
from hub.client.schemas.rollouts import RolloutHealthQuery
from hub.client.text import Duration
from hub.clusters import service as clusters
from hub.deps import ClockDep, ReadContextDep, ReadSessionDep, SessionDep, SettingsDep, sort_order
from hub.drift import service as drift
from hub.drift.schemas import Reason
from hub.envdiff import service as envdiff
from hub.errors import FleetmarkError, NotAuthenticated, TooManyAttempts, describe_validation_error
from hub.fleet import service as fleet
from hub.gate import service as gate
from hub.gate.policy import ClusterState, Verdict
from hub.gate.schemas import GateResult
from hub.harvest import service as harvest
from hub.pages.access import (
    FailedSignInsDep,
    PageUrl,
    SignInRequired,
    client_address,
    is_https,
    local_path,
    require_reader,
    sign_in_cookie,
    sign_in_id,
)
from hub.pages.forms import (
    FormToken,
    keep_sign_in_form,
    refuse_forged_sign_in,
    refuse_forged_sign_out,
    sign_in_form_nonce,
    sign_in_form_token,
)
from hub.pages.questions import DiffPage, DriftPage, FleetPage, GatePage, TimelinePage
from hub.pages.rendering import PAGE_SIZE, STATIC, query, refresh_after, render
from hub.pages.sorting import Table
from hub.rollouts import service as rollouts
from hub.settings import HubSettings
from hub.sorting import Order
from hub.timeline import service as timeline
from hub.tokens import service as tokens

# How many of an environment's newest platform commits the gate page offers.
NEWEST_COMMITS = 5
# An API token is 47 characters; anything much longer is not one.
MAX_TOKEN_CHARS = 200


class PageRoute(APIRoute):
    """A page answers in HTML when it cannot show what was asked: the browser is sent to the
    sign-in form, and a domain error or a bad parameter is shown as a page with its status."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInRequired as needed:
                return RedirectResponse(f"/login?{query({'next': needed.back_to})}", 303)
            except RequestValidationError as exc:
                return render(
                    request, "error.html", status_code=422, problem=describe_validation_error(exc)
                )
            except FleetmarkError as exc:
                response = render(
                    request, "error.html", status_code=exc.status_code, problem=exc.detail
                )
                response.headers.update(exc.headers or {})
                if isinstance(exc, NotAuthenticated):
                    response.headers["WWW-Authenticate"] = "Bearer"
                return response

        return page


# The sign-in form and the style sheet are open to all; every page needs a reader.
public = APIRouter(include_in_schema=False, route_class=PageRoute)
router = APIRouter(
    include_in_schema=False, route_class=PageRoute, dependencies=[Depends(require_reader)]
)

PageLimit = Annotated[Limit, Query(description="Rows per page.")]
# The drift reasons the Fleet page counts apart, each with its count in the fleet's answer;
# the others it counts as "other" (drift_other).
SHOWN_REASONS = (
    (Reason.BEHIND, "drift_behind"),
    (Reason.FAILING, "drift_failing"),
    (Reason.STALE, "drift_stale"),
    (Reason.LIVE_DRIFT, "drift_live"),
)

CLUSTER_OBJECTS = Table(
    {
        "object": lambda row: (row.kind, row.namespace, row.name),
        "ready": lambda row: {False: 0, None: 1, True: 2}[row.ready],
        "reason": lambda row: row.reason,
        "since": lambda row: row.last_transition_at,
    }
)
BRANCHES = Table(
    {
        "branch": lambda row: row.name,
        "environment": lambda row: row.environment,
        "committed": lambda row: row.head_committed_at,
        "harvested": lambda row: row.harvested_at,
        "lag": lambda row: row.lag_seconds,
        "commits": lambda row: row.commits,
    }
)

# The order each table is asked for (`?sort=`): paged ones sort in their listing's query, the
# others here (hub/pages/sorting.py).
FleetOrder = Annotated[Order, sort_order(fleet.CLUSTER_COLUMNS, "clusters")]
DriftOrder = Annotated[Order, sort_order(drift.COLUMNS, "rows")]
DiffOrder = Annotated[Order, sort_order(envdiff.COLUMNS, "rows")]
ObjectOrder = Annotated[Order, sort_order(tuple(CLUSTER_OBJECTS.columns), "objects")]
GateOrder = Annotated[Order, sort_order(gate.COLUMNS, "clusters")]
BranchOrder = Annotated[Order, sort_order(tuple(BRANCHES.columns), "branches")]


@public.get("/static/fleetmark.css")
async def style_sheet() -> FileResponse:
    return FileResponse(STATIC / "fleetmark.css", media_type="text/css")


def _sign_in_page(
    request: Request,
    settings: HubSettings,
    back_to: str,
    *,
    status_code: int = 200,
    problem: str | None = None,
) -> Response:
    nonce = sign_in_form_nonce(request)
    response = render(
        request,
        "login.html",
        status_code=status_code,
        back_to=back_to,
        form_token=sign_in_form_token(settings.token_secret.get_secret_value(), nonce),
        open_access=settings.mode == "development",
        problem=problem,
    )
    keep_sign_in_form(request, response, nonce)
    return response


@public.get("/login")
async def sign_in_form(
    request: Request,
    settings: SettingsDep,
    next_page: Annotated[PageUrl, Query(alias="next")] = "/",
) -> Response:
    return _sign_in_page(request, settings, local_path(next_page))


@public.post("/login")
async def sign_in(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    failed: FailedSignInsDep,
    token: Annotated[str, Form(max_length=MAX_TOKEN_CHARS)],
    next_page: Annotated[PageUrl, Form(alias="next")] = "/",
    form_token: Annotated[FormToken | None, Form()] = None,
) -> Response:
    """Signs the browser in with a read token: its cookie (HttpOnly, out of reach of scripts)
    holds the id of a new sign-in, not the token."""
    secret = settings.token_secret.get_secret_value()
    refuse_forged_sign_in(request, form_token, secret)
    address, now = client_address(request), clock()
    wait = failed.retry_after(address, now)
    if wait is not None:
        raise TooManyAttempts(
            f"too many failed sign-ins from {address}; try again in {wait} seconds",
            headers={"Retry-After": str(wait)},
        )
    back_to = local_path(next_page)
    lifetime = settings.sign_in_lifetime
    try:
        signed_in = await tokens.sign_in(
            session,
            token.strip(),
            now=now,
            lifetime=lifetime,
            token_secret=secret,
        )
    except NotAuthenticated as exc:
        failed.record(address, now)
        return _sign_in_page(request, settings, back_to, status_code=401, problem=exc.detail)
    response = RedirectResponse(back_to, status_code=303)
    response.set_cookie(
        sign_in_cookie(request),
        signed_in,
        max_age=int(lifetime.total_seconds()),
        path="/",
        secure=is_https(request),
        httponly=True,
        samesite="lax",
    )
    return response


@public.post("/logout")
async def sign_out(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    form_token: Annotated[FormToken | None, Form()] = None,
) -> Response:
    secret = settings.token_secret.get_secret_value()
    refuse_forged_sign_out(request, form_token, secret)
    signed_in = sign_in_id(request)
    if signed_in:
        await tokens.sign_out(session, signed_in, token_secret=secret)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        sign_in_cookie(request), path="/", secure=is_https(request), httponly=True, samesite="lax"
    )
    return response


@router.get("/")
async def fleet_overview(
    request: Request,
    session: ReadSessionDep,
    context: ReadContextDep,
    order: FleetOrder,
    asked: Annotated[FleetPage, Query()],
) -> Response:
    state = await fleet.fleet_state(
        session,
        environment=asked.environment,
        cluster_type=asked.cluster_type,
        limit=asked.limit,
        offset=asked.offset,
        now=context.now,
        stale_after=context.stale_after,
        order=order,
    )
    return render(
        request,
        "fleet.html",
        state=state,
        drift_by_reason=[(reason, getattr(state.totals, count)) for reason, count in SHOWN_REASONS],
        page=state.clusters,
        rows=state.clusters.items,
        order=order,
        environment=asked.environment,
        cluster_type=asked.cluster_type,
    )


@router.get("/drift")
async def drift_page(
    request: Request,
    session: ReadSessionDep,
    context: ReadContextDep,
    order: DriftOrder,
    asked: Annotated[DriftPage, Query()],
) -> Response:
    report = await drift.current_drift(
        session,
        environment=asked.environment,
        cluster_type=asked.cluster_type,
        cluster=asked.cluster,
        reasons=asked.reasons,
        include_in_sync=asked.include_in_sync,
        limit=asked.limit,
        offset=asked.offset,
        now=context.now,
        stale_after=context.stale_after,
        order=order,
    )
    return render(
        request,
        "drift.html",
        report=report,
        page=report,
        rows=report.items,
        order=order,
        filters={
            "environment": asked.environment,
            "cluster_type": asked.cluster_type,
            "cluster": asked.cluster,
            "reason": asked.reasons or [],
            "include_in_sync": asked.include_in_sync,
        },
        all_reasons=list(Reason),
    )


@router.get("/timeline")
async def timeline_page(
    request: Request,
    session: ReadSessionDep,
    clock: ClockDep,
    asked: Annotated[TimelinePage, Query()],
) -> Response:
    page = await timeline.timeline(session, asked, now=clock())
    return render(
        request,
        "timeline.html",
        page=page,
        filters=asked.model_dump(
            include={"environment", "workload", "cluster_type", "cluster", "selector"}
        ),
    )


@router.get("/diff")
async def environment_diff_page(
    request: Request,
    session: ReadSessionDep,
    clock: ClockDep,
    order: DiffOrder,
    asked: Annotated[DiffPage, Query()],
) -> Response:
    known = await gate.environment_names(session)
    diff = None
    chosen = asked.environments or known
    if len(chosen) >= 2 or asked.environments:
        diff = await envdiff.environment_diff(session, chosen, asked, now=clock(), order=order)
    return render(
        request,
        "diff.html",
        diff=diff,
        page=None if diff is None else diff.rows,
        rows=[] if diff is None else diff.rows.items,
        order=order,
        known=known,
        chosen=chosen,
        filters={
            "workload": asked.workload,
            "cluster_type": asked.cluster_type,
            "only_differences": asked.only_differences,
        },
    )


@router.get("/clusters/{name}")
async def cluster_page(
    request: Request,
    name: Text,
    session: ReadSessionDep,
    context: ReadContextDep,
    order: ObjectOrder,
    limit: PageLimit = PAGE_SIZE,
    offset: Offset = 0,
) -> Response:
    """The cluster, what each of its reconciler objects runs (sortable) and why it drifts, and
    the history of what they applied (paged)."""
    now = context.now
    detail = await clusters.cluster_detail(session, name, now=now, stale_after=context.stale_after)
    drifted = await drift.current_drift(
        session,
        environment=None,
        cluster_type=None,
        cluster=name,
        reasons=None,
        include_in_sync=False,
        limit=limit,
        offset=0,
        now=now,
        stale_after=context.stale_after,
    )
    history = await fleet.deployment_history(
        session, HistoryQuery(cluster=name, limit=limit, offset=offset)
    )
    return render(
        request,
        "cluster.html",
        cluster=detail,
        objects=CLUSTER_OBJECTS.sort(detail.objects, order),
        order=order,
        drifted=drifted,
        history=history,
        now=now,
    )


def _phase(result: GateResult) -> str:
    """The gate in a word: passed, failed, soaking (only time stands between it and passing),
    or pending (it needs new facts: an apply, a report, a harvest)."""
    if result.verdict is Verdict.PENDING and result.earliest_pass_at is not None:
        return "soaking"
    return result.verdict.value


def _soak_refresh(result: GateResult, now: datetime) -> int | None:
    return refresh_after(result.earliest_pass_at, now) if _phase(result) == "soaking" else None


@dataclass(frozen=True, slots=True)
class Stage:
    """An environment of the promotion chain with the gate's answer for its newest platform
    commit, the one that would move on to `next_environment` (None: the last)."""

    environment: str
    next_environment: str | None
    # None: no platform commit of the environment harvested yet.
    gate: GateResult | None

    @property
    def phase(self) -> str | None:
        return None if self.gate is None else _phase(self.gate)


@router.get("/promotion")
async def promotion_page(
    request: Request,
    session: ReadSessionDep,
    context: ReadContextDep,
    soak: Annotated[Duration, Query()] = DEFAULT_SOAK,
) -> Response:
    """The environments in promotion order, each with its newest platform commit and whether
    it may move on to the next, linked to the gate's evidence. While a gate soaks, the page
    reloads itself."""
    now = context.now
    names = await gate.environment_names(session)
    stages = []
    for name, following in zip(names, [*names[1:], None], strict=True):
        newest = await gate.newest_commits(session, name, 1)
        result = None
        if newest:
            result = await gate.promotion_gate(
                session,
                GateQuery(environment=name, commit=newest[0], soak=soak, limit=1),
                now=now,
                stale_after=context.stale_after,
                halting=context.halting,
            )
        stages.append(Stage(name, following, result))
    refreshes = [_soak_refresh(stage.gate, now) for stage in stages if stage.gate is not None]
    return render(
        request,
        "promotion.html",
        stages=stages,
        soak=None if soak == DEFAULT_SOAK else f"{int(soak.total_seconds())}",
        soak_seconds=soak.total_seconds(),
        refresh=min((seconds for seconds in refreshes if seconds is not None), default=None),
        now=now,
        failed=ClusterState.FAILED,
    )


@router.get("/rollouts")
async def rollouts_page(
    request: Request, session: ReadSessionDep, asked: Annotated[RolloutHealthQuery, Query()]
) -> Response:
    """The current rollout of each workload and of the platform commits per environment: its
    clusters converged, failures and time to converge, linked to the gate's evidence."""
    answer = await rollouts.rollout_health(session, asked)
    return render(request, "rollouts.html", rollouts=answer.items)


@router.get("/gate")
async def gate_page(
    request: Request,
    session: ReadSessionDep,
    context: ReadContextDep,
    order: GateOrder,
    asked: Annotated[GatePage, Query()],
) -> Response:
    """The gate for a platform commit (default: the environment's newest) or a workload
    version, with every expected cluster's evidence, those that block it first. While it
    soaks, the page reloads itself."""
    now = context.now
    known = await gate.environment_names(session)
    newest: list[str] = []
    result = None
    environment, commit = asked.environment, asked.commit
    if environment is not None:
        newest = await gate.newest_commits(session, environment, NEWEST_COMMITS)
        if commit is None and asked.workload is None and asked.version is None and newest:
            commit = newest[0]
        query = GateQuery.model_validate(
            asked.model_dump(include=set(GateQuery.model_fields))
            | {"environment": environment, "commit": commit}
        )
        result = await gate.promotion_gate(
            session,
            query,
            now=now,
            stale_after=context.stale_after,
            order=order,
            halting=context.halting,
        )
    return render(
        request,
        "gate.html",
        known=known,
        newest=newest,
        result=result,
        page=None if result is None else result.clusters,
        rows=[] if result is None else result.clusters.items,
        order=order,
        phase=None if result is None else _phase(result),
        refresh=None if result is None else _soak_refresh(result, now),
        now=now,
        compliant=ClusterState.COMPLIANT,
        soaking=ClusterState.SOAKING,
        filters={
            "environment": environment,
            "commit": commit,
            "workload": asked.workload,
            "version": asked.version,
            "soak": f"{int(asked.soak.total_seconds())}",
            "allow_stale": asked.allow_stale,
        },
    )


@router.get("/repositories")
async def repositories_page(
    request: Request, session: ReadSessionDep, clock: ClockDep, order: BranchOrder
) -> Response:
    """Every repository with its branches (sortable, each repository's on their own)."""
    repositories = await harvest.list_repositories(session, now=clock())
    return render(
        request,
        "repositories.html",
        repositories=repositories,
        branches={repo.url: BRANCHES.sort(repo.branches, order) for repo in repositories},
        order=order,
    )
