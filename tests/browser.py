"""The one way the tests drive a browser: the system's Chromium (`apt-get install chromium`)
through Playwright for Python, headless, never a browser Playwright downloads. Where Chromium is
not installed the tests that need it are skipped, saying so, except under CI=true: `.ci/run`
installs it, and there a missing browser fails the tests instead of passing them unseen."""

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Route, sync_playwright

CHROMIUM = shutil.which("chromium")
# Seconds a page may take to load, or an element to appear, before the test fails.
PAGE_TIMEOUT = 30
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Screenshots for review: kept after the run, ignored by git.
SCREENSHOTS = Path(__file__).resolve().parent.parent / "test-output" / "screenshots"
# A name Chromium resolves to this machine: a hub reached by it is, to the browser, on another
# host over plain http, not a secure origin (as a hub on a LAN address is), unlike 127.0.0.1.
ANOTHER_HOST = "hub.test"

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="no Chromium here: apt-get install chromium",
)


@contextmanager
def chromium() -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.fail("no Chromium here (apt-get install chromium); CI=true runs the browser tests")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                f"--host-resolver-rules=MAP {ANOTHER_HOST} 127.0.0.1",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


def on_another_host(hub_url: str) -> str:
    """The URL of a hub served on 127.0.0.1, by a name that is not localhost."""
    return hub_url.replace("//127.0.0.1:", f"//{ANOTHER_HOST}:", 1)


def open_page(browser: Browser, hub_url: str, width: int = 1440) -> tuple[Page, list[str]]:
    """A tab `width` pixels wide that may reach the hub only; the list collects what it tried
    to fetch elsewhere."""
    refused: list[str] = []

    def only_the_hub(route: Route) -> None:
        if route.request.url.startswith(hub_url + "/"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page = browser.new_page(viewport={"width": width, "height": 1000}, base_url=hub_url)
    page.set_default_timeout(PAGE_TIMEOUT * 1000)
    page.route("**/*", only_the_hub)
    return page, refused


def policy_violations(page: Page) -> list[str]:
    """The Content-Security-Policy violations Chromium reports on the tab's console, as they
    come (a blocked script, style or file)."""
    violations: list[str] = []

    def note(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            violations.append(message.text)

    page.on("console", note)
    return violations


# The elements whose right edge passes the viewport's, as tag.class and their right edge.
_PAST_THE_RIGHT_EDGE = """() => [...document.querySelectorAll("body *")]
    .filter((element) => element.getBoundingClientRect().right > window.innerWidth + 0.5)
    .map((element) => `${element.tagName.toLowerCase()}.${element.className}: `
        + Math.round(element.getBoundingClientRect().right))"""


def overflow(page: Page) -> tuple[int, int, list[str]]:
    """How wide the document is, how wide the window, and what sticks out past its right."""
    scroll_width, inner_width = page.evaluate(
        "() => [document.documentElement.scrollWidth, window.innerWidth]"
    )
    return scroll_width, inner_width, page.evaluate(_PAST_THE_RIGHT_EDGE)


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)
    assert shot.startswith(PNG_SIGNATURE)


def column(page: Page, table: str, cell: int) -> dict[str, str]:
    """The text of one column of a table's rows, by the row's cluster."""
    return {
        row.get_attribute("data-cluster") or "": row.locator("td").nth(cell).inner_text()
        for row in page.locator(f"#{table} tbody tr[data-cluster]").all()
    }
