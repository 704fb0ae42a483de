"""POST /api/v1/reports: the agent's way in."""

from fastapi import APIRouter, Request, Response
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import ValidationError

from hub.database import Statements
from hub.deps import BearerDep, ClockDep, SettingsDep, StatementsDep
from hub.errors import FleetmarkError, InvalidInput, PayloadTooLarge, error_responses
from hub.ingest import service
from hub.ingest.schemas import MAX_REPORT_BYTES_HEADER, Report, ReportReply
from hub.settings import HubSettings
from hub.types import Clock

router = APIRouter(prefix="/api/v1", tags=["ingest"])

# The body is read and validated by hand (size limit first, then pydantic's JSON parser),
# so its schema is declared for the OpenAPI document here.
REPORT_SCHEMA = Report.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
REPORT_COMPONENTS = REPORT_SCHEMA.pop("$defs", {}) | {"Report": REPORT_SCHEMA}


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


_LIMIT_HEADER = {
    MAX_REPORT_BYTES_HEADER: {
        "schema": {"type": "integer"},
        "description": "The largest report body this hub takes, in bytes: an agent sends a "
        "full snapshot over it in parts (`snapshot_part`).",
    }
}
_RESPONSES = error_responses(401, 403, 413, 422, 503)
_RESPONSES[413]["headers"] = _LIMIT_HEADER


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
    credentials: BearerDep,
    statements: StatementsDep,
    settings: SettingsDep,
    clock: ClockDep,
) -> ReportReply:
    try:
        reply = await _ingest(request, credentials, statements, settings, clock)
    except Exception as exc:
        request.app.state.metrics.record_refused_report(exc)
        raise
    request.app.state.metrics.record_report(reply)
    response.headers[MAX_REPORT_BYTES_HEADER] = str(settings.max_report_bytes)
    return reply


async def _ingest(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None,
    statements: Statements,
    settings: HubSettings,
    clock: Clock,
) -> ReportReply:
    token = None if credentials is None else credentials.credentials
    token_secret = settings.token_secret.get_secret_value()
    received_at = clock()
    if not token:
        await service.authenticate(statements, token, token_secret=token_secret)
    try:
        body = await _read_body(request, settings.max_report_bytes)
        try:
            report = Report.from_body(body, not_after=received_at + settings.ingest_max_clock_skew)
        except ValidationError as exc:
            raise InvalidInput.from_validation_error(exc) from exc
    except FleetmarkError:
        # The token is checked before anything is said about the body; a valid report has it
        # checked inside the ingest statement instead, saving a round trip.
        await service.authenticate(statements, token, token_secret=token_secret)
        raise
    return await service.ingest(
        statements,
        token,
        report,
        received_at=received_at,
        max_clock_skew=settings.ingest_max_clock_skew,
        max_backdate=settings.ingest_max_backdate,
        token_secret=token_secret,
        busy_timeout=settings.database_pool_timeout,
        agent_placement=settings.agent_placement == "first-report",
    )
