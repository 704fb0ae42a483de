"""Signing in to the pages of a hub in production mode: the browser's cookie is a random sign-in
kept hashed in the store, never the token; signing out, expiry and revoking the token end it;
forms posted from another site are refused, and a browser that does not say where a form comes
from (plain http to another host) signs in and out with the token of the hub's own form;
guessing is slowed down; every answer carries the headers that keep a browser from running,
framing or sniffing anything else; and a long page URL survives the way through the sign-in
form."""

import re
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from hub.models import ApiToken, PageSignIn
from hub.pages.headers import DOCS_POLICY
from hub.pages.throttle import FailedSignIns
from hub.security import hash_token
from tests.conftest import TOKEN_SECRET, MakeClient
from tests.support import START, FakeClock, bearer

COOKIE = "fleetmark_sign_in"
FORM_COOKIE = "fleetmark_sign_in_form"
PAGE = "/drift?include_in_sync=true"
# What Chromium sends with the pages' own forms over plain http to a host other than localhost:
# Origin: null (the pages send no referrer), and no Sec-Fetch-Site (not a secure origin).
PLAIN_HTTP_BROWSER = {"Origin": "null"}


@pytest.fixture
async def browser(make_client: MakeClient) -> httpx.AsyncClient:
    return await make_client(mode="production")


async def sign_in(browser: httpx.AsyncClient, token: str, **headers: str) -> httpx.Response:
    return await browser.post("/login", data={"token": token, "next": PAGE}, headers=headers)


async def sign_ins(session: AsyncSession) -> list[str]:
    return list(await session.scalars(select(PageSignIn.id_hash)))


def form_token(page: httpx.Response) -> str:
    """The hidden form_token field of the (one) form on a page."""
    found = re.findall(r'name="form_token" value="([^"]*)"', page.text)
    assert len(found) == 1, found
    return found[0]


async def test_the_cookie_is_a_random_sign_in_not_the_token(
    browser: httpx.AsyncClient, read_token: str, session: AsyncSession
) -> None:
    first = await sign_in(browser, read_token)
    first_cookie = browser.cookies[COOKIE]
    second = await sign_in(browser, read_token)
    second_cookie = browser.cookies[COOKIE]
    page = await browser.get(PAGE)

    assert (first.status_code, second.status_code) == (303, 303)
    assert first_cookie != second_cookie
    for cookie in (first_cookie, second_cookie):
        assert read_token not in cookie
        assert cookie.startswith("fms_")
        assert len(cookie) == 47  # 32 random bytes
    stored = await sign_ins(session)
    assert sorted(stored) == sorted(
        hash_token(TOKEN_SECRET, cookie) for cookie in (first_cookie, second_cookie)
    )
    set_cookie = first.headers["set-cookie"]
    assert "HttpOnly" in set_cookie
    assert "SameSite=lax" in set_cookie
    assert "Path=/" in set_cookie
    assert "Max-Age=28800" in set_cookie  # FLEETMARK_SIGN_IN_LIFETIME, 8 hours
    assert "Secure" not in set_cookie  # reached over plain http
    assert page.status_code == 200


async def test_signing_out_deletes_the_sign_in(
    browser: httpx.AsyncClient, read_token: str, session: AsyncSession
) -> None:
    await sign_in(browser, read_token)
    cookie = browser.cookies[COOKIE]
    signed_out = await browser.post("/logout")
    dropped = COOKIE not in browser.cookies
    browser.cookies.set(COOKIE, cookie)  # kept by a copy of the cookie
    replayed = await browser.get(PAGE)

    assert signed_out.status_code == 303
    assert await sign_ins(session) == []
    assert dropped
    assert replayed.status_code == 303
    assert replayed.headers["location"].startswith("/login?next=")


async def test_revoking_the_token_locks_the_browser_out_at_once(
    browser: httpx.AsyncClient, read_token: str, admin_token: str, session: AsyncSession
) -> None:
    await sign_in(browser, read_token)
    before = await browser.get(PAGE)
    revoked = await browser.delete("/api/v1/tokens/grafana", headers=bearer(admin_token))
    after = await browser.get(PAGE)

    assert before.status_code == 200
    assert revoked.status_code == 204
    assert after.status_code == 303
    assert await sign_ins(session) == []


