"""Wire shapes of the health endpoints."""

from typing import Literal

from pydantic import BaseModel, Field


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "unavailable"]
    detail: str | None = Field(default=None, description="Why the database cannot be used.")
