"""GET /api/v1/dora and /api/v1/dora/deployments(.csv) over HTTP, on histories driven through
the fleet simulator and the injected clock (tests/hub/dora_history.py): figures worked
out by hand, ranges, the workload filter, the rollouts behind the figures, CSV, bad input."""

import csv
import io
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.git.urls import normalise_repository_url
from tests.conftest import MakeClient
from tests.hub.dora_history import (
    FAILURE,
    LATE_CLUSTER,
    PLATFORM_CLUSTERS,
    WORKLOAD_CLUSTERS,
    Timeline,
    commit_at,
    commit_platform,
    commit_releases,
    play_platform,
    play_releases,
    refresh_dora,
    run_everything,
)
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, bearer

DORA = "/api/v1/dora"
DEPLOYMENTS = "/api/v1/dora/deployments"
CSV = "/api/v1/dora/deployments.csv"


@dataclass(frozen=True)
class History:
    timeline: Timeline
    commits: dict[str, str]
    fleet: Fleet

    def range(self, since: float, until: float) -> dict[str, str]:
        """Query parameters for [B+since, B+until), in minutes."""
        return {
            "since": self.timeline.at(since).isoformat(),
            "until": self.timeline.at(until).isoformat(),
        }


async def ok(client: httpx.AsyncClient, url: str, **params: Any) -> dict[str, Any]:
    response = await client.get(url, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def iso(moment: datetime) -> str:
    """A time as the API writes it."""
    return moment.isoformat().replace("+00:00", "Z")


def by_environment(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["environment"]: item for item in body["environments"]}


def spread(median: float | None, p90: float | None, mean: float | None) -> dict[str, Any]:
    return {"median_seconds": median, "p90_seconds": p90, "mean_seconds": mean}


NOTHING = spread(None, None, None)
DAY_MINUTES = 24 * 60


@pytest.fixture
def timeline(clock: FakeClock) -> Timeline:
    return Timeline(clock, clock.now)


async def played(
    timeline: Timeline,
    commits: dict[str, str],
    fleet: Fleet,
    client: httpx.AsyncClient,
    read_token: str,
    sessions: async_sessionmaker[AsyncSession],
) -> History:
    """The history once the timeline is at B+180 and the DORA job has refreshed its rollup,
    the client asking with the read token."""
    timeline.go(180)
    await refresh_dora(sessions, timeline.clock.now)
    client.headers["Authorization"] = f"Bearer {read_token}"
    return History(timeline, commits, fleet)


@pytest.fixture
async def platform(
    fleet: Fleet,
    timeline: Timeline,
    client: httpx.AsyncClient,
    read_token: str,
    sessions: async_sessionmaker[AsyncSession],
) -> History:
    """The platform timeline of tests/hub/dora_history.py, played up to B+180."""
    for name, cluster_type in PLATFORM_CLUSTERS.items():
        await fleet.add(name, cluster_type)
    for cluster in fleet.clusters.values():
        cluster.run_platform(fleet.platform_heads["dev"])
    await fleet.report()
    commits = commit_platform(fleet.platform, timeline)
    await fleet.harvest()
    late = await fleet.add(*LATE_CLUSTER)
    await play_platform(timeline, fleet.clusters, commits, late)
    return await played(timeline, commits, fleet, client, read_token, sessions)


async def test_figures_match_the_ones_worked_out_by_hand(
    platform: History, client: httpx.AsyncClient
) -> None:
    """Over [B+5, B+5 + 1 day) in dev (times in minutes after B):

    - deployments: c1 (complete at 25), c2 (100), c3 (130): 3 in one day, 3.0 per day. The dev
      head's own rollout completed at B+0, before the range.
    - lead times: c1 25 - 10 = 15 min = 900 s, c2 100 - 60 = 2400 s, c3 130 - 120 = 600 s.
      Sorted 600, 900, 2400: median 900; p90 at rank 0.9 * (3 - 1) = 1.8, between 900 and
      2400: 900 + 0.8 * 1500 = 2100; mean 3900 / 3 = 1300.
    - change failure rate: rollouts started at 15, 65 and 125; c2 failed at 70: 1/3.
    - time to restore: c2's failure at 70 to every cluster Ready at 100: 1800 s.
    stage has no clusters: nothing to count.
    """
    body = await ok(client, DORA, **platform.range(5, 5 + DAY_MINUTES))

    assert body["subject"] == "platform_commits"
    assert body["workload"] is None
    assert body["since"] == iso(platform.timeline.at(5))
    assert body["evaluated_at"] == iso(platform.timeline.at(180))
    environments = by_environment(body)
    assert list(environments) == ["dev", "stage"]
    assert environments["dev"] == {
        "environment": "dev",
        "position": None,
        "deployments": 3,
        "deployments_per_day": 3.0,
        "lead_time": spread(900.0, 2100.0, 1300.0),
        "rollouts_started": 3,
        "rollouts_failed": 1,
        "change_failure_rate": pytest.approx(1 / 3),
        "in_progress": 0,
        "restored": 1,
        "unrestored": 0,
        "time_to_restore": spread(1800.0, 1800.0, 1800.0),
    }
    assert environments["stage"] == {
        "environment": "stage",
        "position": None,
        "deployments": 0,
        "deployments_per_day": 0.0,
        "lead_time": NOTHING,
        "rollouts_started": 0,
        "rollouts_failed": 0,
        "change_failure_rate": None,
        "in_progress": 0,
        "restored": 0,
        "unrestored": 0,
        "time_to_restore": NOTHING,
    }


async def test_a_range_counts_only_what_happened_in_it(
    platform: History, client: httpx.AsyncClient
) -> None:
    """[B+30, B+30 + 1 day): c1 completed at 25 and started at 15, before the range, so it is
    in no figure. c2 and c3: lead times 2400 and 600 s, median 1500, p90 at rank 0.9:
    600 + 0.9 * 1800 = 2220, mean 1500; one of the two rollouts started in it failed.

    [B+5, B+110): c3 starts at 125, after the range. c1 and c2: lead times 900 and 2400 s,
    median 1650, p90 900 + 0.9 * 1500 = 2250; 2 deployments over 105 minutes.

    [B+5, B+90): nothing from 90 on is seen. c2 has failed and is neither complete nor
    restored yet: one deployment (c1), one rollout in progress, one unrestored."""
    later = by_environment(await ok(client, DORA, environment="dev", **platform.range(30, 1470)))
    earlier = by_environment(await ok(client, DORA, environment="dev", **platform.range(5, 110)))
    failing = by_environment(await ok(client, DORA, environment="dev", **platform.range(5, 90)))

    assert list(later) == ["dev"]
    dev = later["dev"]
    assert (dev["deployments"], dev["deployments_per_day"]) == (2, 2.0)
    assert dev["lead_time"] == spread(1500.0, 2220.0, 1500.0)
    assert (dev["rollouts_started"], dev["rollouts_failed"], dev["change_failure_rate"]) == (
        2,
        1,
        0.5,
    )
    dev = earlier["dev"]
    assert dev["deployments"] == 2
    assert dev["deployments_per_day"] == pytest.approx(2 / (105 / DAY_MINUTES))
    assert dev["lead_time"] == spread(1650.0, 2250.0, 1650.0)
    assert (dev["rollouts_started"], dev["change_failure_rate"]) == (2, 0.5)
    assert dev["time_to_restore"] == spread(1800.0, 1800.0, 1800.0)
    dev = failing["dev"]
    assert dev["deployments"] == 1
    assert dev["lead_time"] == spread(900.0, 900.0, 900.0)
    assert (dev["rollouts_started"], dev["rollouts_failed"], dev["in_progress"]) == (2, 1, 1)
    assert (dev["restored"], dev["unrestored"]) == (0, 1)
    assert dev["time_to_restore"] == NOTHING


async def test_the_default_range_is_the_last_30_days_by_the_hubs_clock(
    platform: History, client: httpx.AsyncClient
) -> None:
    body = await ok(client, DORA, environment="dev")

    now = platform.timeline.at(180)
    assert body["until"] == iso(now)
    assert body["since"] == iso(now - timedelta(days=30))
    # The dev head's rollout (complete at B+0) is in it too this time.
    assert by_environment(body)["dev"]["deployments"] == 4


def expected_deployments(history: History) -> list[dict[str, Any]]:
    """The rollouts behind the figures of [B+5, B+5 + 1 day), newest first."""
    timeline, commits = history.timeline, history.commits
    reason, message = FAILURE

    def row(name: str, started: int, completed: int, lead: int, clusters: int) -> dict[str, Any]:
        return {
            "environment": "dev",
            "subject": "platform_commits",
            "workload": None,
            "revision": commits[name],
            "commit": commits[name],
            "repository": normalise_repository_url(history.fleet.platform.url),
            "branch": "dev",
            "committed_at": timeline.at(completed - lead),
            "started_at": timeline.at(started),
            "completed_at": timeline.at(completed),
            "lead_time_seconds": lead * 60.0,
            "expected_clusters": clusters,
            "reached_clusters": clusters,
            "failed_at": None,
            "failed_clusters": 0,
            "failed_cluster": None,
            "failure_reason": None,
            "failure_message": None,
            "restored_at": None,
            "time_to_restore_seconds": None,
            "completed_in_range": True,
            "started_in_range": True,
        }

    c2 = row("c2", 65, 100, 40, 3) | {
        "failed_at": timeline.at(70),
        "failed_clusters": 1,
        "failed_cluster": "drone-02",
        "failure_reason": reason,
        "failure_message": message,
        "restored_at": timeline.at(100),
        "time_to_restore_seconds": 1800.0,
    }
    # drone-03 joined at 67, after c2 began: c2 expected three clusters, c3 all four.
    return [row("c3", 125, 130, 10, 4), c2, row("c1", 15, 25, 15, 3)]


def parsed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    times = ("committed_at", "started_at", "completed_at", "failed_at", "restored_at")
    return [
        item
        | {
            name: None if item[name] is None else datetime.fromisoformat(item[name])
            for name in times
        }
        for item in items
    ]


async def test_the_rollouts_behind_the_figures_page_by_page(
    platform: History, client: httpx.AsyncClient
) -> None:
    window = platform.range(5, 5 + DAY_MINUTES)

    first = await ok(client, DEPLOYMENTS, limit=2, **window)
    second = await ok(client, DEPLOYMENTS, limit=2, offset=2, **window)

    expected = expected_deployments(platform)
    assert (first["total"], first["limit"], first["offset"]) == (3, 2, 0)
    assert parsed(first["items"]) == expected[:2]
    assert (second["total"], second["offset"]) == (3, 2)
    assert parsed(second["items"]) == expected[2:]
    assert first["subject"] == "platform_commits"


async def test_a_rollout_before_the_range_that_completes_in_it_counts_for_frequency_only(
    platform: History, client: httpx.AsyncClient
) -> None:
    """[B+80, B+80 + 1 day): c2 started at 65 and completed at 100."""
    body = await ok(client, DEPLOYMENTS, environment="dev", **platform.range(80, 80 + DAY_MINUTES))

    flags = {
        item["revision"]: (item["completed_in_range"], item["started_in_range"])
        for item in body["items"]
    }
    assert flags == {platform.commits["c2"]: (True, False), platform.commits["c3"]: (True, True)}


async def test_csv_export_of_the_rollouts(platform: History, client: httpx.AsyncClient) -> None:
    response = await client.get(CSV, params=platform.range(5, 5 + DAY_MINUTES))

    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.headers["content-disposition"] == 'attachment; filename="dora-deployments.csv"'
    rows = list(csv.DictReader(io.StringIO(response.text)))
    expected = expected_deployments(platform)
    assert list(rows[0]) == list(expected[0])
    assert [row["revision"] for row in rows] == [item["revision"] for item in expected]
    c2 = rows[1]
    assert c2["started_at"] == iso(platform.timeline.at(65))
    assert (c2["lead_time_seconds"], c2["time_to_restore_seconds"]) == ("2400.0", "1800.0")
    assert (c2["failed_cluster"], c2["failure_reason"]) == ("drone-02", FAILURE[0])
    assert (c2["workload"], c2["completed_in_range"], c2["expected_clusters"]) == ("", "true", "3")
    assert rows[2]["failed_at"] == ""


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        (
            {"since": "2026-11-22T13:00:00Z", "until": "2026-11-22T12:00:00Z"},
            "until: 2026-11-22T12:00:00+00:00 is not after since 2026-11-22T13:00:00+00:00",
        ),
        (
            {"since": "2026-11-22T12:00:00Z", "until": "2026-11-22T12:00:00Z"},
            "until: 2026-11-22T12:00:00+00:00 is not after since 2026-11-22T12:00:00+00:00",
        ),
        ({"since": "2026-12-01T00:00:00Z"}, "since: 2026-12-01T00:00:00+00:00 is not before now"),
        ({"since": "2026-11-22T12:00:00"}, "query.since: Input should have timezone info"),
        ({"until": "yesterday"}, "query.until: Input should be a valid datetime"),
        (
            {"since": "2025-01-01T00:00:00Z", "until": "2026-11-22T12:00:00Z"},
            "since: the range from 2025-01-01T00:00:00+00:00 to 2026-11-22T12:00:00+00:00 is "
            "longer than 366 days",
        ),
    ],
)
@pytest.mark.parametrize("url", [DORA, DEPLOYMENTS, CSV])
async def test_bad_ranges_are_refused_naming_the_parameter(
    client: httpx.AsyncClient, read_token: str, url: str, params: dict[str, str], detail: str
) -> None:
    response = await client.get(url, params=params, headers=bearer(read_token))

    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_input"
    assert response.json()["detail"].startswith(detail)


