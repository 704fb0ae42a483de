"""SQL for API tokens."""

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import ApiToken


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
    statement = (
        update(ApiToken)
        .where(ApiToken.name == name, ApiToken.revoked_at.is_(None))
        .values(revoked_at=now)
        .returning(ApiToken.id)
    )
    return (await session.execute(statement)).scalar_one_or_none() is not None


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
