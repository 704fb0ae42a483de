"""/docs and /redoc rendered by Chromium from a hub served on a real port, with every request
to anywhere but the hub refused, as on an air-gapped network. The screenshots are kept in the
test's temporary folder.

Chromium is the system's, driven as every browser test drives it (tests/browser.py).
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Route

from tests.browser import PAGE_TIMEOUT, PNG_SIGNATURE, chromium, needs_chromium
from tests.conftest import DatabaseServer
from tests.served import ServedHub, hub_environment, served_hub

# ReDoc's menu footer always shows "API docs by Redocly" with a logo from its CDN; refused, the
# image hides itself (its onError), and nothing else on the page needs it.
DECORATIVE = {"https://cdn.redoc.ly/redoc/logo-mini.svg"}
# What each page shows once its script has read the OpenAPI document: the title and tags.
RENDERED = {
    "/docs": ".swagger-ui .info .title",
    "/redoc": ".api-info h1",
}


@pytest.fixture(scope="module")
def hub(
    database_server: DatabaseServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedHub]:
    folder = tmp_path_factory.mktemp("docs-hub")
    with (
        database_server.migrated_database() as url,
        served_hub(hub_environment(url, folder), folder / "hub.log") as served,
    ):
        yield served


@pytest.mark.parametrize("page_path", sorted(RENDERED))
@needs_chromium
def test_chromium_renders_the_docs_offline(hub: ServedHub, tmp_path: Path, page_path: str) -> None:
    refused: list[str] = []

    def only_the_hub(route: Route) -> None:
        if route.request.url.startswith(hub.url + "/"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route("**/*", only_the_hub)
        page.goto(hub.url + page_path, timeout=PAGE_TIMEOUT * 1000)
        title = page.wait_for_selector(RENDERED[page_path], timeout=PAGE_TIMEOUT * 1000)
        assert title is not None
        heading = title.inner_text()
        text = page.inner_text("body")
        screenshot = page.screenshot(path=tmp_path / f"{page_path.strip('/')}.png")

    assert heading.startswith("fleetmark")
    for tag in ("clusters", "tokens", "queries"):
        assert tag in text, tag
    assert set(refused) <= DECORATIVE, refused
    assert screenshot.startswith(PNG_SIGNATURE)