async def test_a_sign_in_made_as_its_token_was_revoked_is_refused(
    browser: httpx.AsyncClient, read_token: str, session: AsyncSession, clock: FakeClock
) -> None:
    """Revoking deletes the token's sign-ins; one that slipped in meanwhile fails all the same."""
    await sign_in(browser, read_token)
    await session.execute(update(ApiToken).values(revoked_at=clock.now))
    await session.commit()

    assert (await browser.get(PAGE)).status_code == 303


async def test_a_sign_in_expires(
    browser: httpx.AsyncClient, read_token: str, session: AsyncSession, clock: FakeClock
) -> None:
    await sign_in(browser, read_token)
    clock.advance(hours=7, minutes=59)
    still = await browser.get(PAGE)
    clock.advance(minutes=1)
    expired = await browser.get(PAGE)
    await sign_in(browser, read_token)

    assert still.status_code == 200
    assert expired.status_code == 303
    # A new sign-in takes the expired ones away.
    assert await session.scalar(select(func.count()).select_from(PageSignIn)) == 1


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"Origin": "https://evil.example"}, "sent from another site (https://evil.example)"),
        (
            PLAIN_HTTP_BROWSER,
            "did not say which site this form came from (Origin: null), and the form carries "
            "no valid token of this hub",
        ),
        (
            {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
            "sent from another site (Sec-Fetch-Site: cross-site)",
        ),
        (
            {"Sec-Fetch-Site": "same-site", "Origin": "https://hub.test"},
            "sent from another site (Sec-Fetch-Site: same-site)",
        ),
    ],
    ids=["other-origin", "null-origin", "cross-site", "same-site"],
)
async def test_a_form_posted_from_another_site_is_refused(
    browser: httpx.AsyncClient,
    read_token: str,
    session: AsyncSession,
    headers: dict[str, str],
    said: str,
) -> None:
    forged = await sign_in(browser, read_token, **headers)
    await sign_in(browser, read_token, Origin="http://hub.test")
    forged_out = await browser.post("/logout", headers=headers)

    assert forged.status_code == 403
    assert said in forged.text
    assert "set-cookie" not in forged.headers
    assert forged_out.status_code == 403
    assert len(await sign_ins(session)) == 1  # the forged sign-out deleted nothing


async def test_forms_from_the_hubs_own_pages_are_accepted(
    browser: httpx.AsyncClient, read_token: str, session: AsyncSession
) -> None:
    by_fetch_metadata = await sign_in(browser, read_token, **{"Sec-Fetch-Site": "same-origin"})
    by_origin = await sign_in(browser, read_token, Origin="http://hub.test")
    signed_out = await browser.post("/logout", headers={"Sec-Fetch-Site": "same-origin"})

    assert (by_fetch_metadata.status_code, by_origin.status_code) == (303, 303)
    assert signed_out.status_code == 303
    assert len(await sign_ins(session)) == 1


async def test_a_browser_that_does_not_say_where_forms_come_from_uses_the_forms_token(
    browser: httpx.AsyncClient, read_token: str, session: AsyncSession
) -> None:
    form = await browser.get(f"/login?next={quote(PAGE, safe='')}")
    signed_in = await browser.post(
        "/login",
        data={"token": read_token, "next": PAGE, "form_token": form_token(form)},
        headers=PLAIN_HTTP_BROWSER,
    )
    page = await browser.get(PAGE)
    signed_out = await browser.post(
        "/logout", data={"form_token": form_token(page)}, headers=PLAIN_HTTP_BROWSER
    )

    set_cookie = form.headers["set-cookie"]
    assert set_cookie.startswith(f"{FORM_COOKIE}=")
    assert {"HttpOnly", "Path=/", "SameSite=strict", "Max-Age=3600"} <= set(set_cookie.split("; "))
    assert "Secure" not in set_cookie  # reached over plain http
    assert form.cookies[FORM_COOKIE] not in form.text  # the page shows a keyed hash of it
    assert signed_in.status_code == 303
    assert signed_in.headers["location"] == PAGE
    assert page.status_code == 200
    assert signed_out.status_code == 303
    assert await sign_ins(session) == []


