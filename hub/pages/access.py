"""Who may read the built-in pages: anyone in development mode; otherwise the holder of a read
(or admin) API token, sent as `Authorization: Bearer` (scripts, a proxy in front of the hub),
or a browser signed in with one through the sign-in form. The browser's cookie holds a random
id of its sign-in, never the token; every page looks the sign-in up with its token, so that
signing out or revoking the token ends it at once."""

from typing import Annotated

from fastapi import Depends, Request
from pydantic import StringConstraints

from hub.deps import BearerDep, ClockDep, ReadSessionDep, SettingsDep
from hub.errors import NotAuthenticated
from hub.pages.throttle import FailedSignIns
from hub.tokens import service as tokens

SIGN_IN_COOKIE = "fleetmark_sign_in"
# Over https: a cookie so named is taken by the browser only with Secure, Path=/ and no Domain,
# so neither plain http nor another host of the domain can set or replace it.
SECURE_SIGN_IN_COOKIE = f"__Host-{SIGN_IN_COOKIE}"
# The longest page URL a sign-in leads back to: twenty repeated filters of the longest name,
# percent-encoded, fit; encoded once more in /login?next=, it stays within a request line.
MAX_PAGE_URL_CHARS = 16 * 1024

# Where to go after signing in (a page's path and query), as the form sends it back.
PageUrl = Annotated[str, StringConstraints(max_length=MAX_PAGE_URL_CHARS)]


class SignInRequired(Exception):
    """No sign-in came with a page request: the browser is sent to the sign-in form."""

    def __init__(self, back_to: str) -> None:
        super().__init__(back_to)
        self.back_to = back_to


def local_path(target: str | None) -> str:
    """Where to go after signing in: a path on this hub, never another site."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


def is_https(request: Request) -> bool:
    """Whether the browser reached the hub over https: directly, or through a proxy whose
    X-Forwarded-Proto uvicorn believes (FLEETMARK_FORWARDED_ALLOW_IPS)."""
    return request.url.scheme == "https"


def sign_in_cookie(request: Request) -> str:
    return SECURE_SIGN_IN_COOKIE if is_https(request) else SIGN_IN_COOKIE


def sign_in_id(request: Request) -> str | None:
    return request.cookies.get(sign_in_cookie(request))


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


async def get_failed_sign_ins(request: Request) -> FailedSignIns:
    failed: FailedSignIns = request.app.state.failed_sign_ins
    return failed


FailedSignInsDep = Annotated[FailedSignIns, Depends(get_failed_sign_ins)]


async def require_reader(
    request: Request,
    credentials: BearerDep,
    session: ReadSessionDep,
    settings: SettingsDep,
    clock: ClockDep,
) -> None:
    if settings.mode == "development":
        return
    secret = settings.token_secret.get_secret_value()
    if credentials is not None:
        # A client that sends a header is answered 401 when it is wrong, as the API answers.
        await tokens.require_scope(session, credentials.credentials, "read", token_secret=secret)
        return
    try:
        await tokens.require_sign_in(session, sign_in_id(request), now=clock(), token_secret=secret)
    except NotAuthenticated:
        query = f"?{request.url.query}" if request.url.query else ""
        raise SignInRequired(request.url.path + query) from None
