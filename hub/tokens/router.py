"""API token management (admin scope)."""

from fastapi import APIRouter, status

from hub.deps import AdminAccess, ClockDep, SessionDep, SettingsDep
from hub.tokens import service
from hub.tokens.schemas import CreatedToken, TokenInfo, TokenRequest

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"], dependencies=[AdminAccess])


@router.get("", response_model=list[TokenInfo])
async def list_tokens(session: SessionDep) -> list[TokenInfo]:
    return await service.list_tokens(session)


@router.post("", response_model=CreatedToken, status_code=status.HTTP_201_CREATED)
async def create_token(
    request: TokenRequest, session: SessionDep, settings: SettingsDep
) -> CreatedToken:
    return await service.create(
        session, request, token_secret=settings.token_secret.get_secret_value()
    )


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke_token(name: str, session: SessionDep, clock: ClockDep) -> None:
    await service.revoke(session, name, now=clock())
