"""Signing in to the built-in pages in Chromium, on a hub in production mode: a page asks for a
read token, signing in leads back to it, signing out ends the sign-in, on 127.0.0.1 as on
another host over plain http (where the browser does not say where its forms come from); and
no page breaks the hub's Content-Security-Policy."""

from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.agent.conftest import LiveHub
from tests.browser import (
    chromium,
    column,
    needs_chromium,
    on_another_host,
    open_page,
    policy_violations,
    screenshot,
)
from tests.hub.pages.conftest import Scenario
from tests.hub.pages.test_pages import PAGES

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def browser(production_hub: LiveHub) -> Iterator[Browser]:
    """Started after the scenario is built: Playwright's sync API runs an event loop of its
    own, and the scenario's (async) fixture cannot run beside it."""
    with chromium() as running:
        yield running


def reached_directly(hub_url: str) -> str:
    return hub_url


# Chromium says where a form comes from (Sec-Fetch-Site) only to a secure origin, 127.0.0.1
# here; over plain http to another host it says Origin: null alone, as for a forged form.
@pytest.mark.parametrize(
    "reached_by", [reached_directly, on_another_host], ids=["localhost", "another-host"]
)
def test_signing_in_with_a_read_token(
    browser: Browser,
    pages_scenario: Scenario,
    production_hub: LiveHub,
    reached_by: Callable[[str], str],
    request: pytest.FixtureRequest,
) -> None:
    page, refused = open_page(browser, reached_by(production_hub.url))
    page.goto("/drift?environment=stage")
    page.wait_for_url("**/login?next=*")
    screenshot(page, f"login-{request.node.callspec.id}")
    page.get_by_label("API token").fill(pages_scenario.token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/drift?environment=stage")
    listed = column(page, "drift", 6)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/login")
    page.close()

    assert set(listed) == {"large-02"}
    assert refused == []


NO_TOKEN = (
    "the browser did not say which site this form came from (Origin: null), and the form "
    "carries no valid token of this hub; reload the hub's page and send its form again"
)


@pytest.mark.parametrize(
    ("reached_by", "heading", "problems"),
    [(reached_directly, "Fleet", []), (on_another_host, "Cannot show this page", [NO_TOKEN])],
    ids=["localhost", "another-host"],
)
def test_a_sign_in_form_without_its_token(
    browser: Browser,
    pages_scenario: Scenario,
    production_hub: LiveHub,
    reached_by: Callable[[str], str],
    heading: str,
    problems: list[str],
) -> None:
    """Where the browser does not say where the form comes from, its token is the only proof:
    without it the form is refused, which shows that the test above signs in by the token."""
    page, _ = open_page(browser, reached_by(production_hub.url))
    page.goto("/login")
    page.locator("input[name=form_token]").evaluate("field => field.remove()")
    page.get_by_label("API token").fill(pages_scenario.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("h1")).to_have_text(heading)
    shown = page.locator(".problem").all_inner_texts()
    page.close()

    assert shown == problems


def test_no_page_breaks_the_content_security_policy(
    browser: Browser, pages_scenario: Scenario, production_hub: LiveHub
) -> None:
    page, refused = open_page(browser, production_hub.url)
    violations = policy_violations(page)
    page.goto("/login")
    page.get_by_label("API token").fill("fma_wrong")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("alert").wait_for()
    page.get_by_label("API token").fill(pages_scenario.token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(production_hub.url + "/")
    shown = []
    for path in [*PAGES, "/clusters/nowhere"]:
        page.goto(path)
        shown.append(page.locator("h1").inner_text())
    page.close()

    assert violations == []
    assert "Cannot show this page" in shown
    assert len(shown) == len(PAGES) + 1
    assert refused == []
