"""`HubClient`: the hub's REST API as Python methods, one per operation, over httpx.

Each method sends one request with the client's token and reads the answer into the client's
own models (hub.client.schemas); a refusal raises HubRefused with the hub's status, error code
and words, an unreachable hub HubUnreachable.
"""

import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypedDict, TypeVar, Unpack
from urllib.parse import quote, urlsplit

import httpx
from pydantic import BaseModel, ValidationError

from hub.client import operations as api
from hub.client.errors import HubRefused, HubUnreachable, UnexpectedAnswer
from hub.client.operations import Moment, Operation, Query, Soak, asked, flag
from hub.client.schemas.clusters import (
    ClusterDetail,
    ClusterPage,
    ClusterPlacement,
    ClusterRegistration,
    RegisteredCluster,
)
from hub.client.schemas.diff import DiffQuery, EnvironmentDiff
from hub.client.schemas.dora import DoraDeploymentPage, DoraDeploymentsQuery, DoraQuery, DoraReport
from hub.client.schemas.drift import (
    DriftHistory,
    DriftHistoryQuery,
    DriftQuery,
    DriftReport,
    Reason,
)
from hub.client.schemas.fleet import DeploymentPage, FleetQuery, FleetState, HistoryQuery
from hub.client.schemas.gate import (
    GateQuery,
    GateResult,
    Promotable,
    PromotableQuery,
    PromotionDecision,
)
from hub.client.schemas.reports import ReportReply
from hub.client.schemas.repositories import (
    CredentialsReference,
    RepositoryConfig,
    RepositoryList,
    RepositoryStatus,
    Role,
)
from hub.client.schemas.rollouts import RolloutHealthList, RolloutHealthQuery
from hub.client.schemas.runs import ErrorKind, HarvestRequest, Mode, RequestedRun, ScheduleRequest
from hub.client.schemas.scheduling import AssignmentPage, SchedulingErrorPage
from hub.client.schemas.subscriptions import (
    CreatedSubscription,
    DeliveryInfo,
    DeliveryList,
    Format,
    SubscriptionInfo,
    SubscriptionList,
    SubscriptionRequest,
)
from hub.client.schemas.suspects import (
    ClearHalt,
    Halt,
    Recommendations,
    SuspectsAnswer,
    SuspectsQuery,
)
from hub.client.schemas.timeline import TimelinePage, TimelineQuery
from hub.client.schemas.tokens import CreatedToken, Scope, TokenList, TokenRequest
from hub.client.secret_files import read_secret_file

__all__ = ["DEFAULT_HUB", "HubClient", "bearer", "check_url", "read_answer"]

A = TypeVar("A", bound=BaseModel)

DEFAULT_HUB = "http://127.0.0.1:8080"
TIMEOUT = 30.0


class GateQuestion(TypedDict, total=False):
    """What `gate` and `decision` ask the gate about, and how it judges (GateQuery's fields;
    the hub's defaults where one is not given: a soak of 10m, one cluster at least)."""

    commit: str | None
    workload: str | None
    version: str | None
    soak: Soak
    allow_stale: bool
    min_clusters: int
    min_converged_ratio: float | None
    max_time_to_converge: Soak | None
    cluster_types: Sequence[str]
    selector: str | None


