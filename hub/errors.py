"""Domain errors. Services raise these; one handler renders them as {"error", "detail"}, and
the OpenAPI document declares that shape (`error_responses`) for every status an operation
can answer with."""

from collections.abc import Awaitable, Callable, Sequence
from http import HTTPStatus
from typing import Any, Literal

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from pydantic_core import ErrorDetails
from starlette.exceptions import HTTPException

from hub.database import StoreGate, StoreUnreachable
from hub.git.urls import RedactedText


class ErrorBody(BaseModel):
    """What every error answer of the hub holds."""

    error: str = Field(description="The kind of error, a code: unknown_cluster, store_busy, …")
    detail: RedactedText = Field(description="What is wrong, in words.")


class Problem(BaseModel):
    """One rule a request broke."""

    location: Literal["path", "query", "header", "body"]
    field: str = Field(
        description="The parameter, or the body field by its dotted path (objects.0.name); "
        "empty for the body as a whole."
    )
    rule: str = Field(description="The rule broken, a code: string_too_long, int_parsing, …")
    message: RedactedText


class ValidationErrorBody(ErrorBody):
    """A request refused for what it holds: each problem names the field and the rule."""

    error: Literal["invalid_input"]
    problems: list[Problem] = Field(
        description="Every rule the request broke; empty when the request is refused as a whole "
        "(detail says why)."
    )


log = structlog.get_logger(__name__)


class FleetmarkError(Exception):
    status_code = 400
    error = "bad_request"

    def __init__(self, detail: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers

    def body(self) -> ErrorBody:
        return ErrorBody(error=self.error, detail=self.detail)


class NotAuthenticated(FleetmarkError):
    status_code = 401
    error = "not_authenticated"


class InsufficientScope(FleetmarkError):
    status_code = 403
    error = "insufficient_scope"


class CrossSiteRequest(FleetmarkError):
    """A form posted to the hub by a page of another site."""

    status_code = 403
    error = "cross_site_request"


class TooManyAttempts(FleetmarkError):
    status_code = 429
    error = "too_many_attempts"


class ClusterMismatch(FleetmarkError):
    status_code = 403
    error = "cluster_mismatch"


class UnknownCluster(FleetmarkError):
    status_code = 404
    error = "unknown_cluster"


class UnknownEnvironment(FleetmarkError):
    status_code = 404
    error = "unknown_environment"


class UnknownClusterType(FleetmarkError):
    status_code = 404
    error = "unknown_cluster_type"


class UnknownWorkload(FleetmarkError):
    status_code = 404
    error = "unknown_workload"


class UnknownToken(FleetmarkError):
    status_code = 404
    error = "unknown_token"


class UnknownRepository(FleetmarkError):
    status_code = 404
    error = "unknown_repository"


class UnknownRun(FleetmarkError):
    status_code = 404
    error = "unknown_run"


class UnknownRole(FleetmarkError):
    status_code = 404
    error = "unknown_role"


class UnknownSubscription(FleetmarkError):
    status_code = 404
    error = "unknown_subscription"


class UnknownDelivery(FleetmarkError):
    status_code = 404
    error = "unknown_delivery"


class UnknownHalt(FleetmarkError):
    status_code = 404
    error = "unknown_halt"


class HaltEnded(FleetmarkError):
    """The halt was superseded or cleared already."""

    status_code = 409
    error = "halt_ended"


class DeliveryNotDead(FleetmarkError):
    status_code = 409
    error = "delivery_not_dead"


class AlreadyExists(FleetmarkError):
    status_code = 409
    error = "already_exists"


class ManagedByFile(FleetmarkError):
    """The repository is configured in the repositories file; change it there."""

    status_code = 409
    error = "managed_by_file"


class HarvestRunning(FleetmarkError):
    status_code = 409
    error = "harvest_running"


class SchedulingRunning(FleetmarkError):
    status_code = 409
    error = "scheduling_running"


class TooManyRuns(FleetmarkError):
    """As many runs of the job as are kept were asked for within the time they are kept."""

    status_code = 429
    error = "too_many_runs"


class InvalidConfiguration(FleetmarkError):
    """A configuration file the hub was given cannot be used."""

    status_code = 422
    error = "invalid_configuration"


class PayloadTooLarge(FleetmarkError):
    status_code = 413
    error = "payload_too_large"


class InvalidInput(FleetmarkError):
    status_code = 422
    error = "invalid_input"

    def __init__(self, detail: str, problems: Sequence[Problem] = ()) -> None:
        super().__init__(detail)
        self.problems = list(problems)

    @classmethod
    def from_validation_error(cls, exc: ValidationError | RequestValidationError) -> "InvalidInput":
        """A request body validated by hand (`exc` a ValidationError) or FastAPI's parameters."""
        problems = [_problem(error) for error in exc.errors()]
        return cls(_describe(problems), problems)

    def body(self) -> ValidationErrorBody:
        return ValidationErrorBody(
            error="invalid_input", detail=self.detail, problems=self.problems
        )


def _problem(error: ErrorDetails) -> Problem:
    location, path = "body", error["loc"]  # a body validated by hand has no location
    if path and path[0] in ("path", "query", "header", "body"):
        location, path = path[0], path[1:]
    return Problem(
        location=location,
        field=".".join(str(part) for part in path),
        rule=error["type"],
        message=error["msg"],
    )


def _describe(problems: Sequence[Problem]) -> str:
    """One line per problem, each naming the field: by its dotted path in the body, else with
    where it was given (query.limit)."""
    return "; ".join(f"{_shown(problem)}: {problem.message}" for problem in problems)


def _shown(problem: Problem) -> str:
    if problem.location == "body":
        return problem.field or "(body)"
    return f"{problem.location}.{problem.field}"


def describe_validation_error(exc: ValidationError | RequestValidationError) -> str:
    return _describe([_problem(error) for error in exc.errors()])


Responses = dict[int | str, dict[str, Any]]

_DESCRIPTIONS = {
    400: "The body cannot be read (it is not UTF-8).",
    401: "No token, or one that is unknown or revoked.",
    403: "The token may not do this.",
    413: "The body is over the size limit.",
    422: "A parameter or the body breaks a rule; each problem names the field and the rule.",
    503: "Every database connection is busy, or the database cannot be reached; retry after "
    "Retry-After seconds.",
}
_RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}}
_HEADERS = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "Bearer"}},
    429: _RETRY_AFTER,
    503: _RETRY_AFTER,
}


