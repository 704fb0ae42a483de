"""What the pages say about states: the promotion chain, a soaking gate drawn as progress and
reloading itself, a decommissioned cluster, and every state a badge with its word and the
palette's colour for it."""

import re
from pathlib import Path

import pytest

from hub.drift.schemas import Reason
from hub.envdiff.compare import CellState
from hub.envdiff.compare import Reason as DifferenceReason
from hub.fleet.schemas import AgentStatus
from hub.gate.policy import ClusterState, Verdict
from hub.palette import PALETTE, STATES
from tests.hub.pages.conftest import RETIRED, Scenario
from tests.hub.pages.test_pages import get, text
from tests.support import bearer

STYLE_SHEET = Path(__file__).resolve().parents[3] / "hub" / "pages" / "static" / "fleetmark.css"
# The pages with states on them (the repositories page has none).
PAGES = ["/", "/promotion", "/drift", "/diff", "/gate?environment=dev", "/clusters/drone-01"]


def stages(html: str) -> dict[str, str]:
    """Each environment of the promotion chain, in page order, with what its card says."""
    cards = re.findall(r'<li class="stage[^"]*" data-environment="([^"]*)"(.*?)</li>', html, re.S)
    return {environment: text(card.split(">", 1)[1]) for environment, card in cards}


def refresh(html: str) -> int | None:
    found = re.search(r'<meta http-equiv="refresh" content="(\d+)">', html)
    return None if found is None else int(found.group(1))


def test_the_promotion_chain_left_to_right(pages_scenario: Scenario) -> None:
    page = get(pages_scenario, "/promotion").text
    dev_head, stage_head = pages_scenario.platform["dev"], pages_scenario.platform["stage"]

    chain = stages(page)

    assert list(chain) == ["dev", "stage"]
    # dev's newest commit failed on large-01; drone-01 has not applied it, drone-03 never
    # reported: three clusters block it, one failed.
    assert f"platform commit {dev_head[:12]}" in chain["dev"]
    assert "failed towards stage" in chain["dev"]
    assert "3 of 3 clusters block it, 1 failed" in chain["dev"]
    # stage's clusters run its head, Ready, for 5 of the 10 minutes' soak.
    assert f"platform commit {stage_head[:12]}" in chain["stage"]
    assert "soaking last environment" in chain["stage"]
    assert "passes in 5m" in chain["stage"]
    assert f'href="/gate?environment=dev&amp;commit={dev_head}"' in page
    assert f'href="/gate?environment=stage&amp;commit={stage_head}"' in page
    assert '<span class="badge bad">failed</span>' in page
    assert '<span class="badge progress">soaking</span>' in page
    assert refresh(page) == 15


def test_the_promotion_chain_with_another_soak_links_its_evidence_with_it(
    pages_scenario: Scenario,
) -> None:
    page = get(pages_scenario, "/promotion?soak=60").text
    stage_head = pages_scenario.platform["stage"]

    chain = stages(page)

    assert "passed last environment" in chain["stage"]
    assert "all 2 expected clusters run it, Ready and soaked" in chain["stage"]
    assert f'href="/gate?environment=stage&amp;commit={stage_head}&amp;soak=60"' in page
    # Nothing soaks: nothing to wait for.
    assert refresh(page) is None


def test_a_soaking_gate_is_progress_and_reloads_itself(pages_scenario: Scenario) -> None:
    soaking = get(pages_scenario, "/gate?environment=stage").text
    failed = get(pages_scenario, "/gate?environment=dev").text
    passed = get(pages_scenario, "/gate?environment=stage&soak=60").text

    assert '<section class="verdict progress" id="verdict">' in soaking
    assert "it passes in 5m, at 2026-11-22 12:12:30 UTC" in text(soaking)
    assert re.findall(r'<tr data-cluster="([^"]*)" class="([^"]*)"', soaking) == [
        ("drone-02", "soaking"),
        ("large-02", "soaking"),
    ]
    # The verdict, the count of clusters in each state, and each cluster's row.
    assert soaking.count('<span class="badge progress">soaking</span>') == 4
    assert "badge bad" not in soaking
    assert refresh(soaking) == 15
    assert '<section class="verdict bad" id="verdict">' in failed
    assert ("large-01", "blocking") in re.findall(
        r'<tr data-cluster="([^"]*)" class="([^"]*)"', failed
    )
    assert refresh(failed) is None
    assert '<section class="verdict ok" id="verdict">' in passed
    assert refresh(passed) is None