@pytest.mark.parametrize("url", [DORA, DEPLOYMENTS, CSV])
async def test_a_range_reaching_before_the_history_kept_is_refused(
    make_client: MakeClient, read_token: str, clock: FakeClock, url: str
) -> None:
    client = await make_client(history_retention=timedelta(days=60))
    kept = {"since": (clock() - timedelta(days=53)).isoformat()}
    early = {"since": (clock() - timedelta(days=54)).isoformat()}

    assert (await client.get(url, params=kept, headers=bearer(read_token))).status_code == 200
    refused = await client.get(url, params=early, headers=bearer(read_token))
    assert refused.status_code == 422, refused.text
    oldest = clock() - timedelta(days=60)
    assert refused.json()["detail"] == (
        f"since: {early['since']} is too early: the history is kept for 60d "
        f"(FLEETMARK_HISTORY_RETENTION), so transitions before {oldest.isoformat()} are dropped, "
        "and a range must start 7 days after them (revisions are looked for that long before "
        f"it): from {(oldest + timedelta(days=7)).isoformat()}"
    )


async def test_unknown_names_and_missing_tokens(
    platform: History, client: httpx.AsyncClient
) -> None:
    unknown = await client.get(DORA, params={"environment": ["dev", "qa", "prod"]})
    no_workload = await client.get(DEPLOYMENTS, params={"workload": "no-such-app"})
    anonymous = await client.get(DORA, headers={"Authorization": ""})

    assert unknown.status_code == 404
    assert unknown.json() == {
        "error": "unknown_environment",
        "detail": "environments 'prod', 'qa' are unknown (known: dev, stage)",
    }
    assert no_workload.status_code == 404
    assert no_workload.json()["error"] == "unknown_workload"
    assert no_workload.json()["detail"].startswith("workload 'no-such-app' is unknown (")
    assert anonymous.status_code == 401