def error_responses(*statuses: int) -> Responses:
    """The OpenAPI declaration of the errors an operation can answer with, in the hub's shape."""
    responses: Responses = {}
    for status in statuses:
        responses |= error_response(status, _DESCRIPTIONS[status])
    return responses


def error_response(status: int, description: str) -> Responses:
    """One error status, described for the operation (which environment, commit, … is unknown)."""
    response: dict[str, Any] = {
        "model": ValidationErrorBody if status == 422 else ErrorBody,
        "description": description,
    }
    if status in _HEADERS:
        response["headers"] = _HEADERS[status]
    return {status: response}


# Seconds a client is asked to wait when the store is busy or cannot be reached.
RETRY_AFTER_BUSY = 5
STORE_UNAVAILABLE_DETAIL = "the database cannot be reached; retry later"


Handler = Callable[[Request, Exception], Awaitable[JSONResponse]]


class ErrorAnswers:
    """Domain errors as {"error", "detail"}; `busy` names the errors of an overloaded store,
    `unavailable` those of a store that is down or dropped the connection: both are 503 with
    Retry-After, which clients (the agent among them) take as "try later", not as a failure.
    An unavailable store makes `gate` check whether the database can still be reached.

    `install` makes these the app's exception handlers; a request answered ahead of the app's
    routing (POST /api/v1/reports) gets the same answers from `answer`."""

    def __init__(
        self,
        *,
        gate: StoreGate,
        busy: tuple[type[Exception], ...] = (),
        unavailable: tuple[type[Exception], ...] = (),
    ) -> None:
        self._gate = gate
        self._handlers: dict[type[Exception], Handler] = {
            FleetmarkError: self._domain_error,
            **dict.fromkeys(busy, self._store_busy),
            **dict.fromkeys(unavailable, self._store_unavailable),
            RequestValidationError: self._request_validation_error,
            HTTPException: self._http_error,
        }

    def install(self, app: FastAPI) -> None:
        for error, handler in self._handlers.items():
            app.add_exception_handler(error, handler)

    async def answer(self, request: Request, exc: Exception) -> JSONResponse:
        """The answer the app's handlers give `exc`: that of its nearest class that has one,
        as the framework picks it. An error none answers is raised again (a 500)."""
        for cls in type(exc).__mro__:
            handler = self._handlers.get(cls)
            if handler is not None:
                return await handler(request, exc)
        raise exc

    async def _domain_error(self, _: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, FleetmarkError)
        headers = exc.headers
        if exc.status_code == 401:
            headers = (headers or {}) | {"WWW-Authenticate": "Bearer"}
        return JSONResponse(
            exc.body().model_dump(mode="json"), status_code=exc.status_code, headers=headers
        )

    async def _request_validation_error(self, request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return await self._domain_error(request, InvalidInput.from_validation_error(exc))

    async def _http_error(self, _: Request, exc: Exception) -> JSONResponse:
        """The framework's own answers (no such route, method not allowed), in the same shape."""
        assert isinstance(exc, HTTPException)
        error = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_").replace("-", "_")
        return JSONResponse(
            ErrorBody(error=error, detail=str(exc.detail)).model_dump(mode="json"),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    async def _store_busy(self, _: Request, exc: Exception) -> JSONResponse:
        if self._gate.unreachable:
            # The request waited for a connection while the database went away.
            return _try_later("store_unavailable", STORE_UNAVAILABLE_DETAIL)
        return _try_later("store_busy", "every database connection is busy; retry later")

    async def _store_unavailable(self, request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, StoreUnreachable):  # the gate has said so once already
            log.warning(
                "database unavailable",
                path=request.url.path,
                error=type(exc).__name__,
                detail=str(exc),
            )
            self._gate.doubt()
        return _try_later("store_unavailable", STORE_UNAVAILABLE_DETAIL)


def _try_later(error: str, detail: str) -> JSONResponse:
    return JSONResponse(
        {"error": error, "detail": detail},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_BUSY)},
    )
