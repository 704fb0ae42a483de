"""POST /api/v1/reports: the agent's way in."""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from pydantic import ValidationError

from hub.deps import BearerDep, ClockDep, SettingsDep, StatementsDep
from hub.errors import FleetmarkError, InvalidInput, PayloadTooLarge, error_responses
from hub.ingest import service
from hub.ingest.batcher import ReportBatcher
from hub.ingest.schemas import MAX_REPORT_BYTES_HEADER, Report, ReportReply

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


async def _token(credentials: BearerDep) -> str | None:
    return None if credentials is None else credentials.credentials


async def _received_at(clock: ClockDep) -> datetime:
    """The hub's time a report arrived at: read once per request, before its body."""
    return clock()


async def get_report_batcher(request: Request) -> ReportBatcher:
    batcher: ReportBatcher = request.app.state.report_batcher
    return batcher


TokenDep = Annotated[str | None, Depends(_token)]
ReceivedAtDep = Annotated[datetime, Depends(_received_at)]
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
    token: TokenDep,
    statements: StatementsDep,
    settings: SettingsDep,
    received_at: ReceivedAtDep,
) -> Report:
    """The report the body holds, its times no later than the hub's clock allows: the size
    limit is checked first, then pydantic's JSON parser validates it."""
    with _refusals_counted(request):
        token_secret = settings.token_secret.get_secret_value()
        if not token:
            await service.authenticate(statements, token, token_secret=token_secret)
        try:
            body = await _read_body(request, settings.max_report_bytes)
            try:
                return Report.from_body(
                    body, not_after=received_at + settings.ingest_max_clock_skew
                )
            except ValidationError as exc:
                raise InvalidInput.from_validation_error(exc) from exc
        except FleetmarkError:
            # The token is checked before anything is said about the body; a valid report has
            # it checked inside the ingest statement instead, saving a round trip.
            await service.authenticate(statements, token, token_secret=token_secret)
            raise


ReportDep = Annotated[Report, Depends(read_report)]


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
    response: Response,
    report: ReportDep,
    token: TokenDep,
    batcher: ReportBatcherDep,
    settings: SettingsDep,
    received_at: ReceivedAtDep,
) -> ReportReply:
    with _refusals_counted(request):
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
    request.app.state.metrics.record_report(reply)
    response.headers[MAX_REPORT_BYTES_HEADER] = str(settings.max_report_bytes)
    return reply
