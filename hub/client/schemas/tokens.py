"""API tokens (admin): created, listed, revoked."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from hub.client.schemas.base import Answer, ItemList

Scope = Literal["admin", "read", "metrics"]


class TokenRequest(BaseModel):
    name: str
    scope: Scope


class CreatedToken(Answer):
    """A token, shown once: only its hash is stored."""

    name: str
    scope: Scope
    token: str


class TokenInfo(BaseModel):
    name: str
    scope: Scope
    created_at: datetime
    revoked_at: datetime | None


class TokenList(ItemList[TokenInfo]):
    pass
