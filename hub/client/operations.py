"""The operations of the hub's API the client asks, declared once: method, path, query
parameters, body and the model the answer is read as, as the hub's OpenAPI document names them
(a test holds them to it); and how values are written into a query."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from hub.client.schemas.clusters import (
    ClusterDetail,
    ClusterPage,
    ClusterPlacement,
    ClusterRegistration,
    RegisteredCluster,
)
from hub.client.schemas.diff import DiffQuery, EnvironmentDiff
from hub.client.schemas.dora import (
    DoraDeploymentPage,
    DoraDeploymentsQuery,
    DoraQuery,
    DoraReport,
)
from hub.client.schemas.drift import DriftHistory, DriftHistoryQuery, DriftQuery, DriftReport
from hub.client.schemas.fleet import DeploymentPage, FleetQuery, FleetState, HistoryQuery
from hub.client.schemas.gate import (
    GateQuery,
    GateResult,
    Promotable,
    PromotableQuery,
    PromotionDecision,
)
from hub.client.schemas.reports import ReportReply
from hub.client.schemas.repositories import RepositoryConfig, RepositoryList, RepositoryStatus
from hub.client.schemas.rollouts import RolloutHealthList, RolloutHealthQuery
from hub.client.schemas.runs import HarvestRequest, RequestedRun, ScheduleRequest
from hub.client.schemas.scheduling import AssignmentPage, SchedulingErrorPage
from hub.client.schemas.subscriptions import (
    CreatedSubscription,
    DeliveryInfo,
    DeliveryList,
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
from hub.client.schemas.tokens import CreatedToken, TokenList, TokenRequest

A = TypeVar("A", bound=BaseModel)

# Until the hub's DORA job first refreshed its rollup, the figures come from every transition
# of the range: on a fleet of thousands of clusters the hub takes seconds, tens of seconds for
# a month of 10,000, where other questions take milliseconds.
DORA_TIMEOUT = 300.0

# Query parameters as sent: a repeated one as a list; None is left out.
Query = Mapping[str, str | Sequence[str] | None]
Moment = datetime | str
Soak = timedelta | float | str


@dataclass(frozen=True, slots=True)
class Operation(Generic[A]):
    """An operation of the hub's API: its method and path (`{name}` for a path parameter), the
    query parameters it takes, the body it is sent and the model its answer is read as (None:
    it answers no content)."""

    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    answer: type[A] | None
    query: tuple[str, ...] = ()
    body: type[BaseModel] | None = None
    # Seconds the hub may take at least, whatever the client's timeout.
    timeout: float = 0.0


def parameters(model: type[BaseModel]) -> tuple[str, ...]:
    """The query parameters of a question the hub takes as a query model, as it names them."""
    return tuple(field.alias or name for name, field in model.model_fields.items())


_PAGE = ("limit", "offset")
_PLACE = ("environment", "cluster_type")

FLEET = Operation("GET", "/api/v1/fleet", FleetState, (*parameters(FleetQuery), "sort"))
HISTORY = Operation("GET", "/api/v1/history", DeploymentPage, parameters(HistoryQuery))
DRIFT = Operation("GET", "/api/v1/drift", DriftReport, (*parameters(DriftQuery), "sort"))
DRIFT_HISTORY = Operation(
    "GET", "/api/v1/drift/history", DriftHistory, parameters(DriftHistoryQuery)
)
DIFF = Operation("GET", "/api/v1/diff", EnvironmentDiff, (*parameters(DiffQuery), "sort"))
DORA = Operation("GET", "/api/v1/dora", DoraReport, parameters(DoraQuery), timeout=DORA_TIMEOUT)
DORA_DEPLOYMENTS = Operation(
    "GET",
    "/api/v1/dora/deployments",
    DoraDeploymentPage,
    parameters(DoraDeploymentsQuery),
    timeout=DORA_TIMEOUT,
)
ROLLOUTS = Operation("GET", "/api/v1/rollouts", RolloutHealthList, parameters(RolloutHealthQuery))
TIMELINE = Operation("GET", "/api/v1/timeline", TimelinePage, parameters(TimelineQuery))
PROMOTION_GATE = Operation(
    "GET",
    "/api/v1/gates/promotion",
    GateResult,
    (*parameters(GateQuery), "sort"),
)
GATE_DECISION = Operation("GET", "/api/v1/gates/decision", PromotionDecision, parameters(GateQuery))
PROMOTABLE = Operation(
    "GET",
    "/api/v1/environments/{environment}/promotable",
    Promotable,
    (*parameters(PromotableQuery), "sort"),
)
SUSPECTS = Operation("GET", "/api/v1/suspects", SuspectsAnswer, parameters(SuspectsQuery))
RECOMMENDATIONS = Operation("GET", "/api/v1/recommendations", Recommendations)
CLEAR_HALT = Operation("POST", "/api/v1/halts/{halt_id}/clear", Halt, body=ClearHalt)
ASSIGNMENTS = Operation("GET", "/api/v1/assignments", AssignmentPage, (*_PLACE, "workload", *_PAGE))
SCHEDULING_ERRORS = Operation(
    "GET",
    "/api/v1/scheduling/errors",
    SchedulingErrorPage,
    ("environment", "kind", "cluster_type", "deployment_target", *_PAGE),
)
CLUSTERS = Operation("GET", "/api/v1/clusters", ClusterPage, (*_PLACE, "decommissioned", *_PAGE))
CLUSTER = Operation("GET", "/api/v1/clusters/{name}", ClusterDetail)
REGISTER_CLUSTER = Operation(
    "POST", "/api/v1/clusters", RegisteredCluster, body=ClusterRegistration
)
PLACE_CLUSTER = Operation(
    "PUT", "/api/v1/clusters/{name}/placement", ClusterDetail, body=ClusterPlacement
)
ROTATE_CLUSTER_TOKEN = Operation("POST", "/api/v1/clusters/{name}/token", RegisteredCluster)
REVOKE_CLUSTER_TOKEN: Operation[BaseModel] = Operation(
    "DELETE", "/api/v1/clusters/{name}/token", None
)
DECOMMISSION_CLUSTER = Operation("POST", "/api/v1/clusters/{name}/decommission", ClusterDetail)
TOKENS = Operation("GET", "/api/v1/tokens", TokenList)
CREATE_TOKEN = Operation("POST", "/api/v1/tokens", CreatedToken, body=TokenRequest)
REVOKE_TOKEN: Operation[BaseModel] = Operation("DELETE", "/api/v1/tokens/{name}", None)
SUBSCRIPTIONS = Operation("GET", "/api/v1/subscriptions", SubscriptionList)
SUBSCRIPTION = Operation("GET", "/api/v1/subscriptions/{name}", SubscriptionInfo)
CREATE_SUBSCRIPTION = Operation(
    "POST", "/api/v1/subscriptions", CreatedSubscription, body=SubscriptionRequest
)
REMOVE_SUBSCRIPTION: Operation[BaseModel] = Operation(
    "DELETE", "/api/v1/subscriptions/{name}", None
)
DELIVERIES = Operation("GET", "/api/v1/subscriptions/{name}/deliveries", DeliveryList, ("limit",))
RETRY_DELIVERY = Operation(
    "POST", "/api/v1/subscriptions/{name}/deliveries/{delivery_id}/retry", DeliveryInfo
)
TEST_SUBSCRIPTION = Operation("POST", "/api/v1/subscriptions/{name}/test", DeliveryInfo)
REPOSITORIES = Operation("GET", "/api/v1/repositories", RepositoryList)
ADD_REPOSITORY = Operation("POST", "/api/v1/repositories", RepositoryStatus, body=RepositoryConfig)
REMOVE_REPOSITORY: Operation[BaseModel] = Operation(
    "DELETE", "/api/v1/repositories/{repository_id}", None
)
HARVEST = Operation("POST", "/api/v1/runs/harvest", RequestedRun, body=HarvestRequest)
SCHEDULE = Operation("POST", "/api/v1/runs/schedule", RequestedRun, body=ScheduleRequest)
RUN = Operation("GET", "/api/v1/runs/{run_id}", RequestedRun)
# The report is the agent's contract (fleetmark.report/v1), sent as the document it is.
REPORT = Operation("POST", "/api/v1/reports", ReportReply)

OPERATIONS: tuple[Operation[Any], ...] = (
    FLEET,
    HISTORY,
    DRIFT,
    DRIFT_HISTORY,
    DIFF,
    DORA,
    DORA_DEPLOYMENTS,
    ROLLOUTS,
    TIMELINE,
    PROMOTION_GATE,
    GATE_DECISION,
    PROMOTABLE,
    SUSPECTS,
    RECOMMENDATIONS,
    CLEAR_HALT,
    ASSIGNMENTS,
    SCHEDULING_ERRORS,
    CLUSTERS,
    CLUSTER,
    REGISTER_CLUSTER,
    PLACE_CLUSTER,
    ROTATE_CLUSTER_TOKEN,
    REVOKE_CLUSTER_TOKEN,
    DECOMMISSION_CLUSTER,
    TOKENS,
    CREATE_TOKEN,
    REVOKE_TOKEN,
    SUBSCRIPTIONS,
    SUBSCRIPTION,
    CREATE_SUBSCRIPTION,
    REMOVE_SUBSCRIPTION,
    DELIVERIES,
    RETRY_DELIVERY,
    TEST_SUBSCRIPTION,
    REPOSITORIES,
    ADD_REPOSITORY,
    REMOVE_REPOSITORY,
    HARVEST,
    SCHEDULE,
    RUN,
    REPORT,
)


def flag(value: bool) -> str:
    return "true" if value else "false"


def asked(question: type[BaseModel], **values: object) -> dict[str, str | Sequence[str] | None]:
    """The query of a question the hub takes as a query model: each value under the name the
    hub takes it by (a field of `question`), written as the hub reads it. The values are sent as
    given, for the hub to judge and to say what is wrong with each."""
    fields = question.model_fields
    return {fields[name].alias or name: _written(value) for name, value in values.items()}


def _written(value: object) -> str | list[str] | None:
    match value:
        case None:
            return None
        case bool():
            return flag(value)
        case datetime():
            return moment(value)
        case timedelta():
            return seconds(value)
        case Sequence() if not isinstance(value, str):
            return [str(item) for item in value] or None
        case _:
            return str(value)


def moment(value: Moment | None) -> str | None:
    """A time as the hub takes it (ISO 8601); a time without a zone is read as UTC."""
    if value is None or isinstance(value, str):
        return value
    return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat()


def seconds(value: Soak) -> str:
    """A duration as the hub takes it: seconds, or the text given (10m, PT10M)."""
    if isinstance(value, timedelta):
        return str(value.total_seconds())
    return str(value)
