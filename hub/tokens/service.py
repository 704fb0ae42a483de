"""API token lifecycle and scope checks, and the sign-ins to the pages made from tokens."""

import hmac
from datetime import datetime, timedelta

from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession

from hub.errors import AlreadyExists, InsufficientScope, NotAuthenticated, UnknownToken
from hub.security import API_TOKEN_PREFIX, SIGN_IN_PREFIX, hash_token, new_token
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


async def sign_in(
    session: AsyncSession,
    token: str,
    *,
    now: datetime,
    lifetime: timedelta,
    token_secret: str,
) -> str:
    """A new sign-in to the pages with a read (or admin) token: the random id the browser keeps
    in its cookie, which is not the token and is stored only as a keyed hash."""
    await require_scope(session, token, "read", token_secret=token_secret)
    await repository.delete_expired_sign_ins(session, now)
    sign_in_id = new_token(SIGN_IN_PREFIX)
    made = await repository.create_sign_in(
        session,
        id_hash=hash_token(token_secret, sign_in_id),
        token_hash=hash_token(token_secret, token),
        expires_at=now + lifetime,
    )
    if not made:  # revoked since it was checked
        raise NotAuthenticated("the API token is unknown or revoked")
    return sign_in_id


async def require_sign_in(
    session: AsyncSession, sign_in_id: str | None, *, now: datetime, token_secret: str
) -> None:
    if not sign_in_id:
        raise NotAuthenticated("sign in with an API token")
    if not await repository.signed_in(session, hash_token(token_secret, sign_in_id), now):
        raise NotAuthenticated("the sign-in has expired or its API token was revoked")


async def sign_out(session: AsyncSession, sign_in_id: str, *, token_secret: str) -> None:
    await repository.delete_sign_in(session, hash_token(token_secret, sign_in_id))