class HubClient:
    """A hub's API, asked with one token (read scope for questions, admin to administer).

    `HubClient(url, token_file="~/.fleetmark/read").drift(environment="prod")`. Use it as a
    context manager, or `close()` it, to close its connections. `transport` replaces httpx's
    (a mounted app, a recording one); `timeout` is in seconds, per request.
    """

    def __init__(
        self,
        url: str = DEFAULT_HUB,
        *,
        token: str | None = None,
        token_file: str | PathLike[str] | None = None,
        timeout: float = TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if token is not None and token_file is not None:
            raise ValueError("give token or token_file, not both")
        if token_file is not None:
            token = read_secret_file(Path(token_file).expanduser(), "token_file")
        http = httpx.Client(base_url=check_url(url), timeout=timeout, transport=transport)
        self._start(http, token)
        # A client nobody closes (`HubClient(url).drift()`) closes its connections when it goes.
        self._closing: weakref.finalize[[], HubClient] | None = weakref.finalize(self, http.close)

    @classmethod
    def over(cls, http: httpx.Client, *, token: str | None = None) -> Self:
        """A client that sends with an httpx client of yours (its `base_url` the hub's), to
        share its connections; closing that stays yours."""
        client = cls.__new__(cls)
        client._start(http, token)
        client._closing = None
        return client

    def _start(self, http: httpx.Client, token: str | None) -> None:
        self.url = check_url(str(http.base_url).rstrip("/"))
        self.token = token
        self._http = http
        self._headers = bearer(token)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the client's connections (not those of an httpx client given to `over`)."""
        if self._closing is not None:
            self._closing()

    # --- the fleet ------------------------------------------------------------------------

    def fleet(
        self,
        *,
        environment: str | None = None,
        cluster_type: str | None = None,
        limit: int = 100,
        offset: int = 0,
        sort: str | None = None,
    ) -> FleetState:
        """Clusters and their objects by state, per environment and cluster type; a page of
        clusters."""
        query = asked(
            FleetQuery,
            environment=environment,
            cluster_type=cluster_type,
            limit=limit,
            offset=offset,
        )
        return self.ask(api.FLEET, query=query | {"sort": sort})

    def history(
        self,
        *,
        environment: str | None = None,
        cluster_type: str | None = None,
        cluster: str | None = None,
        object_name: str | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> DeploymentPage:
        """Every change of the revision a reconciler object applied, newest first."""
        query = asked(
            HistoryQuery,
            environment=environment,
            cluster_type=cluster_type,
            cluster=cluster,
            object_name=object_name,
            since=since,
            until=until,
            limit=limit,
            offset=offset,
        )
        return self.ask(api.HISTORY, query=query)

    def drift(
        self,
        *,
        environment: str | None = None,
        cluster_type: str | None = None,
        cluster: str | None = None,
        reasons: Sequence[Reason | str] = (),
        include_in_sync: bool = False,
        limit: int = 100,
        offset: int = 0,
        sort: str | None = None,
    ) -> DriftReport:
        """Drifted reconciler objects, each with its reasons and their evidence."""
        query = asked(
            DriftQuery,
            environment=environment,
            cluster_type=cluster_type,
            cluster=cluster,
            reasons=reasons,
            include_in_sync=include_in_sync,
            limit=limit,
            offset=offset,
        )
        return self.ask(api.DRIFT, query=query | {"sort": sort})

    def drift_history(
        self,
        *,
        environment: str | None = None,
        cluster_type: str | None = None,
        cluster: str | None = None,
        level: Literal["cluster", "object"] = "cluster",
        since: Moment | None = None,
        until: Moment | None = None,
        open_only: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> DriftHistory:
        """How long each cluster (or object) was drifted: its drift periods in the range."""
        query = asked(
            DriftHistoryQuery,
            environment=environment,
            cluster_type=cluster_type,
            cluster=cluster,
            level=level,
            since=since,
            until=until,
            open_only=open_only,
            limit=limit,
            offset=offset,
        )
        return self.ask(api.DRIFT_HISTORY, query=query)

    def diff(
        self,
        environments: Sequence[str],
        *,
        workload: str | None = None,
        cluster_type: str | None = None,
        deployment_target: str | None = None,
        only_differences: bool = True,
        ignore_keys: Sequence[str] = (),
        limit: int = 100,
        offset: int = 0,
        sort: str | None = None,
    ) -> EnvironmentDiff:
        """How two or more environments differ, per workload and cluster type, and why."""
        query = asked(
            DiffQuery,
            environments=environments,
            workload=workload,
            cluster_type=cluster_type,
            deployment_target=deployment_target,
            only_differences=only_differences,
            ignored_keys=ignore_keys,
            limit=limit,
            offset=offset,
        )
        return self.ask(api.DIFF, query=query | {"sort": sort})

    def dora(
        self,
        *,
        environments: Sequence[str] = (),
        workload: str | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> DoraReport:
        """Deployment frequency, lead time, change failure rate and time to restore per
        environment (all, unless named), of platform commits or of a workload's versions."""
        query = asked(
            DoraQuery, environments=environments, workload=workload, since=since, until=until
        )
        return self.ask(api.DORA, query=query)

    def rollouts(
        self, *, environments: Sequence[str] = (), workload: str | None = None
    ) -> RolloutHealthList:
        """The current rollout of each workload and of the platform commits per environment
        (all, unless named; only `workload`'s, if given): clusters converged, time to converge
        and failures."""
        query = asked(RolloutHealthQuery, environments=environments, workload=workload)
        return self.ask(api.ROLLOUTS, query=query)

    def dora_deployments(
        self,
        *,
        environments: Sequence[str] = (),
        workload: str | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> DoraDeploymentPage:
        """The rollouts the api.DORA figures count, per environment, newest first."""
        query = asked(
            DoraDeploymentsQuery,
            environments=environments,
            workload=workload,
            since=since,
            until=until,
            limit=limit,
            offset=offset,
        )
        return self.ask(api.DORA_DEPLOYMENTS, query=query)

    def timeline(
        self,
        *,
        environment: str | None = None,
        workload: str | None = None,
        cluster_type: str | None = None,
        cluster: str | None = None,
        selector: str | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> TimelinePage:
        """What happened to the fleet in the range, newest first: a page, and in its `next`
        the cursor of the page after."""
        query = asked(
            TimelineQuery,
            environment=environment,
            workload=workload,
            cluster_type=cluster_type,
            cluster=cluster,
            selector=selector,
            since=since,
            until=until,
            limit=limit,
            cursor=cursor,
        )
        return self.ask(api.TIMELINE, query=query)

    # --- the promotion gate ---------------------------------------------------------------

    def gate(
        self,
        environment: str,
        *,
        limit: int = 100,
        offset: int = 0,
        sort: str | None = None,
        **question: Unpack[GateQuestion],
    ) -> GateResult:
        """May the platform commit (or the workload's version) leave the environment? One
        answer; `fleetmark gate wait` asks until it passes or fails."""
        query = asked(GateQuery, environment=environment, **question, limit=limit, offset=offset)
        return self.ask(api.PROMOTION_GATE, query=query | {"sort": sort})

    def decision(self, environment: str, **question: Unpack[GateQuestion]) -> PromotionDecision:
        """The same gate as a promotion engine reads it (fleetmark.gate.decision/v1): allowed
        only when passed, why in one sentence, and the page with the evidence."""
        return self.ask(
            api.GATE_DECISION, query=asked(GateQuery, environment=environment, **question)
        )

    def promotable(
        self,
        environment: str,
        *,
        soak: Soak = "10m",
        allow_stale: bool = False,
        min_clusters: int = 1,
        max_commits: int = 50,
        cluster_types: Sequence[str] = (),
        selector: str | None = None,
        limit: int = 100,
        offset: int = 0,
        sort: str | None = None,
    ) -> Promotable:
        """The newest commit of the environment's platform branch whose gate passes."""
        query = asked(
            PromotableQuery,
            soak=soak,
            allow_stale=allow_stale,
            min_clusters=min_clusters,
            max_commits=max_commits,
            cluster_types=cluster_types,
            selector=selector,
            limit=limit,
            offset=offset,
        )
        return self.ask(api.PROMOTABLE, {"environment": environment}, query=query | {"sort": sort})

    # --- suspects and halts ---------------------------------------------------------------

    def suspects(
        self,
        environment: str,
        *,
        workload: str | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        window: Soak | None = None,
        min_regressions: int | None = None,
    ) -> SuspectsAnswer:
        """The commits and versions applied in the environment in the period, ranked by how
        much more often clusters regressed after them than clusters that had not."""
        query = asked(
            SuspectsQuery,
            environment=environment,
            workload=workload,
            since=since,
            until=until,
            window=window,
            min_regressions=min_regressions,
        )
        return self.ask(api.SUSPECTS, query=query)

    def recommendations(self) -> Recommendations:
        """The halts that hold, and the last known good commit or version to roll back to."""
        return self.ask(api.RECOMMENDATIONS)

    def clear_halt(self, halt_id: int, *, by: str, reason: str) -> Halt:
        """End a halt: its change may be promoted again (admin)."""
        return self.ask(
            api.CLEAR_HALT, {"halt_id": str(halt_id)}, body=ClearHalt(by=by, reason=reason)
        )

    # --- scheduling -----------------------------------------------------------------------

    def assignments(
        self,
        *,
        environment: str | None = None,
        cluster_type: str | None = None,
        workload: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> AssignmentPage:
        """Every pair the scheduling policies select, as the last run left it."""
        return self.ask(
            api.ASSIGNMENTS,
            query={
                "environment": environment,
                "cluster_type": cluster_type,
                "workload": workload,
                "limit": str(limit),
                "offset": str(offset),
            },
        )

    def scheduling_errors(
        self,
        *,
        environment: str | None = None,
        kind: ErrorKind | None = None,
        cluster_type: str | None = None,
        deployment_target: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> SchedulingErrorPage:
        """What the last scheduling run of each environment could not do."""
        return self.ask(
            api.SCHEDULING_ERRORS,
            query={
                "environment": environment,
                "kind": kind,
                "cluster_type": cluster_type,
                "deployment_target": deployment_target,
                "limit": str(limit),
                "offset": str(offset),
            },
        )

    # --- clusters -------------------------------------------------------------------------

    def clusters(
        self,
        *,
        environment: str | None = None,
        cluster_type: str | None = None,
        decommissioned: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> ClusterPage:
        """Registered clusters with their last report and object counts (decommissioned ones
        too when asked)."""
        return self.ask(
            api.CLUSTERS,
            query={
                "environment": environment,
                "cluster_type": cluster_type,
                "decommissioned": flag(decommissioned),
                "limit": str(limit),
                "offset": str(offset),
            },
        )

    def cluster(self, name: str) -> ClusterDetail:
        """A cluster with its agent and every reconciler object it reports."""
        return self.ask(api.CLUSTER, {"name": name})

    def register_cluster(
        self,
        name: str,
        *,
        environment: str | None = None,
        cluster_type: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> RegisteredCluster:
        """Register a cluster (admin); the answer holds its token, shown this once."""
        registration = ClusterRegistration(
            name=name, environment=environment, cluster_type=cluster_type, labels=labels or {}
        )
        return self.ask(api.REGISTER_CLUSTER, body=registration)

    def place_cluster(
        self, name: str, *, environment: str, cluster_type: str | None = None
    ) -> ClusterDetail:
        """Set or change the environment and cluster type a cluster counts in (admin)."""
        placement = ClusterPlacement(environment=environment, cluster_type=cluster_type)
        return self.ask(api.PLACE_CLUSTER, {"name": name}, body=placement)

    def rotate_cluster_token(self, name: str) -> RegisteredCluster:
        """A new token for the cluster; the old one stops working at once (admin)."""
        return self.ask(api.ROTATE_CLUSTER_TOKEN, {"name": name})

    def revoke_cluster_token(self, name: str) -> None:
        """Revoke the cluster's token: its agent is refused from the next report on (admin)."""
        self.do(api.REVOKE_CLUSTER_TOKEN, {"name": name})

    def decommission_cluster(self, name: str) -> ClusterDetail:
        """Take a cluster out of service; its history stays (admin)."""
        return self.ask(api.DECOMMISSION_CLUSTER, {"name": name})

    def report(self, document: Mapping[str, Any], *, cluster_token: str) -> ReportReply:
        """Send an agent's report (fleetmark.report/v1) as the cluster whose token it is."""
        return self.ask(api.REPORT, body=document, headers=bearer(cluster_token))

    # --- API tokens -----------------------------------------------------------------------

    def tokens(self) -> TokenList:
        """The API tokens, never their values (admin)."""
        return self.ask(api.TOKENS)

    def create_token(self, name: str, *, scope: Scope = "read") -> CreatedToken:
        """A new API token (admin); the answer holds it, shown this once."""
        return self.ask(api.CREATE_TOKEN, body=TokenRequest(name=name, scope=scope))

    def revoke_token(self, name: str) -> None:
        """Revoke an API token (admin)."""
        self.do(api.REVOKE_TOKEN, {"name": name})

    # --- subscriptions to events ----------------------------------------------------------

    def subscriptions(self) -> SubscriptionList:
        """The subscriptions to the hub's events, never their secrets (admin)."""
        return self.ask(api.SUBSCRIPTIONS)

    def subscription(self, name: str) -> SubscriptionInfo:
        return self.ask(api.SUBSCRIPTION, {"name": name})

    def create_subscription(
        self,
        name: str,
        url: str,
        *,
        format: Format = "cloudevents",
        event_types: Sequence[str] = (),
        environments: Sequence[str] = (),
        workloads: Sequence[str] = (),
        cluster_types: Sequence[str] = (),
        include_missing: bool = False,
    ) -> CreatedSubscription:
        """Send events to `url` (admin); the answer holds the signing secret, shown this once."""
        request = SubscriptionRequest(
            name=name,
            url=url,
            format=format,
            event_types=list(event_types),
            environments=list(environments),
            workloads=list(workloads),
            cluster_types=list(cluster_types),
            include_missing=include_missing,
        )
        return self.ask(api.CREATE_SUBSCRIPTION, body=request)

    def remove_subscription(self, name: str) -> None:
        """Stop sending events to the subscription; its pending deliveries go too (admin)."""
        self.do(api.REMOVE_SUBSCRIPTION, {"name": name})

    def deliveries(self, name: str, *, limit: int = 50) -> DeliveryList:
        """The subscription's newest deliveries, each with its latest attempt (admin)."""
        return self.ask(api.DELIVERIES, {"name": name}, query={"limit": str(limit)})

    def retry_delivery(self, name: str, delivery_id: int) -> DeliveryInfo:
        """Send a dead delivery again (admin)."""
        path = {"name": name, "delivery_id": str(delivery_id)}
        return self.ask(api.RETRY_DELIVERY, path)

    def test_subscription(self, name: str) -> DeliveryInfo:
        """A test event to the subscription alone: its delivery, pending (admin)."""
        return self.ask(api.TEST_SUBSCRIPTION, {"name": name})

    # --- repositories and runs ------------------------------------------------------------

    def repositories(self) -> RepositoryList:
        """The repositories the hub harvests, with their branches, lag and recent errors."""
        return self.ask(api.REPOSITORIES)

    def add_repository(
        self,
        url: str,
        *,
        role: Role,
        branches: Sequence[str] | None = None,
        credentials: CredentialsReference | None = None,
    ) -> RepositoryStatus:
        """Harvest a repository from the next run on (admin)."""
        config = RepositoryConfig(
            url=url,
            role=role,
            branches=None if branches is None else list(branches),
            credentials=credentials,
        )
        return self.ask(api.ADD_REPOSITORY, body=config)

    def remove_repository(self, repository_id: int) -> None:
        """Stop harvesting a repository added through the API (admin)."""
        self.do(api.REMOVE_REPOSITORY, {"repository_id": str(repository_id)})

    def start_harvest(
        self, *, repository: str | None = None, backfill: bool = False
    ) -> RequestedRun:
        """Ask the hub to harvest now (admin): the run, running; see `wait_for_run`."""
        return self.ask(api.HARVEST, body=HarvestRequest(repository=repository, backfill=backfill))

    def start_schedule(
        self,
        *,
        control_plane: str,
        gitops: str,
        environments: Sequence[str] | None = None,
        mode: Mode = "direct",
    ) -> RequestedRun:
        """Ask the hub to schedule environments (all, unless named) now (admin): the run,
        running; see `wait_for_run`."""
        request = ScheduleRequest(
            control_plane=control_plane,
            gitops=gitops,
            environments=None if environments is None else list(environments),
            mode=mode,
        )
        return self.ask(api.SCHEDULE, body=request)

    def run(self, run_id: int) -> RequestedRun:
        """A harvest or scheduling run asked for through the API."""
        return self.ask(api.RUN, {"run_id": str(run_id)})

    def wait_for_run(
        self,
        run: RequestedRun,
        *,
        interval: float = 2.0,
        progress: Callable[[RequestedRun, float], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> RequestedRun:
        """Poll the run every `interval` seconds until it is done (succeeded or failed);
        `progress` is told the run and the seconds waited at each poll."""
        started = time.monotonic()
        while run.outcome == "running":
            if progress is not None:
                progress(run, time.monotonic() - started)
            sleep(interval)
            run = self.run(run.id)
        return run

    # --- sending --------------------------------------------------------------------------

    def ask(
        self,
        operation: Operation[A],
        path: Mapping[str, str] | None = None,
        *,
        query: Query | None = None,
        body: BaseModel | Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> A:
        """The operation's answer, read as its model."""
        assert operation.answer is not None
        return read_answer(self._send(operation, path, query, body, headers), operation.answer)

    def do(self, operation: Operation[A], path: Mapping[str, str] | None = None) -> None:
        """An operation that answers no content."""
        self._send(operation, path, None, None, None)

    def _send(
        self,
        operation: Operation[A],
        path: Mapping[str, str] | None,
        query: Query | None,
        body: BaseModel | Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
    ) -> httpx.Response:
        url = operation.path.format_map(
            {name: quote(value, safe="") for name, value in (path or {}).items()}
        )
        params = {name: value for name, value in (query or {}).items() if value is not None}
        assert set(params) <= set(operation.query), f"{url} takes no {set(params)}"
        sent = self._headers | dict(headers or {})
        content = None
        if isinstance(body, BaseModel):
            content = body.model_dump_json(exclude_none=True)
            sent["Content-Type"] = "application/json"
        timeout = self._http.timeout
        if timeout.read is not None and timeout.read < operation.timeout:
            timeout = httpx.Timeout(
                connect=timeout.connect,
                read=operation.timeout,
                write=timeout.write,
                pool=timeout.pool,
            )
        try:
            response = self._http.request(
                operation.method,
                url,
                params=params,
                content=content,
                json=None if isinstance(body, BaseModel) else body,
                headers=sent,
                timeout=timeout,
            )
        except httpx.HTTPError as exc:
            raise HubUnreachable(self.url, exc) from None
        if not response.is_success:
            raise HubRefused.of(response)
        return response


def check_url(url: str) -> str:
    """`url`, when it is a hub's address (http or https); ValueError otherwise."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"{url!r} is not a hub's address: give http:// or https:// and the host")
    return url


def bearer(token: str | None) -> dict[str, str]:
    """The header that sends `token`; none without one."""
    return {} if token is None else {"Authorization": f"Bearer {token}"}


def read_answer(response: httpx.Response, model: type[A]) -> A:
    """The document a response of the hub carries, read as `model`: HubRefused when the hub
    refused, UnexpectedAnswer when the document is not what `model` reads."""
    if not response.is_success:
        raise HubRefused.of(response)
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise UnexpectedAnswer(response.url, exc) from None