@pytest.fixture
async def releases(
    fleet: Fleet,
    timeline: Timeline,
    client: httpx.AsyncClient,
    read_token: str,
    sessions: async_sessionmaker[AsyncSession],
) -> History:
    """The release timeline of tests/hub/dora_history.py, played up to B+180."""
    for name, cluster_type in WORKLOAD_CLUSTERS.items():
        await fleet.add(name, cluster_type)
    run_everything(fleet.clusters, fleet.platform_heads["dev"], fleet.app_heads["dev"])
    await fleet.report()
    commits = {"1.0.0": fleet.app_heads["dev"]} | commit_releases(fleet.app, timeline)
    await fleet.harvest()
    await play_releases(timeline, fleet.clusters, commits)
    return await played(timeline, commits, fleet, client, read_token, sessions)


async def test_figures_of_a_workloads_versions(
    releases: History, client: httpx.AsyncClient
) -> None:
    """hello-world-app in dev over [B+5, B+5 + 1 day) (times in minutes after B):

    - deployments: 1.1.0 (committed at 30, complete at 70), 1.2.0 (100, 112): lead times
      2400 and 720 s; median 1560, p90 at rank 0.9: 720 + 0.9 * 1680 = 2232, mean 1560.
    - change failure rate: 1.1.0 failed on large-01 at 45: 1/2.
    - time to restore: 45 to 70, when large-01 is Ready again: 1500 s.
    small-01 carries no assignment of the workload and takes no part. The platform commits
    (none in the range) are counted apart."""
    window = releases.range(5, 5 + DAY_MINUTES)

    workload = by_environment(await ok(client, DORA, workload=WORKLOAD, **window))
    platform = by_environment(await ok(client, DORA, **window))
    rollouts = await ok(client, DEPLOYMENTS, environment="dev", workload=WORKLOAD, **window)

    dev = workload["dev"]
    assert (dev["deployments"], dev["deployments_per_day"]) == (2, 2.0)
    assert dev["lead_time"] == spread(1560.0, 2232.0, 1560.0)
    assert (dev["rollouts_started"], dev["rollouts_failed"], dev["change_failure_rate"]) == (
        2,
        1,
        0.5,
    )
    assert dev["time_to_restore"] == spread(1500.0, 1500.0, 1500.0)
    assert workload["stage"]["rollouts_started"] == 0
    assert platform["dev"]["rollouts_started"] == 0
    items = {item["revision"]: item for item in rollouts["items"]}
    assert list(items) == ["1.2.0", "1.1.0"]
    failed = items["1.1.0"]
    assert failed["subject"] == "workload_versions"
    assert (failed["workload"], failed["repository"], failed["branch"]) == (WORKLOAD, None, None)
    assert failed["commit"] == releases.commits["1.1.0"]
    assert (failed["expected_clusters"], failed["reached_clusters"]) == (3, 3)
    assert (failed["failed_cluster"], failed["failure_reason"]) == ("large-01", "SyncFailed")
    assert failed["time_to_restore_seconds"] == 1500.0


