"""The built-in pages in Chromium against `fleetmark demo --fast`, as a new user first sees
them: each shows the story's clusters, versions and drift reasons (read from the DOM), its links
lead where they say, nothing is fetched from anywhere but the hub, and nothing sticks out of an
800 px window. A screenshot of each page is kept under test-output/screenshots/ for review."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from tests.browser import chromium, column, needs_chromium, open_page, overflow, screenshot
from tests.demo_run import Demo, git

pytestmark = needs_chromium

DEV = {
    "command-center-dev-1",
    "command-center-dev-2",
    "drone-dev-1",
    "drone-dev-2",
    "large-dev-1",
    "large-dev-2",
    "small-dev-1",
}
STAGE = {"drone-stage-1", "drone-stage-2", "large-stage-1", "large-stage-2"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    folder = tmp_path_factory.mktemp("demo")
    started = Demo(folder / "demo", folder / "demo.log")
    try:
        started.wait_for_story()
        yield started
    finally:
        # Ctrl-C even when a test failed: killed, the demo would leave its PostgreSQL behind.
        started.stop()


@pytest.fixture(scope="module")
def browser(demo: Demo) -> Iterator[Browser]:
    with chromium() as running:
        yield running


@pytest.fixture
def tab(browser: Browser, demo: Demo) -> Iterator[Page]:
    page, refused = open_page(browser, demo.url)
    yield page
    page.close()
    assert refused == []


def reasons(page: Page) -> list[tuple[str, str]]:
    """(cluster, reasons) of each row of the drift table: a cluster may have several."""
    return [
        (row.get_attribute("data-cluster") or "", row.locator("td.reasons").inner_text())
        for row in page.locator("#drift tbody tr[data-cluster]").all()
    ]


def test_the_fleet_overview_by_environment_and_cluster_type(tab: Page) -> None:
    tab.goto("/")
    placements = column(tab, "clusters", 1)
    agents = column(tab, "clusters", 2)
    groups = tab.locator("#groups").inner_text()
    screenshot(tab, "fleet")
    tab.locator("#groups").get_by_role("link", name="stage", exact=True).click()
    tab.wait_for_url("**/?environment=stage")
    stage = set(column(tab, "clusters", 1))

    assert set(placements) == DEV | STAGE
    assert "small-dev-2" not in placements
    assert placements["drone-stage-1"] == "stage/drone"
    assert placements["command-center-dev-1"] == "dev/command-center"
    assert agents["large-dev-2"] == "stale"
    assert {agent for name, agent in agents.items() if name != "large-dev-2"} == {"reporting"}
    for cluster_type in ("command-center", "drone", "large", "small"):
        assert cluster_type in groups
    assert stage == STAGE


def test_drift_shows_the_behind_the_failing_and_the_stale(tab: Page) -> None:
    tab.goto("/drift")
    rows = reasons(tab)
    screenshot(tab, "drift")
    tab.get_by_label("failing").check()
    tab.get_by_role("button", name="Show").click()
    tab.wait_for_url("**/drift?*reason=failing*")
    failing = reasons(tab)

    drifted = {cluster for cluster, _ in rows}
    assert drifted == {"drone-dev-2", "large-dev-2", "drone-stage-1"}
    assert all("behind" in text for cluster, text in rows if cluster == "drone-dev-2")
    assert all("stale" in text for cluster, text in rows if cluster == "large-dev-2")
    assert [cluster for cluster, _ in failing] == ["drone-stage-1"]
    assert "ImagePullBackOff" in failing[0][1]


def test_the_environment_diff_shows_versions_and_the_config_change(tab: Page) -> None:
    tab.goto("/diff")
    drone = tab.locator('#diff tr[data-cluster-type="drone"]')
    large = tab.locator('#diff tr[data-cluster-type="large"]')
    cells = {
        (cluster_type, environment): row.locator(
            f'td[data-environment="{environment}"]'
        ).inner_text()
        for cluster_type, row in (("drone", drone), ("large", large))
        for environment in ("dev", "stage")
    }
    workload = drone.locator("td").first.inner_text()
    drone_differences = drone.locator("td.differences").inner_text()
    large_differences = large.locator("td.differences").inner_text()
    screenshot(tab, "diff")
    large.locator('td[data-environment="stage"] a').click()
    tab.wait_for_url("**/?environment=stage&cluster_type=large")
    listed = set(column(tab, "clusters", 1))

    assert workload == "hello-world-app"
    for cell in cells.values():
        assert "desired 1.1.0" in cell
    assert "1.0.0 on 1, 1.1.0 on 1" in cells["drone", "dev"]
    assert "1.1.0 on 2" in cells["large", "stage"]
    assert "ImagePullBackOff" in drone_differences
    assert "DATABASE_URL" in large_differences
    assert "mysql://west-host-2:8806/mysql" in large_differences
    assert listed == {"large-stage-1", "large-stage-2"}


def test_a_failing_cluster_and_its_history(tab: Page) -> None:
    tab.goto("/drift")
    tab.locator("#drift").get_by_role("link", name="drone-stage-1", exact=True).first.click()
    tab.wait_for_url("**/clusters/drone-stage-1")
    heading = tab.locator("h1").inner_text()
    failing = tab.locator("#objects tr.failing").inner_text()
    drift = tab.locator("#cluster-drift").inner_text()
    history = tab.locator("#history tbody tr").all_inner_texts()
    screenshot(tab, "cluster")

    assert heading == "Cluster drone-stage-1"
    assert "hello-world-app-uat-test" in failing
    assert "HealthCheckFailed" in failing
    assert "ImagePullBackOff" in drift
    # Its platform: first applied, then two promotions to stage; its app: applied once.
    assert len([step for step in history if "Kustomization/flux-system/flux-system" in step]) == 3
    assert any("hello-world-app-uat-test" in step for step in history)


def test_the_gate_shows_the_clusters_that_block(tab: Page, demo: Demo) -> None:
    tab.goto("/gate")
    tab.get_by_label("environment").select_option("stage")
    tab.get_by_label("workload").fill("hello-world-app")
    tab.get_by_label("version").fill("1.1.0")
    tab.get_by_role("button", name="Check").click()
    tab.wait_for_url("**/gate?environment=stage*")
    verdict = tab.locator("#verdict h2 .badge").inner_text()
    states = column(tab, "gate-clusters", 2)
    blocking = [
        row.get_attribute("data-cluster") for row in tab.locator("#gate-clusters tr.blocking").all()
    ]
    screenshot(tab, "gate")
    tab.get_by_label("workload").fill("")
    tab.get_by_label("version").fill("")
    tab.get_by_label("environment").select_option("dev")
    tab.get_by_label("platform commit").fill(platform_head(demo.data_dir, "dev"))
    tab.get_by_role("button", name="Check").click()
    tab.wait_for_url("**/gate?environment=dev*")
    dev = column(tab, "gate-clusters", 2)
    screenshot(tab, "gate-dev")
    tab.get_by_role("link", name="drone-dev-2", exact=True).click()
    tab.wait_for_url("**/clusters/drone-dev-2")

    assert verdict == "failed"
    # The others run 1.1.0 and are Ready; within the default soak they soak still.
    assert set(states) == STAGE
    assert states["drone-stage-1"] == "failed"
    assert blocking[0] == "drone-stage-1"
    assert set(dev) == DEV
    assert "small-dev-2" not in dev
    assert dev["drone-dev-2"] != "compliant"
    assert dev["large-dev-2"] != "compliant"
    assert "behind" in tab.locator("#cluster-drift").inner_text()


def platform_head(data_dir: Path, environment: str) -> str:
    return git(data_dir / "repositories" / "platform-gitops", "rev-parse", environment)


def test_the_repositories_and_their_harvest(tab: Page) -> None:
    tab.goto("/repositories")
    app = tab.locator("section.repository", has_text="app repository").inner_text()
    screenshot(tab, "repositories")
    tab.locator("section.repository", has_text="app repository").get_by_role(
        "link", name="stage"
    ).click()
    tab.wait_for_url("**/?environment=stage")

    assert "app-gitops" in app
    assert set(column(tab, "clusters", 1)) == STAGE


def test_the_promotion_chain_links_each_environment_to_its_evidence(tab: Page, demo: Demo) -> None:
    tab.goto("/promotion")
    chain = {
        item.get_attribute("data-environment"): item.get_attribute("data-phase")
        for item in tab.locator("#promotion li.stage").all()
    }
    badges = tab.locator("#promotion .phase .badge").all_inner_texts()
    reload = tab.locator('meta[http-equiv="refresh"]').count()
    screenshot(tab, "promotion")
    tab.locator('li.stage[data-environment="stage"]').get_by_role("link", name="evidence").click()
    tab.wait_for_url("**/gate?environment=stage&commit=*")
    verdict = tab.locator("#verdict h2 .badge").inner_text()

    # dev waits on drone-dev-2 (suspended, behind) and large-dev-2 (silent); stage's clusters
    # all run its newest commit, Ready, within the soak.
    assert list(chain) == ["dev", "stage"]
    assert chain == {"dev": "pending", "stage": "soaking"}
    assert badges == ["pending", "soaking"]
    assert reload == 1
    assert verdict == "soaking"
    assert tab.get_by_label("platform commit").input_value() == platform_head(
        demo.data_dir, "stage"
    )


PAGES = [
    "/",
    "/promotion",
    "/drift",
    "/diff",
    "/gate?environment=stage&workload=hello-world-app&version=1.1.0",
    "/clusters/drone-stage-1",
    "/clusters/small-dev-2",
    "/repositories",
    "/login",
]


def test_nothing_sticks_out_of_an_800_px_window(browser: Browser, demo: Demo) -> None:
    tab, refused = open_page(browser, demo.url, width=800)
    measured = {}
    for path in PAGES:
        tab.goto(path)
        measured[path] = overflow(tab)
        name = path.strip("/").split("?")[0].replace("/", "-") or "fleet"
        screenshot(tab, f"800px-{name}")
    tab.close()

    assert refused == []
    for path, (scroll_width, inner_width, past) in measured.items():
        assert inner_width == 800, path
        assert scroll_width <= inner_width, (path, scroll_width, past)
        assert past == [], path
