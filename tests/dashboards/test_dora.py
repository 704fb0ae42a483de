"""The DORA dashboard's figures, run as Grafana runs them as the read-only role, against what
GET /api/v1/dora answers for the same ranges: the platform commits' and a workload's histories
of tests/hub/dora_history.py, rolled up by the DORA job."""

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.client.schemas.dora import DoraQuery
from hub.dora import service
from hub.dora.bands import BANDS, Band
from hub.harvest.schemas import RepositoriesFile
from hub.harvest.service import sync_repositories_file
from tests.conftest import hub_settings
from tests.dashboards.conftest import ReadOnly, Seeded
from tests.dashboards.test_panels import PANELS
from tests.hub.dora.test_dora_rollup import RANGES, Played, asked, play, played
from tests.hub.dora_history import Timeline, refresh_dora
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock

__all__ = ["played"]

DORA = "/api/v1/dora"
# The API's figures by the panel's column names.
FIGURES = {
    "Deployments": lambda item: item["deployments"],
    "Deployments per day": lambda item: item["deployments_per_day"],
    "Lead time median": lambda item: item["lead_time"]["median_seconds"],
    "Lead time p90": lambda item: item["lead_time"]["p90_seconds"],
    "Rollouts started": lambda item: item["rollouts_started"],
    "Change failure rate": lambda item: item["change_failure_rate"],
    "Time to restore median": lambda item: item["time_to_restore"]["median_seconds"],
    "Time to restore p90": lambda item: item["time_to_restore"]["p90_seconds"],
    "Unrestored": lambda item: item["unrestored"],
}


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _panel(played: Played) -> str:
    if played.workload is None:
        return "fleetmark-dora: Per environment (platform commits)"
    return "fleetmark-dora: Per workload and environment (versions)"


