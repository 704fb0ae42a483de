"""API shapes for API tokens."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

Scope = Literal["admin", "read", "metrics"]


class TokenRequest(BaseModel):
    name: Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=r"^[\w.@-]+$")]
    scope: Scope


class CreatedToken(BaseModel):
    name: str
    scope: Scope
    token: str = Field(description="Shown once; only its hash is stored.")


class TokenInfo(BaseModel):
    name: str
    scope: Scope
    created_at: datetime
    revoked_at: datetime | None
