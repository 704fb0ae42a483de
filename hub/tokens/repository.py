"""SQL for API tokens and the sign-ins to the pages made from them."""

from datetime import datetime

from sqlalchemy import delete, literal, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import ApiToken, PageSignIn


async def create(session: AsyncSession, *, name: str, scope: str, token_hash: str) -> bool:
    """Insert a token; False when the name is taken."""
    statement = (
        insert(ApiToken)
        .values(name=name, scope=scope, token_hash=token_hash)
        .on_conflict_do_nothing(index_elements=[ApiToken.name])
        .returning(ApiToken.id)
    )
    return (await session.execute(statement)).scalar_one_or_none() is not None


async def revoke(session: AsyncSession, name: str, now: datetime) -> bool:
    """Revoke the token and delete the sign-ins made from it."""
    statement = (
        update(ApiToken)
        .where(ApiToken.name == name, ApiToken.revoked_at.is_(None))
        .values(revoked_at=now)
        .returning(ApiToken.id)
    )
    revoked = (await session.execute(statement)).scalar_one_or_none()
    if revoked is None:
        return False
    await session.execute(delete(PageSignIn).where(PageSignIn.api_token_id == revoked))
    return True


async def scope_of(session: AsyncSession, token_hash: str) -> str | None:
    statement = select(ApiToken.scope).where(
        ApiToken.token_hash == token_hash, ApiToken.revoked_at.is_(None)
    )
    return (await session.execute(statement)).scalar_one_or_none()


async def admin_exists(session: AsyncSession) -> bool:
    statement = select(ApiToken.id).where(ApiToken.scope == "admin", ApiToken.revoked_at.is_(None))
    return (await session.execute(statement.limit(1))).first() is not None


async def list_tokens(session: AsyncSession) -> list[ApiToken]:
    return list(await session.scalars(select(ApiToken).order_by(ApiToken.name)))


async def create_sign_in(
    session: AsyncSession, *, id_hash: str, token_hash: str, expires_at: datetime
) -> bool:
    """A sign-in made from the token if it is active; False when it is not (any longer)."""
    made_from = select(literal(id_hash), ApiToken.id, literal(expires_at)).where(
        ApiToken.token_hash == token_hash, ApiToken.revoked_at.is_(None)
    )
    statement = (
        insert(PageSignIn)
        .from_select(["id_hash", "api_token_id", "expires_at"], made_from)
        .returning(PageSignIn.id_hash)
    )
    return (await session.execute(statement)).scalar_one_or_none() is not None


async def signed_in(session: AsyncSession, id_hash: str, now: datetime) -> bool:
    """Whether the sign-in exists, has not expired, and its token is not revoked (revoking
    deletes a token's sign-ins, but one made while it was being revoked may have slipped in):
    one lookup by primary key on each table."""
    statement = (
        select(PageSignIn.id_hash)
        .join(ApiToken, ApiToken.id == PageSignIn.api_token_id)
        .where(
            PageSignIn.id_hash == id_hash,
            PageSignIn.expires_at > now,
            ApiToken.revoked_at.is_(None),
        )
    )
    return (await session.execute(statement)).first() is not None


async def delete_sign_in(session: AsyncSession, id_hash: str) -> None:
    await session.execute(delete(PageSignIn).where(PageSignIn.id_hash == id_hash))


async def delete_expired_sign_ins(session: AsyncSession, now: datetime) -> None:
    await session.execute(delete(PageSignIn).where(PageSignIn.expires_at <= now))