async def test_the_figures_are_the_apis_for_every_range(
    played: Played,
    client: httpx.AsyncClient,
    readonly: ReadOnly,
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # The role outlives the requests' rollbacks.
    await session.commit()
    at = played.timeline.at
    await refresh_dora(sessions, at(180))
    ranges = []
    for since, until in RANGES:
        response = await client.get(DORA, params=asked(played, since, until))
        assert response.status_code == 200, response.text
        end = at(180) if until is None else at(until)
        start = end - timedelta(days=30) if since is None else at(since)
        ranges.append((start, end, response.json()["environments"]))
    query = PANELS[_panel(played)]
    variables = await readonly.variables(query.dashboard)

    compared = []
    for start, end, environments in ranges:
        api = {item["environment"]: item for item in environments}
        for timescaledb in {False, readonly.timescaledb}:
            shown = await readonly.panel(query, variables, start, end, timescaledb)
            counted = {
                name
                for name, item in api.items()
                if item["rollouts_started"] or item["deployments"]
            }
            assert counted <= {row["Environment"] for row in shown}, (start, end)
            for row in shown:
                assert row.get("Workload", played.workload) == played.workload
                item = api[row["Environment"]]
                shown_figures = {column: _number(row[column]) for column in FIGURES}
                api_figures = {column: _number(figure(item)) for column, figure in FIGURES.items()}
                assert {c: v is None for c, v in shown_figures.items()} == {
                    c: v is None for c, v in api_figures.items()
                }, (start, end)
                assert {c: v for c, v in shown_figures.items() if v is not None} == pytest.approx(
                    {c: v for c, v in api_figures.items() if v is not None}, rel=1e-9
                ), (start, end)
                compared.append(item)
    # The ranges count deployments, failures and restores, and leave some unrestored.
    assert any(item["deployments"] for item in compared)
    assert any(item["rollouts_failed"] for item in compared)
    assert any(item["restored"] for item in compared)
    assert any(item["unrestored"] for item in compared)


async def test_the_environment_variable_narrows_the_figures(
    played: Played, readonly: ReadOnly, sessions: async_sessionmaker[AsyncSession]
) -> None:
    at = played.timeline.at
    await refresh_dora(sessions, at(180))
    query = PANELS[_panel(played)]

    every = await readonly.panel(query, await readonly.variables(query.dashboard), at(-60), at(180))
    stage = await readonly.panel(
        query,
        await readonly.variables(query.dashboard, {"environment": ["stage"]}),
        at(-60),
        at(180),
    )

    assert "dev" in {row["Environment"] for row in every}
    assert {row["Environment"] for row in stage} <= {"stage"}


async def test_the_deployments_per_day_add_up_to_the_deployments(
    played: Played,
    readonly: ReadOnly,
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    at = played.timeline.at
    await refresh_dora(sessions, at(180))
    answer = await service.dora_report(
        session,
        DoraQuery(since=at(-60), until=at(180)),
        now=played.timeline.clock.now,
        kept=hub_settings().history_retention,
    )
    query = PANELS["fleetmark-dora: Deployments per day"]

    rows = await readonly.panel(
        query, await readonly.variables(query.dashboard), at(-60), at(180), readonly.timescaledb
    )

    per_environment: dict[str, int] = {}
    for row in rows:
        per_environment[row["metric"]] = per_environment.get(row["metric"], 0) + row["value"]
    assert per_environment == {
        item.environment: item.deployments for item in answer.environments if item.deployments
    }


async def test_the_reconcilers_turning_not_ready_per_hour(
    seeded: Seeded, readonly: ReadOnly
) -> None:
    query = PANELS["fleetmark-dora: Reconcilers turning not ready per hour"]
    variables = await readonly.variables(query.dashboard)

    rows = await readonly.panel(
        query, variables, seeded.now - timedelta(days=1), seeded.now, readonly.timescaledb
    )

    # large-01's performance-test turned not ready three hours ago; nothing else did.
    assert [(row["metric"], row["value"]) for row in rows if row["value"]] == [("dev", 1)]
    assert {row["metric"] for row in rows} == {"dev", "stage"}


# The headline's figures: the API's figure of each, by the headline's column and BANDS' name.
HEADLINE = {
    "Deployment frequency": ("deployments_per_day", lambda item: item["deployments_per_day"]),
    "Lead time": ("lead_time", lambda item: item["lead_time"]["median_seconds"]),
    "Change failure rate": ("change_failure_rate", lambda item: item["change_failure_rate"]),
    "Time to restore": ("time_to_restore", lambda item: item["time_to_restore"]["median_seconds"]),
}


def band(figure: str, value: float) -> Band:
    bounds = BANDS[figure]
    for bound, named in bounds.bands():
        if (value >= bound) if bounds.higher_is_better else (value <= bound):
            return named
    return Band.LOW


async def test_the_headline_bands_the_latest_environments_figures(
    fleet: Fleet,
    clock: FakeClock,
    client: httpx.AsyncClient,
    read_token: str,
    readonly: ReadOnly,
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    client.headers["Authorization"] = f"Bearer {read_token}"
    played = await play(fleet, Timeline(clock, clock.now), None)
    # dev, the environment the history played in, is the latest of those declared.
    await sync_repositories_file(session, RepositoriesFile(environments=["dev"]))
    await session.commit()
    at = played.timeline.at
    await refresh_dora(sessions, at(180))
    query = PANELS["fleetmark-dora: Latest environment"]
    variables = await readonly.variables(query.dashboard, {"environment": ["stage"]})

    seen = set()
    for since, until in RANGES:
        response = await client.get(DORA, params=asked(played, since, until))
        assert response.status_code == 200, response.text
        answer = response.json()
        [dev] = [item for item in answer["environments"] if item["environment"] == "dev"]
        start, end = (
            (datetime.fromisoformat(answer["since"]), datetime.fromisoformat(answer["until"]))
            if since is None
            else (at(since), at(until))
        )
        # Whatever environment the dashboard shows, the headline is the latest one's.
        [headline] = await readonly.panel(query, variables, start, end, readonly.timescaledb)

        assert headline["Environment"] == "dev"
        for column, (figure, of) in HEADLINE.items():
            value = of(dev)
            if value is None:
                assert headline[column] == "no rollouts", (column, since, until)
                continue
            named = headline[column].partition(": ")[0]
            assert named == band(figure, value), (column, value, since, until)
            seen.add(named)
        per_day = headline["Deployment frequency"].partition(": ")[2]
        assert per_day == f"{dev['deployments_per_day']:.2f} a day"
    # The ranges reach more than one band.
    assert len(seen) > 1
