"""The built-in pages in Chromium against the scenario's hub over real HTTP: each shows the
expected clusters, versions and reasons (read from the DOM), its links and forms lead where
they say, and nothing is fetched from anywhere but the hub. A screenshot of each page is kept
under test-output/screenshots/ for review."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route

from tests.agent.conftest import LiveHub
from tests.browser import PAGE_TIMEOUT, PNG_SIGNATURE, SCREENSHOTS, chromium, needs_chromium
from tests.pages.conftest import Scenario

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def browser(pages_scenario: Scenario) -> Iterator[Browser]:
    """Started after the scenario is built: Playwright's sync API runs an event loop of its
    own, and the scenario's (async) fixture cannot run beside it."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with chromium() as running:
        yield running


def open_page(browser: Browser, hub_url: str) -> tuple[Page, list[str]]:
    """A tab that may reach the hub only; the list collects what it tried to fetch elsewhere."""
    refused: list[str] = []

    def only_the_hub(route: Route) -> None:
        if route.request.url.startswith(hub_url + "/"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page = browser.new_page(viewport={"width": 1440, "height": 1000}, base_url=hub_url)
    page.set_default_timeout(PAGE_TIMEOUT * 1000)
    page.route("**/*", only_the_hub)
    return page, refused


@pytest.fixture
def tab(browser: Browser, pages_scenario: Scenario) -> Iterator[Page]:
    page, refused = open_page(browser, pages_scenario.url)
    yield page
    page.close()
    assert refused == []


def screenshot(page: Page, name: str) -> None:
    shot = page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)
    assert shot.startswith(PNG_SIGNATURE)


def column(page: Page, table: str, cell: int) -> dict[str, str]:
    """The text of one column of a table's rows, by the row's cluster."""
    return {
        row.get_attribute("data-cluster") or "": row.locator("td").nth(cell).inner_text()
        for row in page.locator(f"#{table} tbody tr[data-cluster]").all()
    }


def test_the_fleet_overview_and_a_cluster(tab: Page, pages_scenario: Scenario) -> None:
    tab.goto("/")
    agents = column(tab, "clusters", 2)
    groups = tab.locator("#groups").inner_text()
    screenshot(tab, "fleet")
    tab.get_by_role("link", name="drone-01", exact=True).click()
    tab.wait_for_url("**/clusters/drone-01")
    heading = tab.locator("h1").inner_text()
    objects = tab.locator("#objects").inner_text()
    drift = tab.locator("#cluster-drift").inner_text()
    screenshot(tab, "cluster")

    assert agents == {
        "drone-01": "reporting",
        "drone-03": "never reported",
        "large-01": "reporting",
        "drone-02": "reporting",
        "large-02": "reporting",
    }
    assert groups.count("drone") == 2
    assert groups.count("large") == 2
    assert heading == "Cluster drone-01"
    assert "hello-world-app-functional-test" in objects
    assert pages_scenario.app["dev"][:12] in objects
    assert "behind" in drift


def test_drift_with_its_reasons_and_a_filter(tab: Page) -> None:
    tab.goto("/drift")
    reasons = column(tab, "drift", 6)
    screenshot(tab, "drift")
    tab.get_by_label("failing").check()
    tab.get_by_role("button", name="Show").click()
    tab.wait_for_url("**/drift?*reason=failing*")
    failing = column(tab, "drift", 6)

    assert "1 commit behind" in reasons["drone-01"]
    assert "SyncFailed" in reasons["large-01"]
    assert "stale: registered, but its agent never reported" in reasons["drone-03"]
    assert set(failing) == {"large-01", "large-02"}


def test_the_environment_diff_shows_versions_side_by_side(tab: Page) -> None:
    tab.goto("/diff")
    drone = tab.locator('#diff tr[data-cluster-type="drone"]').first
    dev = drone.locator('td[data-environment="dev"]').inner_text()
    stage = drone.locator('td[data-environment="stage"]').inner_text()
    differences = drone.locator("td.differences").inner_text()
    screenshot(tab, "diff")
    drone.locator('td[data-environment="stage"] a').click()
    tab.wait_for_url("**/?environment=stage&cluster_type=drone")
    listed = column(tab, "clusters", 1)

    assert "desired 1.1.0" in dev
    assert "1.0.0" in stage
    assert "awaiting promotion" in differences
    assert listed == {"drone-02": "stage/drone"}


def test_the_gate_shows_the_clusters_that_block(tab: Page, pages_scenario: Scenario) -> None:
    tab.goto("/gate")
    tab.get_by_label("environment").select_option("dev")
    tab.get_by_role("button", name="Check").click()
    tab.wait_for_url("**/gate?environment=dev*")
    commit = tab.get_by_label("platform commit").input_value()
    verdict = tab.locator("#verdict .word").inner_text()
    states = column(tab, "gate-clusters", 2)
    blocking = tab.locator("#gate-clusters tr.blocking").count()
    screenshot(tab, "gate")
    tab.get_by_role("link", name="large-01", exact=True).click()
    tab.wait_for_url("**/clusters/large-01")

    assert verdict == "failed"
    # Without a commit, the gate is the environment's newest platform commit's.
    assert commit == pages_scenario.platform["dev"]
    assert states["large-01"] == "failed"
    assert states["drone-03"] == "never reported"
    assert states["drone-01"] != "compliant"
    assert blocking == 3
    assert "SyncFailed" in tab.locator("#objects").inner_text()


def test_the_repositories_and_their_harvest(tab: Page, pages_scenario: Scenario) -> None:
    tab.goto("/repositories")
    platform = tab.locator("section.repository", has_text="platform repository").inner_text()
    app = tab.locator("section.repository", has_text="app repository").inner_text()
    screenshot(tab, "repositories")
    tab.locator("section.repository", has_text="app repository").get_by_role(
        "link", name="stage"
    ).click()
    tab.wait_for_url("**/?environment=stage")

    for branch in ("dev", "stage"):
        assert pages_scenario.platform[branch][:12] in platform
        assert pages_scenario.app[branch][:12] in app
    assert "discovered from the manifests" in app
    assert set(column(tab, "clusters", 1)) == {"drone-02", "large-02"}


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
