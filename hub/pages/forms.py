"""Proof that a form posted to `/login` or `/logout` comes from the hub's own page, and not from
a page of another site that made the browser post it (the rules: docs/security.md).

The sign-in form's token is a keyed hash of a random value in a SameSite=Strict cookie; the
sign-out form's, of the sign-in id. A request with neither header is from no browser.
"""

import hmac
import re
import secrets
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Request, Response
from pydantic import StringConstraints

from hub.errors import CrossSiteRequest
from hub.pages.access import is_https, sign_in_id
from hub.security import hash_token

FORM_COOKIE = "fleetmark_sign_in_form"
# Over https, like the sign-in cookie: neither plain http nor another host can set it.
SECURE_FORM_COOKIE = f"__Host-{FORM_COOKIE}"
# Seconds the sign-in form's cookie lasts: a form left open longer is reloaded and sent again.
FORM_LIFETIME = 3600
# What secrets.token_urlsafe(32) makes; a cookie of any other shape is replaced.
_NONCE = re.compile(r"[A-Za-z0-9_-]{43}")

# The hidden field of the sign-in and sign-out forms: a keyed hash, 64 hex digits.
FormToken = Annotated[str, StringConstraints(max_length=64)]


def _form_cookie(request: Request) -> str:
    return SECURE_FORM_COOKIE if is_https(request) else FORM_COOKIE


def _token(secret: str, form: str, value: str) -> str:
    # The form's name is hashed too, so that no token stands for another form's, nor for the
    # stored hash of a sign-in id.
    return hash_token(secret, f"{form}:{value}")


def sign_in_form_nonce(request: Request) -> str:
    """The random value the sign-in form's token is made from: the one the browser keeps, if
    any, so that opening the form in a second tab leaves the first one's valid."""
    kept = request.cookies.get(_form_cookie(request))
    return kept if kept is not None and _NONCE.fullmatch(kept) else secrets.token_urlsafe(32)


def sign_in_form_token(secret: str, nonce: str) -> str:
    return _token(secret, "sign-in", nonce)


def sign_out_form_token(secret: str, signed_in: str) -> str:
    return _token(secret, "sign-out", signed_in)


def keep_sign_in_form(request: Request, response: Response, nonce: str) -> None:
    response.set_cookie(
        _form_cookie(request),
        nonce,
        max_age=FORM_LIFETIME,
        path="/",
        secure=is_https(request),
        httponly=True,
        samesite="strict",
    )


def refuse_forged_sign_in(request: Request, sent: str | None, secret: str) -> None:
    kept = request.cookies.get(_form_cookie(request))
    _refuse_forged(request, sent, None if kept is None else sign_in_form_token(secret, kept))


def refuse_forged_sign_out(request: Request, sent: str | None, secret: str) -> None:
    signed_in = sign_in_id(request)
    _refuse_forged(
        request, sent, None if signed_in is None else sign_out_form_token(secret, signed_in)
    )


def _refuse_forged(request: Request, sent: str | None, expected: str | None) -> None:
    """Refuse a form from another site, and one whose headers do not say where it comes from
    unless it carries the token expected (None: the browser kept nothing to make one from)."""
    if _from_this_hub(request):
        return
    if sent is not None and expected is not None and hmac.compare_digest(sent, expected):
        return
    raise CrossSiteRequest(
        "the browser did not say which site this form came from (Origin: null), and the form "
        "carries no valid token of this hub; reload the hub's page and send its form again"
    )


def _from_this_hub(request: Request) -> bool:
    """True when the headers say the form comes from this hub (or from no browser), False when
    they do not say; raises when they name another site."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site not in ("same-origin", "none"):
            raise CrossSiteRequest(
                f"this form was sent from another site (Sec-Fetch-Site: {site}); "
                "use the form on this hub's own page"
            )
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return True
    if origin == "null":
        return False
    if urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower():
        raise CrossSiteRequest(
            f"this form was sent from another site ({origin}); use the form on this hub's own page"
        )
    return True
