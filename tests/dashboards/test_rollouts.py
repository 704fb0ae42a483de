"""The panels and the annotation that draw the rollouts the rollouts job keeps, run as Grafana
runs them as the read-only role on the seeded fleet: three hours ago dev's first platform
commit converged at once (its four clusters ran it or the second, its descendant), the second
began (large-01 and small-01) and has been stalled since half an hour later (drone-02 never
got there; drone-01's report of now is after the DORA job's refresh); version 1.0.0 failed on
large-01; stage's commit and version converged."""

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from dashboards.common import ROLLOUT_EVENTS
from dashboards.history import ROLLOUT_STATES
from hub.palette import HEX
from hub.rollouts import service as rollout_service
from tests.dashboards.conftest import ReadOnly, Seeded
from tests.dashboards.grafana_sql import expand
from tests.dashboards.test_panels import PANELS, show
from tests.hub.harvest.scenario import WORKLOAD

TIMELINE = "fleetmark-history: Rollouts per workload"
IN_FLIGHT = "fleetmark-promotion: In-flight rollouts"
STATE = {text: value for value, (text, _) in ROLLOUT_STATES.items()}


async def timeline(
    readonly: ReadOnly, since: datetime, until: datetime, **chosen: Sequence[str]
) -> dict[str, list[tuple[datetime, str]]]:
    """Each series of the timeline: (time, state) in order."""
    query = PANELS[TIMELINE]
    variables = await readonly.variables(query.dashboard, chosen)
    series: dict[str, list[tuple[datetime, str]]] = {}
    for timescaledb in {False, readonly.timescaledb}:
        rows = await readonly.panel(query, variables, since, until, timescaledb)
        assert [row["time"] for row in rows] == sorted(row["time"] for row in rows)
        shown: dict[str, list[tuple[datetime, str]]] = {}
        for row in rows:
            shown.setdefault(row["metric"], []).append(
                (row["time"], ROLLOUT_STATES[row["value"]][0])
            )
        assert not series or shown == series
        series = shown
    return series


async def test_rollouts_per_workload_start_with_the_state_in_effect_at_the_ranges_start(
    readonly: ReadOnly, seeded: Seeded
) -> None:
    now = seeded.now
    began, stalled = now - timedelta(hours=3), now - timedelta(hours=2, minutes=30)

    day = await timeline(readonly, now - timedelta(days=1), now)
    hour = await timeline(readonly, now - timedelta(hours=1), now)
    early = await timeline(readonly, now - timedelta(hours=2, minutes=50), now)
    before = await timeline(readonly, now - timedelta(days=1), now - timedelta(hours=4))

    # The range holds the whole story: at the start, the first commit converged and, its
    # newer rollout taken last, the second in progress, then stalled.
    assert day == {
        "platform on dev": [(began, "converged"), (began, "in progress"), (stalled, "stalled")],
        f"{WORKLOAD} on dev": [(began, "failed")],
        "platform on stage": [(began, "converged")],
        f"{WORKLOAD} on stage": [(began, "converged")],
    }
    # A range that starts later starts with the state each was in then.
    assert hour == {
        "platform on dev": [(now - timedelta(hours=1), "stalled")],
        f"{WORKLOAD} on dev": [(now - timedelta(hours=1), "failed")],
        "platform on stage": [(now - timedelta(hours=1), "converged")],
        f"{WORKLOAD} on stage": [(now - timedelta(hours=1), "converged")],
    }
    assert early["platform on dev"] == [
        (now - timedelta(hours=2, minutes=50), "in progress"),
        (stalled, "stalled"),
    ]
    assert before == {}


async def test_rollouts_per_workload_follow_the_variables(
    readonly: ReadOnly, seeded: Seeded
) -> None:
    now = seeded.now
    since = now - timedelta(days=1)

    workload = await timeline(readonly, since, now, workload=[WORKLOAD])
    stage = await timeline(readonly, since, now, environment=["stage"])

    assert set(workload) == {f"{WORKLOAD} on dev", f"{WORKLOAD} on stage"}
    assert set(stage) == {"platform on stage", f"{WORKLOAD} on stage"}


def test_rollout_states_are_drawn_in_the_palettes_colours() -> None:
    assert {text: colour for text, colour in ROLLOUT_STATES.values()} == {
        "converged": HEX["ok"],
        "in progress": HEX["progress"],
        "stalled": HEX["warn"],
        "failed": HEX["bad"],
    }


