"""Tables sorted by the hub from `?sort=` in the URL, one column per header link, so sorting
needs no script: a test per page, and a bad column named with those there are."""

import re

import pytest

from tests.hub.pages.conftest import Scenario
from tests.hub.pages.test_pages import get, rows


def header_links(html: str, table: str) -> dict[str, str]:
    """The sort link of each sortable header cell of a table, by its label."""
    head = html.split(f'id="{table}"', 1)[1].split("</thead>", 1)[0]
    return {
        label.strip(): href.replace("&amp;", "&")
        for href, label in re.findall(r'<a class="sort" href="([^"]*)">([^<]+)', head)
    }


def test_the_fleet_sorts_its_clusters(pages_scenario: Scenario) -> None:
    by_name = get(pages_scenario, "/?sort=cluster").text
    by_failing = get(pages_scenario, "/?sort=-failing&environment=dev").text
    descending = get(pages_scenario, "/?sort=-cluster").text

    assert rows(by_name, "clusters") == ["drone-01", "drone-02", "drone-03", "large-01", "large-02"]
    assert rows(by_failing, "clusters")[0] == "large-01"
    assert rows(descending, "clusters") == list(reversed(rows(by_name, "clusters")))
    links = header_links(by_name, "clusters")
    # Sorted by a column, its link sorts the other way; the others keep the filters.
    assert links["cluster"] == "/?sort=-cluster"
    assert links["failing"] == "/?sort=failing"
    assert header_links(by_failing, "clusters")["agent"] == "/?environment=dev&sort=agent"
    assert 'aria-sort="ascending"' in by_name
    assert 'aria-sort="descending"' in descending


CLUSTER_ROW = r'<tr data-cluster="([^"]*)"'
DIFF_ROW = r'<tr data-workload="[^"]*" data-cluster-type="([^"]*)"'


@pytest.mark.parametrize(
    ("path", "table", "row"),
    [
        ("/?sort=-cluster", "clusters", CLUSTER_ROW),
        ("/drift?include_in_sync=true&sort=-cluster", "drift", CLUSTER_ROW),
        ("/diff?only_differences=false&sort=-cluster_type", "diff", DIFF_ROW),
        ("/gate?environment=dev&sort=-cluster", "gate-clusters", CLUSTER_ROW),
    ],
)
def test_a_paged_table_sorts_across_its_pages(
    pages_scenario: Scenario, path: str, table: str, row: str
) -> None:
    def listed(html: str) -> list[str]:
        return re.findall(row, html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0])

    whole = listed(get(pages_scenario, path).text)
    pages = [
        get(pages_scenario, f"{path}&limit=1&offset={offset}").text for offset in range(len(whole))
    ]

    assert len(pages) > 1
    assert whole == sorted(whole, reverse=True)
    assert [value for page in pages for value in listed(page)] == whole
    # The next page's link keeps the order.
    sort = path.split("sort=", 1)[1]
    assert f"sort={sort}" in pages[0].split('rel="next"', 1)[1].split(">", 1)[0]


def test_drift_sorts_its_rows(pages_scenario: Scenario) -> None:
    page = get(pages_scenario, "/drift?sort=-cluster").text

    listed = rows(page, "drift")
    assert listed == sorted(listed, reverse=True)
    assert listed[0] == "large-02"
    assert header_links(page, "drift")["cluster"] == "/drift?sort=cluster"


def test_the_environment_diff_sorts_its_rows(pages_scenario: Scenario) -> None:
    ascending = get(pages_scenario, "/diff?only_differences=false&sort=cluster_type").text
    descending = get(pages_scenario, "/diff?only_differences=false&sort=-cluster_type").text

    def cluster_types(html: str) -> list[str]:
        return re.findall(r'<tr data-workload="[^"]*" data-cluster-type="([^"]*)"', html)

    assert cluster_types(ascending) == sorted(cluster_types(ascending))
    assert cluster_types(descending) == sorted(cluster_types(ascending), reverse=True)
    assert len(set(cluster_types(ascending))) > 1


def test_a_cluster_sorts_its_objects(pages_scenario: Scenario) -> None:
    page = get(pages_scenario, "/clusters/large-02?sort=ready").text

    objects = re.findall(r'<tr data-object="([^"]*)"', page)
    # The failing app object first, then the Ready platform ones.
    assert objects[0] == "hello-world-app-uat-test"
    assert header_links(page, "objects")["ready"] == "/clusters/large-02?sort=-ready"


def test_the_gate_sorts_its_clusters(pages_scenario: Scenario) -> None:
    default = get(pages_scenario, "/gate?environment=dev").text
    by_name = get(pages_scenario, "/gate?environment=dev&sort=cluster").text

    assert rows(default, "gate-clusters") == ["large-01", "drone-03", "drone-01"]
    assert rows(by_name, "gate-clusters") == ["drone-01", "drone-03", "large-01"]


def test_the_repositories_sort_their_branches(pages_scenario: Scenario) -> None:
    page = get(pages_scenario, "/repositories?sort=-branch").text

    branches = re.findall(r"<tr class=\"[^\"]*\">\s*<td>([a-z]+)", page)
    assert branches[:2] == ["stage", "dev"]


@pytest.mark.parametrize(
    "path", ["/?sort=colour", "/drift?sort=-size", "/gate?environment=dev&sort=why"]
)
def test_a_column_that_is_not_there_is_named(pages_scenario: Scenario, path: str) -> None:
    page = get(pages_scenario, path)

    assert page.status_code == 422
    assert "sort: no column" in page.text
    assert "(columns: " in page.text
