"""Domain errors. Services raise these; one handler renders them as {"error", "detail"}."""

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

log = structlog.get_logger(__name__)


class FleetmarkError(Exception):
    status_code = 400
    error = "bad_request"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotAuthenticated(FleetmarkError):
    status_code = 401
    error = "not_authenticated"


class InsufficientScope(FleetmarkError):
    status_code = 403
    error = "insufficient_scope"


class ClusterMismatch(FleetmarkError):
    status_code = 403
    error = "cluster_mismatch"


class UnknownCluster(FleetmarkError):
    status_code = 404
    error = "unknown_cluster"


class UnknownToken(FleetmarkError):
    status_code = 404
    error = "unknown_token"


class UnknownRepository(FleetmarkError):
    status_code = 404
    error = "unknown_repository"


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


def describe_validation_error(exc: ValidationError | RequestValidationError) -> str:
    """One line per problem, each naming the field by its dotted path."""
    lines = []
    for problem in exc.errors():
        location = ".".join(str(part) for part in problem["loc"] if part != "body")
        lines.append(f"{location or '(body)'}: {problem['msg']}")
    return "; ".join(lines)


# Seconds a client is asked to wait when the store is busy or cannot be reached.
RETRY_AFTER_BUSY = 5


def install_error_handlers(
    app: FastAPI,
    *,
    busy: tuple[type[Exception], ...] = (),
    unavailable: tuple[type[Exception], ...] = (),
) -> None:
    """Domain errors as {"error", "detail"}; `busy` names the errors of an overloaded store,
    `unavailable` those of a store that is down or dropped the connection: both are 503 with
    Retry-After, which clients (the agent among them) take as "try later", not as a failure."""

    async def domain_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, FleetmarkError)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        return JSONResponse(
            {"error": exc.error, "detail": exc.detail}, status_code=exc.status_code, headers=headers
        )

    async def request_validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse(
            {"error": "invalid_input", "detail": describe_validation_error(exc)}, status_code=422
        )

    async def store_busy(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(
            {
                "error": "store_busy",
                "detail": "every database connection is busy; retry later",
            },
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_BUSY)},
        )

    async def store_unavailable(request: Request, exc: Exception) -> JSONResponse:
        log.warning(
            "database unavailable", path=request.url.path, error=type(exc).__name__, detail=str(exc)
        )
        return JSONResponse(
            {
                "error": "store_unavailable",
                "detail": "the database cannot be reached; retry later",
            },
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_BUSY)},
        )

    app.add_exception_handler(FleetmarkError, domain_error)
    for error in busy:
        app.add_exception_handler(error, store_busy)
    for error in unavailable:
        app.add_exception_handler(error, store_unavailable)
    app.add_exception_handler(RequestValidationError, request_validation_error)