async def test_superseded_commits_and_commits_no_cluster_tried(
    fleet: Fleet,
    clock: FakeClock,
    client: httpx.AsyncClient,
    read_token: str,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """Commits c1 (B+10), c2 (B+12), c3 (B+30), c4 (B+31); drone-01 runs c1 at 15 and c2 at
    20; drone-02 and large-01 go straight to c2 at 22 and 24. c1 is reached by a descendant
    everywhere: it completes with c2 at 24 (lead time 14 min), c2 too (12 min). At 35, 36 and
    40 the clusters run c4: no cluster ever tried c3, so it is no rollout of its own; c4
    completes at 40 (9 min). Lead times 540, 720, 840 s: median 720, p90 at rank 1.8:
    720 + 0.8 * 120 = 816, mean 700."""
    timeline = Timeline(clock, clock.now)
    for name, cluster_type in PLATFORM_CLUSTERS.items():
        await fleet.add(name, cluster_type)
    for cluster in fleet.clusters.values():
        cluster.run_platform(fleet.platform_heads["dev"])
    await fleet.report()
    commits = {
        name: commit_at(
            fleet.platform, "dev", name, {"drone/README.md": f"{name}\n"}, timeline.at(minutes)
        )
        for name, minutes in {"c1": 10, "c2": 12, "c3": 30, "c4": 31}.items()
    }
    await fleet.harvest()
    for minutes, name, commit in [
        (15, "drone-01", "c1"),
        (20, "drone-01", "c2"),
        (22, "drone-02", "c2"),
        (24, "large-01", "c2"),
        (35, "drone-01", "c4"),
        (36, "drone-02", "c4"),
        (40, "large-01", "c4"),
    ]:
        timeline.go(minutes)
        fleet.clusters[name].run_platform(commits[commit])
        await fleet.clusters[name].report()
    timeline.go(60)
    await refresh_dora(sessions, clock.now)
    client.headers["Authorization"] = f"Bearer {read_token}"
    window = {
        "environment": "dev",
        "since": timeline.at(5).isoformat(),
        "until": timeline.at(5 + DAY_MINUTES).isoformat(),
    }

    [dev] = (await ok(client, DORA, **window))["environments"]
    listed = await ok(client, DEPLOYMENTS, **window)

    assert (dev["deployments"], dev["rollouts_started"], dev["rollouts_failed"]) == (3, 3, 0)
    assert dev["lead_time"] == spread(720.0, 816.0, 700.0)
    assert [
        (item["revision"], item["started_at"], item["completed_at"]) for item in listed["items"]
    ] == [
        (commits[name], iso(timeline.at(started)), iso(timeline.at(completed)))
        for name, started, completed in [("c4", 35, 40), ("c2", 20, 24), ("c1", 15, 24)]
    ]
