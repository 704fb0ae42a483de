"""API token lifecycle and scope checks."""

import hmac
from datetime import datetime

from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession

from hub.errors import AlreadyExists, InsufficientScope, NotAuthenticated, UnknownToken
from hub.security import API_TOKEN_PREFIX, hash_token, new_token
from hub.tokens import repository
from hub.tokens.schemas import CreatedToken, Scope, TokenInfo, TokenRequest

FIRST_ADMIN_TOKEN_NAME = "admin"  # noqa: S105 - a name, not a secret

# A scope and every scope it includes.
_GRANTS: dict[str, set[Scope]] = {
    "admin": {"admin", "read", "metrics"},
    "read": {"read"},
    "metrics": {"metrics"},
}


async def create(
    session: AsyncSession, request: TokenRequest, *, token_secret: str
) -> CreatedToken:
    token = new_token(API_TOKEN_PREFIX)
    created = await repository.create(
        session, name=request.name, scope=request.scope, token_hash=hash_token(token_secret, token)
    )
    if not created:
        raise AlreadyExists(f"an API token named {request.name!r} exists already")
    return CreatedToken(name=request.name, scope=request.scope, token=token)


async def create_first_admin(
    session: AsyncSession, *, token: str | None, token_secret: str
) -> str | None:
    """An admin token named "admin" when no active admin token exists: `token`, else a new one.

    Returns the token made, None when there was an admin token already (or another replica
    starting at the same moment made it), so a hub can be administered through the API alone.
    """
    if await repository.admin_exists(session):
        return None
    token = token or new_token(API_TOKEN_PREFIX)
    created = await repository.create(
        session,
        name=FIRST_ADMIN_TOKEN_NAME,
        scope="admin",
        token_hash=hash_token(token_secret, token),
    )
    return token if created else None


async def revoke(session: AsyncSession, name: str, *, now: datetime) -> None:
    if not await repository.revoke(session, name, now):
        raise UnknownToken(f"no active API token named {name!r}")


async def list_tokens(session: AsyncSession) -> list[TokenInfo]:
    return [
        TokenInfo.model_validate(token, from_attributes=True)
        for token in await repository.list_tokens(session)
    ]


def is_configured(token: str | None, configured: SecretStr | None) -> bool:
    """Whether `token` is the one a setting holds (FLEETMARK_METRICS_TOKEN), in constant time."""
    if token is None or configured is None:
        return False
    return hmac.compare_digest(token.encode(), configured.get_secret_value().encode())


async def require_scope(
    session: AsyncSession, token: str | None, needed: Scope, *, token_secret: str
) -> None:
    if not token:
        raise NotAuthenticated("an API token is required (Authorization: Bearer <token>)")
    scope = await repository.scope_of(session, hash_token(token_secret, token))
    if scope is None:
        raise NotAuthenticated("the API token is unknown or revoked")
    if needed not in _GRANTS[scope]:
        raise InsufficientScope(f"this needs a token with scope {needed!r}; yours has {scope!r}")
