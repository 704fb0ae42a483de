"""The pages' questions: the API's query models (hub/client/schemas/) as a page's form sends
them. A text field left empty is sent (`?cluster=`) and means no filter; a page lists
PAGE_SIZE rows unless asked for another number."""

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field, model_validator

from hub.client.params import Limit, Text, TextList
from hub.client.schemas.diff import DiffOptions
from hub.client.schemas.drift import DriftQuery
from hub.client.schemas.fleet import FleetQuery
from hub.client.schemas.gate import GateOptions, TargetQuery
from hub.client.schemas.timeline import TimelineQuery
from hub.pages.rendering import PAGE_SIZE


class PageQuery(BaseModel):
    """Put first among a page's bases: its `limit` replaces the API's."""

    limit: Limit = PAGE_SIZE

    @model_validator(mode="before")
    @classmethod
    def _blank_is_none(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        optional = {
            field.alias or name for name, field in cls.model_fields.items() if field.default is None
        }
        return {
            key: None if key in optional and value == "" else value for key, value in data.items()
        }


class FleetPage(PageQuery, FleetQuery):
    """The fleet overview at `/`."""


class DriftPage(PageQuery, DriftQuery):
    """The drifted objects at `/drift`."""


class TimelinePage(PageQuery, TimelineQuery):
    """What happened to the fleet at `/timeline`, newest first."""


class DiffPage(PageQuery, DiffOptions):
    """Without environments: every environment the hub knows, in promotion order."""

    environments: Annotated[TextList | None, Field(alias="environment")] = None


class GatePage(PageQuery, GateOptions, TargetQuery):
    """Without an environment, the page offers them; without a target, it asks about the
    environment's newest platform commit."""

    environment: Text | None = None