def test_a_decommissioned_cluster_says_so_and_when(pages_scenario: Scenario) -> None:
    retired = get(pages_scenario, f"/clusters/{RETIRED}").text
    serving = get(pages_scenario, "/clusters/drone-01").text

    assert "Decommissioned 2026-11-22 12:06:30 UTC: no longer expected by the gate" in text(retired)
    assert '<span class="badge idle">decommissioned</span>' in retired
    assert "stale" not in text(retired)
    assert "ecommissioned" not in serving
    assert '<span class="badge ok">reporting</span>' in serving


@pytest.mark.parametrize("path", PAGES)
def test_every_page_draws_states_as_badges_from_the_palette(
    pages_scenario: Scenario, path: str
) -> None:
    page = get(pages_scenario, path).text

    badges = re.findall(r'<span class="badge ([a-z]+)">([^<]+)</span>', page)
    assert badges, path
    for colour, word in badges:
        assert STATES[word.replace(" ", "_")] == colour, (path, word)
    assert '<a href="/promotion"' in page


def test_the_palette_colours_every_state_the_api_answers_with() -> None:
    words = {
        *Verdict,
        *ClusterState,
        *Reason,
        *CellState,
        *DifferenceReason,
        *AgentStatus.__args__,
        "soaking",
        "decommissioned",
        "ready",
        "progressing",
        "suspended",
    }
    style = STYLE_SHEET.read_text()

    assert words <= set(STATES)
    assert set(STATES.values()) == set(PALETTE)
    for colour in PALETTE:
        assert re.search(rf"--{colour}: #[0-9a-f]{{6}};", style), colour
        assert f".badge.{colour} {{ color: var(--{colour}); background: var(--{colour}-bg); }}" in (
            style
        )


def test_the_fleet_counts_drift_as_the_drift_page_does(pages_scenario: Scenario) -> None:
    fleet = text(get(pages_scenario, "/").text)
    dev = text(get(pages_scenario, "/?environment=dev").text)
    drift = text(get(pages_scenario, "/drift").text)

    total = re.search(r"(\d+) drifted objects in (\d+) clusters", drift)
    assert total is not None
    assert f"{total.group(1)} drifted objects in {total.group(2)} clusters, by reason" in fleet
    # The reasons the Drift page counts; stage's large-02 has applied nothing (other).
    assert "behind 2 · failing 2 · stale 1 · live drift 0 · other 1" in fleet
    assert "behind 2 · failing 1 · stale 1 · live drift 0 · other 0" in dev


@pytest.mark.parametrize("query", ["", "?environment=dev", "?environment=stage&cluster_type=large"])
def test_the_fleet_page_shows_the_fleet_answers_drift_counts(
    pages_scenario: Scenario, query: str
) -> None:
    page = text(get(pages_scenario, f"/{query}").text)
    answer = get(pages_scenario, f"/api/v1/fleet{query}", headers=bearer(pages_scenario.token))
    totals = answer.json()["totals"]

    assert totals["drift_total"] > 0
    assert (
        f"{totals['drift_total']} drifted objects in {totals['drift_clusters']} clusters, by "
        f"reason (an object may have several): behind {totals['drift_behind']} · failing "
        f"{totals['drift_failing']} · stale {totals['drift_stale']} · live drift "
        f"{totals['drift_live']} · other {totals['drift_other']}"
    ) in page
