"""Signing in to the built-in pages in Chromium, on a hub in production mode: a page asks for a
read token, signing in leads back to it, signing out ends the sign-in; and no page breaks the
hub's Content-Security-Policy."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from tests.agent.conftest import LiveHub
from tests.browser import (
    chromium,
    column,
    needs_chromium,
    open_page,
    policy_violations,
    screenshot,
)
from tests.pages.conftest import Scenario
from tests.pages.test_pages import PAGES

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def browser(production_hub: LiveHub) -> Iterator[Browser]:
    """Started after the scenario is built: Playwright's sync API runs an event loop of its
    own, and the scenario's (async) fixture cannot run beside it."""
    with chromium() as running:
        yield running


def test_signing_in_with_a_read_token(
    browser: Browser, pages_scenario: Scenario, production_hub: LiveHub
) -> None:
    page, refused = open_page(browser, production_hub.url)
    page.goto("/drift?environment=stage")
    page.wait_for_url("**/login?next=*")
    screenshot(page, "login")
    page.get_by_label("API token").fill(pages_scenario.token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/drift?environment=stage")
    listed = column(page, "drift", 6)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/login")
    page.close()

    assert set(listed) == {"large-02"}
    assert refused == []


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