async def test_a_form_without_this_browsers_token_is_refused(
    browser: httpx.AsyncClient, make_client: MakeClient, read_token: str, session: AsyncSession
) -> None:
    """A page of another site can make the browser post a token its author fetched for itself,
    but not send the cookie that token was made for."""
    other = await make_client(mode="production")
    await browser.get("/login")
    others_form = await other.get("/login")
    without = await browser.post("/login", data={"token": read_token}, headers=PLAIN_HTTP_BROWSER)
    with_others = await browser.post(
        "/login",
        data={"token": read_token, "form_token": form_token(others_form)},
        headers=PLAIN_HTTP_BROWSER,
    )
    # Signed in both (their forms' headers say where they come from), each has a sign-out form.
    await sign_in(browser, read_token, Origin="http://hub.test")
    await sign_in(other, read_token, Origin="http://hub.test")
    others_page = await other.get(PAGE)
    sign_out_without = await browser.post("/logout", headers=PLAIN_HTTP_BROWSER)
    sign_out_with_others = await browser.post(
        "/logout", data={"form_token": form_token(others_page)}, headers=PLAIN_HTTP_BROWSER
    )

    for refused in (without, with_others, sign_out_without, sign_out_with_others):
        assert refused.status_code == 403
        assert "carries no valid token of this hub" in refused.text
    assert "set-cookie" not in with_others.headers
    assert len(await sign_ins(session)) == 2  # the refused sign-outs deleted nothing


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site", "Origin": "null"},
        {"Sec-Fetch-Site": "same-site", "Origin": "null"},
        {"Origin": "https://evil.example"},
    ],
    ids=["cross-site", "same-site", "other-origin"],
)
async def test_a_form_from_another_site_is_refused_whatever_token_it_carries(
    browser: httpx.AsyncClient, read_token: str, session: AsyncSession, headers: dict[str, str]
) -> None:
    form = await browser.get("/login")
    forged = await browser.post(
        "/login", data={"token": read_token, "form_token": form_token(form)}, headers=headers
    )
    await sign_in(browser, read_token, Origin="http://hub.test")
    page = await browser.get(PAGE)
    forged_out = await browser.post(
        "/logout", data={"form_token": form_token(page)}, headers=headers
    )

    assert forged.status_code == 403
    assert "sent from another site" in forged.text
    assert forged_out.status_code == 403
    assert len(await sign_ins(session)) == 1


async def test_the_eleventh_failed_sign_in_is_answered_429(
    browser: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> None:
    failed = []
    for _ in range(10):
        failed.append((await sign_in(browser, "fma_guess")).status_code)
        clock.advance(seconds=10)
    refused = await sign_in(browser, "fma_guess")
    refused_right = await sign_in(browser, read_token)
    clock.advance(seconds=210)  # the first failure is five minutes old
    again = await sign_in(browser, read_token)

    assert failed == [401] * 10
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "200"
    assert "too many failed sign-ins from 127.0.0.1" in refused.text
    assert refused_right.status_code == 429
    assert again.status_code == 303


def test_failed_sign_ins_are_kept_for_a_bounded_number_of_addresses() -> None:
    failed = FailedSignIns(limit=1, capacity=2)
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        failed.record(address, START)

    assert failed.retry_after("10.0.0.1", START) is None  # forgotten, the quietest
    assert failed.retry_after("10.0.0.2", START) == 300
    assert failed.retry_after("10.0.0.3", START) == 300


async def test_every_answer_carries_the_security_headers(
    browser: httpx.AsyncClient, read_token: str
) -> None:
    await sign_in(browser, read_token)
    page = await browser.get(PAGE)
    form = await browser.get("/login")
    api = await browser.get("/api/v1/clusters", headers=bearer(read_token))
    docs = await browser.get("/docs")

    for answer in (page, form, api, docs):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["referrer-policy"] == "no-referrer"
    assert page.headers["content-security-policy"] == "default-src 'self'; frame-ancestors 'none'"
    assert form.headers["content-security-policy"] == page.headers["content-security-policy"]
    assert api.headers["content-security-policy"] == page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    assert docs.status_code == 200
    assert docs.headers["content-security-policy"] == DOCS_POLICY
    assert "frame-ancestors 'none'" in DOCS_POLICY


async def test_a_long_page_url_survives_the_sign_in(
    browser: httpx.AsyncClient, read_token: str
) -> None:
    long_url = "/drift?" + "&".join(f"cluster=drone-{n:03}-{'x' * 40}" for n in range(20))
    assert len(long_url) > 253

    sent_away = await browser.get(long_url)
    form = await browser.get(sent_away.headers["location"])
    signed_in = await browser.post("/login", data={"token": read_token, "next": long_url})

    assert sent_away.headers["location"] == f"/login?next={quote(long_url, safe='')}"
    assert form.status_code == 200
    assert f'name="next" value="{long_url.replace("&", "&amp;")}"' in form.text
    assert signed_in.status_code == 303
    assert signed_in.headers["location"] == long_url