async def test_in_flight_rollouts_are_gauges_of_the_clusters_reached(
    readonly: ReadOnly, seeded: Seeded
) -> None:
    every = await show(readonly, seeded, IN_FLIGHT)
    workload = await show(readonly, seeded, IN_FLIGHT, workload=[WORKLOAD])
    stage = await show(readonly, seeded, IN_FLIGHT, environment=["stage"])

    # Converged rollouts are not in flight; each gauge is named by what it is, how many of the
    # expected clusters reached it and failed on it, and how old it and its facts are.
    assert [(row["Rollout"], row["Reached"]) for row in every] == [
        (
            f"platform {seeded.second[:12]} on dev: 2 of 4, stalled, started 3 h ago "
            "(as of 0 min ago)",
            0.5,
        ),
        (
            f"{WORKLOAD} 1.0.0 on dev: 2 of 3, 1 failed, started 3 h ago (as of 0 min ago)",
            2 / 3,
        ),
    ]
    assert workload == every[1:]
    assert stage == []


async def events(
    readonly: ReadOnly, seeded: Seeded, **chosen: Sequence[str]
) -> list[dict[str, Any]]:
    """The annotation's rows for the last day, as every dashboard asks for them."""
    dashboard = PANELS[IN_FLIGHT].dashboard
    variables = await readonly.variables(dashboard, chosen)
    return await readonly.rows(
        expand(
            ROLLOUT_EVENTS,
            variables=variables,
            time_from=seeded.now - timedelta(days=1),
            time_to=seeded.now,
        )
    )


def texts(rows: Iterable[Mapping[str, Any]]) -> set[tuple[datetime, str, str]]:
    return {(row["time"], row["text"], row["tags"]) for row in rows}


async def test_the_annotation_marks_each_rollouts_start_and_end(
    readonly: ReadOnly, seeded: Seeded
) -> None:
    began = seeded.now - timedelta(hours=3)
    first, second = seeded.first[:12], seeded.second[:12]

    every = await events(readonly, seeded)
    dev = await events(readonly, seeded, environment=["dev"])
    workload = await events(readonly, seeded, workload=[WORKLOAD])

    assert texts(every) >= {
        (began, f"platform commit {first} started on dev: 4 clusters expected", "dev,started"),
        (
            began,
            f"platform commit {first} converged on dev: 4 of 4 clusters reached it",
            "dev,converged",
        ),
        (began, f"platform commit {second} started on dev: 4 clusters expected", "dev,started"),
        (
            began,
            f"{WORKLOAD} 1.0.0 failed on dev: large-01 failed it (HealthCheckFailed)",
            "dev,failed",
        ),
    }
    # A start and an end of the four rollouts that ended, a start of the one still going.
    assert sorted(row["tags"].split(",")[1] for row in every) == sorted(
        ["started"] * 5 + ["converged"] * 3 + ["failed"]
    )
    assert all(row["time"] == began for row in every)
    assert texts(dev) == texts(row for row in every if row["tags"].startswith("dev,"))
    assert {row["text"].split(" ")[0] for row in workload} == {WORKLOAD}
    assert len(workload) == 4


HEALTH = "fleetmark-promotion: Rollout health"


async def test_rollout_health_shows_the_numbers_the_api_gives(
    readonly: ReadOnly, seeded: Seeded, session: AsyncSession
) -> None:
    every = await show(readonly, seeded, HEALTH)
    workload = await show(readonly, seeded, HEALTH, workload=[WORKLOAD])
    answered = await rollout_service.current_health(session)

    # The current rollout of each subject per environment: dev's second platform commit, two
    # of its four clusters there and stalled; the version failed on large-01; stage's two
    # converged.
    assert [
        (row["Environment"], row["Subject"], row["State"], row["Converged"], row["Failed"])
        for row in every
    ] == [
        ("dev", "platform commits", "stalled", "2 of 4", 0),
        ("dev", WORKLOAD, "failed", "2 of 3", 1),
        ("stage", "platform commits", "converged", "1 of 1", 0),
        ("stage", WORKLOAD, "converged", "1 of 1", 0),
    ]
    assert every[0]["Revision"] == seeded.second[:12]
    assert [row["Max is"] for row in every] == ["so far", "so far", "final", "final"]
    # The same figures as GET /api/v1/rollouts and /metrics.
    assert [(row["Ratio"], row["p50"], row["p95"], row["Max"]) for row in every] == [
        (
            item.converged_ratio,
            item.time_to_converge.p50_seconds,
            item.time_to_converge.p95_seconds,
            item.time_to_converge.max_seconds,
        )
        for item in answered
    ]
    assert workload == every[1:2] + every[3:]
