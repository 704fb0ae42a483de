"""The built-in pages over plain HTTP: who may read them, what they show of the scenario,
paging and filters in the URL, outside input shown as text, and nothing secret on them."""

import re
from html import unescape

import httpx
import pytest

from tests.agent.conftest import LiveHub
from tests.hub.pages.conftest import HOSTILE, RETIRED, Scenario

PAGES = [
    "/",
    "/drift",
    "/diff",
    "/gate?environment=dev",
    "/rollouts",
    "/repositories",
    "/clusters/drone-01",
    "/repositories",
    "/clusters/drone-01",
    "/timeline",
]


def get(scenario: Scenario, path: str, **options: object) -> httpx.Response:
    return httpx.get(scenario.url + path, timeout=30, **options)  # type: ignore[arg-type]


def text(html: str) -> str:
    """What the page says, as words (tags dropped, entities read)."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def rows(html: str, table: str) -> list[str]:
    """The data-cluster of each row of the table with that id."""
    body = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr data-cluster="([^"]*)"', body)


@pytest.mark.parametrize("path", PAGES)
def test_every_page_is_open_in_development_mode(pages_scenario: Scenario, path: str) -> None:
    response = get(pages_scenario, path)

    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert 'href="/static/fleetmark.css"' in response.text
    # Nothing of what only an admin may see or do: tokens, registration, credentials.
    assert "token" not in text(response.text).lower()
    assert "credentials" not in text(response.text).lower()
    assert '<form method="post"' not in response.text


def test_the_pages_are_not_api_operations(pages_scenario: Scenario) -> None:
    document = get(pages_scenario, "/openapi.json").json()

    assert not {"/", "/drift", "/diff", "/gate", "/login", "/repositories"} & set(document["paths"])
    assert not [path for path in document["paths"] if path.startswith(("/clusters", "/static"))]
    for path in ("/docs", "/redoc", "/healthz", "/metrics"):
        assert get(pages_scenario, path).status_code == 200, path
    css = get(pages_scenario, "/static/fleetmark.css")
    assert css.headers["content-type"].startswith("text/css")


def test_the_timeline_shows_what_happened_newest_first_a_page_at_a_time(
    pages_scenario: Scenario,
) -> None:
    # The scenario's commits were made now, after its clock's time: a range that holds them.
    ranged = "/timeline?since=2026-01-01T00:00:00Z&until=2100-01-01T00:00:00Z"
    everything = get(pages_scenario, ranged).text
    first = get(pages_scenario, f"{ranged}&limit=1&cluster=").text
    [older] = re.findall(r'<a rel="next" href="([^"]+)"', first)
    second = get(pages_scenario, unescape(older)).text
    stage = get(pages_scenario, f"{ranged}&environment=stage").text
    unknown = get(pages_scenario, "/timeline?selector=a+b+c")

    kinds = re.findall(r'<tr data-kind="([^"]+)"', everything)
    assert {"commit", "cluster.decommissioned"} <= set(kinds)
    assert f"cluster {RETIRED} decommissioned" in text(everything)
    assert re.findall(r'<tr data-kind="([^"]+)"', first) == kinds[:1]
    assert re.findall(r'<tr data-kind="([^"]+)"', second) == kinds[1:2]
    assert "commit" in re.findall(r'<tr data-kind="([^"]+)"', stage)
    assert f"cluster {RETIRED} decommissioned" not in text(stage)
    assert unknown.status_code == 422
    assert "selector: cannot read" in text(unknown.text)


def test_the_overview_counts_and_pages_the_clusters(pages_scenario: Scenario) -> None:
    everything = get(pages_scenario, "/").text
    first = get(pages_scenario, "/?limit=2").text
    second = get(pages_scenario, "/?limit=2&offset=2").text
    stage = get(pages_scenario, "/?environment=stage").text

    assert rows(everything, "clusters") == [
        "drone-01",
        "drone-03",
        "large-01",
        "drone-02",
        "large-02",
    ]
    assert "5 clusters: 4 reporting, 0 stale, 1 never reported" in text(everything)
    assert rows(first, "clusters") == ["drone-01", "drone-03"]
    assert "clusters 1-2 of 5" in text(first)
    assert 'rel="next" href="/?limit=2&amp;offset=2"' in first
    assert rows(second, "clusters") == ["large-01", "drone-02"]
    assert 'rel="prev" href="/?limit=2&amp;offset=0"' in second
    assert rows(stage, "clusters") == ["drone-02", "large-02"]


def test_drift_filters_by_reason_in_the_url(pages_scenario: Scenario) -> None:
    failing = get(pages_scenario, "/drift?reason=failing").text
    dev = get(pages_scenario, "/drift?environment=dev").text

    assert rows(failing, "drift") == ["large-01", "large-02"]
    assert 'name="reason" value="failing" checked' in failing
    assert set(rows(dev, "drift")) == {"drone-01", "drone-03", "large-01"}
    assert "1 commit behind" in text(dev)


def test_the_gate_for_a_workload_version(pages_scenario: Scenario) -> None:
    page = get(pages_scenario, "/gate?environment=stage&workload=hello-world-app&version=1.0.0")

    assert page.status_code == 200, page.text
    assert rows(page.text, "gate-clusters") == ["large-02", "drone-02"]
    assert "hello-world-app 1.0.0" in text(page.text)
    assert "failed" in text(page.text)


def test_a_page_asks_what_its_api_operation_asks(pages_scenario: Scenario) -> None:
    version = "/gate?environment=stage&workload=hello-world-app&version=1.0.0"
    drones = get(pages_scenario, f"{version}&cluster_type=drone").text
    blank = get(pages_scenario, "/drift?environment=&cluster_type=&cluster=").text

    assert rows(drones, "gate-clusters") == ["drone-02"]
    assert rows(blank, "drift") == rows(get(pages_scenario, "/drift").text, "drift")


def test_pagers_and_freshness_say_what_they_count(pages_scenario: Scenario) -> None:
    cluster = text(get(pages_scenario, "/clusters/drone-01").text)
    gate = text(get(pages_scenario, "/gate?environment=dev").text)

    assert "deployments 1-" in cluster
    assert "deployments from" not in cluster
    assert "oldest last report among the expected clusters: 20" in gate
    assert "oldest newest" not in gate


def test_outside_input_is_shown_as_text(pages_scenario: Scenario) -> None:
    labelled = get(pages_scenario, "/clusters/drone-03").text
    failing = get(pages_scenario, "/clusters/large-02").text

    escaped = "&lt;script&gt;alert(&#34;fleet&#34;)&lt;/script&gt;"
    assert f"owner={escaped}" in labelled
    assert escaped in failing
    assert HOSTILE not in labelled + failing
    assert "<script" not in labelled + failing


def test_no_credentials_are_shown(pages_scenario: Scenario) -> None:
    page = get(pages_scenario, "/clusters/drone-02").text

    assert "https://git.example.com/contoso/tools.git" in page
    assert "deploy:" not in page
    assert "s3cret" not in page


def test_what_cannot_be_shown_is_a_page_saying_why(pages_scenario: Scenario) -> None:
    unknown = get(pages_scenario, "/clusters/nowhere")
    bad = get(pages_scenario, "/drift?reason=sideways&limit=0")
    environment = get(pages_scenario, "/gate?environment=qa")

    assert unknown.status_code == 404
    assert "cluster &#39;nowhere&#39; is unknown" in unknown.text
    assert bad.status_code == 422
    assert "query.reason.0:" in bad.text
    assert "query.limit:" in bad.text
    assert environment.status_code == 404
    assert "qa" in environment.text


def test_production_pages_need_a_read_token(
    pages_scenario: Scenario, production_hub: LiveHub
) -> None:
    url = production_hub.url
    with httpx.Client(base_url=url, timeout=30) as browser:
        anonymous = browser.get("/drift?environment=dev")
        form = browser.get(anonymous.headers["location"])
        refused = browser.post("/login", data={"token": "fma_wrong", "next": "/drift"})
        signed_in = browser.post(
            "/login",
            data={"token": pages_scenario.token, "next": "/drift?environment=dev"},
        )
        cookie = signed_in.headers["set-cookie"]
        page = browser.get("/drift?environment=dev")
        signed_out = browser.post("/logout")
        after = browser.get("/")
    header = httpx.get(
        url + "/gate?environment=dev",
        headers={"Authorization": f"Bearer {pages_scenario.token}"},
        timeout=30,
    )
    wrong_header = httpx.get(url + "/", headers={"Authorization": "Bearer fma_wrong"}, timeout=30)
    elsewhere = httpx.post(
        url + "/login", data={"token": pages_scenario.token, "next": "//evil.example/"}, timeout=30
    )

    assert anonymous.status_code == 303
    assert anonymous.headers["location"] == "/login?next=%2Fdrift%3Fenvironment%3Ddev"
    assert form.status_code == 200
    assert 'name="next" value="/drift?environment=dev"' in form.text
    assert refused.status_code == 401
    assert "the API token is unknown or revoked" in refused.text
    assert set(refused.cookies) == {"fleetmark_sign_in_form"}  # the form's again, no sign-in
    assert signed_in.status_code == 303
    assert signed_in.headers["location"] == "/drift?environment=dev"
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert page.status_code == 200
    assert set(rows(page.text, "drift")) == {"drone-01", "drone-03", "large-01"}
    assert pages_scenario.token not in page.text
    assert 'action="/logout"' in page.text
    assert signed_out.status_code == 303
    assert after.status_code == 303
    assert header.status_code == 200
    assert "large-01" in header.text
    assert wrong_header.status_code == 401
    assert wrong_header.headers["www-authenticate"] == "Bearer"
    assert elsewhere.headers["location"] == "/"
