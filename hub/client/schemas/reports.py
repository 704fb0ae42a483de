"""The hub's reply to an agent's report (POST /api/v1/reports). The report itself is the
agent's contract (fleetmark.report/v1, docs/api.md), sent as the document it is."""

from pydantic import Field

from hub.client.schemas.base import Answer


class ReportReply(Answer):
    accepted: int
    changed: int
    duplicate: bool
    warnings: list[str] = Field(default_factory=list)
