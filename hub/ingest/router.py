"""POST /api/v1/reports: the agent's way in."""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from hub.database import Statements, StoreGate
from hub.deps import BearerDep, bearer
from hub.errors import (
    ErrorAnswers,
    FleetmarkError,
    InvalidInput,
    PayloadTooLarge,
    error_responses,
)
from hub.ingest import service
from hub.ingest.batcher import ReportBatcher
from hub.ingest.schemas import MAX_REPORT_BYTES_HEADER, Report, ReportReply
from hub.settings import HubSettings

router = APIRouter(prefix="/api/v1", tags=["ingest"])

# The body is read and validated by hand (read_report: size limit first, then pydantic's JSON
# parser), so its schema is declared for the OpenAPI document here.
REPORT_SCHEMA = Report.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
REPORT_COMPONENTS = REPORT_SCHEMA.pop("$defs", {}) | {"Report": REPORT_SCHEMA}


_LIMIT_HEADER = {
    MAX_REPORT_BYTES_HEADER: {
        "schema": {"type": "integer"},
        "description": "The largest report body this hub takes, in bytes: an agent sends a "
        "full snapshot over it in parts (`snapshot_part`).",
    }
}
_RESPONSES = error_responses(401, 403, 413, 422, 503)
_RESPONSES[413]["headers"] = _LIMIT_HEADER


@contextmanager
def _refusals_counted(request: Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        request.app.state.metrics.record_refused_report(exc)
        raise


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    headers = {MAX_REPORT_BYTES_HEADER: str(limit)}
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(
            f"the report is {declared} bytes; the limit is {limit}", headers=headers
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"the report is over the limit of {limit} bytes", headers=headers)
    return bytes(body)


async def read_report(
    request: Request,
    token: str | None,
    statements: Statements,
    settings: HubSettings,
    received_at: datetime,
) -> Report:
    """The report the body holds, its times no later than the hub's clock allows: the size
    limit is checked first, then pydantic's JSON parser validates it."""
    token_secret = settings.token_secret.get_secret_value()
    if not token:
        await service.authenticate(statements, token, token_secret=token_secret)
    try:
        body = await _read_body(request, settings.max_report_bytes)
        try:
            return Report.from_body(body, not_after=received_at + settings.ingest_max_clock_skew)
        except ValidationError as exc:
            raise InvalidInput.from_validation_error(exc) from exc
    except FleetmarkError:
        # The token is checked before anything is said about the body; a valid report has
        # it checked inside the ingest statement instead, saving a round trip.
        await service.authenticate(statements, token, token_secret=token_secret)
        raise


# Declared for the OpenAPI document (and for the 405 other methods get); ReportShortcut calls
# it ahead of the app's routing, so FastAPI solves none of its parameters.
@router.post(
    "/reports",
    response_model=ReportReply,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Report"}}},
        }
    },
    responses={200: {"headers": _LIMIT_HEADER}, **_RESPONSES},
)
async def post_report(request: Request, credentials: BearerDep) -> Response:
    state = request.app.state
    settings: HubSettings = state.settings
    # Answered 503 at once while the database cannot be reached, as any request that needs it.
    gate: StoreGate = state.store_gate
    await gate.check()
    statements: Statements = state.statements
    batcher: ReportBatcher = state.report_batcher
    token = None if credentials is None else credentials.credentials
    # The hub's time the report arrived at: read once, before its body.
    received_at = state.clock()
    with _refusals_counted(request):
        report = await read_report(request, token, statements, settings, received_at)
        reply = await service.ingest(
            batcher,
            token,
            report,
            received_at=received_at,
            max_clock_skew=settings.ingest_max_clock_skew,
            max_backdate=settings.ingest_max_backdate,
            token_secret=settings.token_secret.get_secret_value(),
            agent_placement=settings.agent_placement == "first-report",
        )
    state.metrics.record_report(reply)
    response = Response(reply.model_dump_json(), media_type="application/json")
    response.headers[MAX_REPORT_BYTES_HEADER] = str(settings.max_report_bytes)
    return response


_ROUTE = next(route for route in router.routes if isinstance(route, APIRoute))


class ReportShortcut:
    """Every report passes here, so POST /api/v1/reports goes straight to `post_report`, past
    the framework's exception and exit-stack middlewares, its routing and its dependency
    solving: a fifth of the CPU a report cost. Errors get the answers the app's handlers give
    (`errors`). Added first, so innermost, among the app's middlewares: the request is timed
    under its route, carries the security headers and keeps to the metrics port's rule as any
    other."""

    def __init__(self, app: ASGIApp, errors: ErrorAnswers) -> None:
        self.app = app
        self.errors = errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != _ROUTE.path:
            await self.app(scope, receive, send)
            return
        scope["route"] = _ROUTE  # as routing sets it: the request's metrics label
        request = Request(scope, receive, send)
        try:
            response: Response = await post_report(request, await bearer(request))
        except Exception as exc:
            response = await self.errors.answer(request, exc)
        await response(scope, receive, send)
