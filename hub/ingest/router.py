"""POST /api/v1/reports: the agent's way in."""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from pydantic import ValidationError

from hub.database import Statements
from hub.deps import BearerDep, StatementsDep
from hub.errors import FleetmarkError, InvalidInput, PayloadTooLarge, error_responses
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


async def get_report_batcher(request: Request) -> ReportBatcher:
    batcher: ReportBatcher = request.app.state.report_batcher
    return batcher


ReportBatcherDep = Annotated[ReportBatcher, Depends(get_report_batcher)]


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


# Every report passes here, so only the statements and the batcher are dependencies (the ones
# an app's dependency_overrides replace); the rest is read from the app's state, and the reply
# is answered as its JSON: no further dependencies to solve, no reply to validate again.
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
async def post_report(
    request: Request,
    credentials: BearerDep,
    statements: StatementsDep,
    batcher: ReportBatcherDep,
) -> Response:
    state = request.app.state
    settings: HubSettings = state.settings
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
