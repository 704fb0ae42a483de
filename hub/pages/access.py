"""Who may read the built-in pages: anyone in development mode; otherwise the holder of a read
(or admin) API token, sent as `Authorization: Bearer` (scripts, a proxy in front of the hub) or
as the HttpOnly cookie the sign-in form sets from a pasted token. The token is checked as the
API checks it (hub.tokens), on every request: a revoked token stops working at once."""

from fastapi import Request

from hub.database import ReadSession
from hub.deps import BearerDep, ReadSessionDep, SettingsDep
from hub.errors import NotAuthenticated
from hub.settings import HubSettings
from hub.tokens import service as tokens

TOKEN_COOKIE = "fleetmark_token"  # noqa: S105 - the cookie's name, not a secret


class SignInRequired(Exception):
    """No token came with a page request: the browser is sent to the sign-in form."""

    def __init__(self, back_to: str) -> None:
        super().__init__(back_to)
        self.back_to = back_to


def local_path(target: str | None) -> str:
    """Where to go after signing in: a path on this hub, never another site."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


async def check_token(session: ReadSession, token: str | None, settings: HubSettings) -> None:
    await tokens.require_scope(
        session, token, "read", token_secret=settings.token_secret.get_secret_value()
    )


async def require_reader(
    request: Request, credentials: BearerDep, session: ReadSessionDep, settings: SettingsDep
) -> None:
    if settings.mode == "development":
        return
    if credentials is not None:
        # A client that sends a header is answered 401 when it is wrong, as the API answers.
        await check_token(session, credentials.credentials, settings)
        return
    try:
        await check_token(session, request.cookies.get(TOKEN_COOKIE), settings)
    except NotAuthenticated:
        query = f"?{request.url.query}" if request.url.query else ""
        raise SignInRequired(request.url.path + query) from None
