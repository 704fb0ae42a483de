"""API token management (admin scope)."""

from fastapi import APIRouter, status

from hub.client.params import Text
from hub.deps import AdminAccess, ClockDep, SessionDep, SettingsDep
from hub.errors import error_response, error_responses
from hub.tokens import service
from hub.tokens.schemas import CreatedToken, TokenInfo, TokenRequest

router = APIRouter(
    prefix="/api/v1/tokens",
    tags=["tokens"],
    dependencies=[AdminAccess],
    responses=error_responses(401, 403, 503),
)


@router.get("", response_model=list[TokenInfo])
async def list_tokens(session: SessionDep) -> list[TokenInfo]:
    return await service.list_tokens(session)


@router.post(
    "",
    response_model=CreatedToken,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(400, 422)
    | error_response(409, "A token of that name exists already."),
)
async def create_token(
    request: TokenRequest, session: SessionDep, settings: SettingsDep
) -> CreatedToken:
    return await service.create(
        session, request, token_secret=settings.token_secret.get_secret_value()
    )


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(422) | error_response(404, "No active token of that name."),
)
async def revoke_token(name: Text, session: SessionDep, clock: ClockDep) -> None:
    await service.revoke(session, name, now=clock())
