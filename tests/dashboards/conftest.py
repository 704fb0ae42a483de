"""Fixtures of the dashboard tests: the built dashboards' panel queries, run as Grafana runs
them (macros and variables expanded, tests/dashboards/grafana_sql.py) as a role granted by
`fleetmark db grant-readonly`, on a fleet simulated as in the correlation tests.

The panels compare with the database's `now()` (staleness, open drift periods), so the
fleet's clock is the test transaction's `now()`.
"""

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from grafana_foundation_sdk.models.dashboard import Dashboard
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from hub import store
from hub.dora.service import refresh_rollup
from hub.rollouts.service import keep_rollouts
from tests.dashboards.grafana_sql import Variable, expand
from tests.dashboards.panels import PanelQuery, built_dashboards, panel_queries
from tests.hub.conftest import (
    configure,
    fleet,
    harvest,
    harvest_settings,
    make_repo,
    pristine_remotes,
    scenario_remotes,
    sessions,
    unharvested_fleet,
)
from tests.hub.drifting import evaluate
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock

__all__ = [
    "PanelQuery",
    "built_dashboards",
    "configure",
    "fleet",
    "harvest",
    "harvest_settings",
    "make_repo",
    "panel_queries",
    "pristine_remotes",
    "scenario_remotes",
    "sessions",
    "unharvested_fleet",
]


async def transaction_time(session: AsyncSession) -> datetime:
    now = await session.scalar(text("SELECT now()"))
    assert isinstance(now, datetime)
    return now


@pytest.fixture
async def clock(session: AsyncSession) -> FakeClock:
    return FakeClock(await transaction_time(session))


class ReadOnly:
    """Runs SQL as Grafana's read-only role, in a savepoint of the test's transaction."""

    def __init__(self, session: AsyncSession, role: str, timescaledb: bool) -> None:
        self.session, self.role, self.timescaledb = session, role, timescaledb

    async def rows(self, sql: str) -> list[dict[str, Any]]:
        # A statement that fails rolls the savepoint back, and SET ROLE with it.
        async with self.session.begin_nested():
            await self.session.execute(text(f'SET ROLE "{self.role}"'))
            result = await self.session.execute(text(sql).execution_options(no_parameters=True))
            rows = [dict(row) for row in result.mappings()]
            await self.session.execute(text("RESET ROLE"))
        return rows

    async def variables(
        self, dashboard: Dashboard, chosen: Mapping[str, Sequence[str]] = {}
    ) -> dict[str, Variable]:
        """The dashboard's variables, each query variable's options asked as Grafana asks
        them (in order, each with the values chosen for those before it); "All" (a variable
        without it: its first option) unless `chosen` names values."""
        variables: dict[str, Variable] = {}
        assert dashboard.templating is not None
        assert dashboard.templating.list_val is not None
        for model in dashboard.templating.list_val:
            if model.type_val == "constant":
                assert isinstance(model.query, str)
                variables[model.name] = Variable([model.query], multi=False, include_all=False)
                continue
            assert isinstance(model.query, str)
            now = datetime.now(UTC)
            options = [
                str(next(iter(row.values())))
                for row in await self.rows(
                    expand(model.query, variables=variables, time_from=now, time_to=now)
                )
            ]
            values = chosen.get(model.name)
            if values is None and not model.include_all:
                values = options[:1]
            variables[model.name] = Variable(
                values,
                multi=bool(model.multi),
                include_all=bool(model.include_all),
                all_value=model.all_value,
                options=options,
            )
        return variables

    async def panel(
        self,
        query: PanelQuery,
        variables: Mapping[str, Variable],
        time_from: datetime,
        time_to: datetime,
        timescaledb: bool = False,
        screen: int = 1800,
    ) -> list[dict[str, Any]]:
        """The panel's rows on a dashboard `screen` pixels wide."""
        sql = expand(
            query.query.raw_sql,
            variables=variables,
            time_from=time_from,
            time_to=time_to,
            max_data_points=query.max_data_points(screen),
            min_interval=query.panel.interval,
            timescaledb=timescaledb,
        )
        return await self.rows(sql)


@pytest.fixture
async def readonly(session: AsyncSession) -> ReadOnly:
    """A role of its own (rolled back with the test), granted as `fleetmark db
    grant-readonly` grants."""
    role = f"grafana_test_{uuid.uuid4().hex[:12]}"
    await session.execute(text(f'CREATE ROLE "{role}" NOLOGIN'))
    await store.grant_readonly(session, role)
    backend = await store.backend(session)
    return ReadOnly(session, role, backend.timescaledb is not None)


# The hub's default FLEETMARK_ROLLOUT_STALL_AFTER.
STALL_AFTER = timedelta(minutes=30)


@dataclass
class Seeded:
    fleet: Fleet
    first: str
    second: str
    now: datetime


@pytest.fixture
async def seeded(fleet: Fleet, session: AsyncSession, clock: FakeClock) -> Seeded:
    """dev got a second platform commit. Three hours ago, on dev, drone-01 and drone-02 ran
    the first, large-01 the second with its performance-test failing, small-01 (no
    assignment) the second; stage's drone ran stage's head; stage's large never reported.
    Now drone-01 has applied the second commit, drone-02 is still behind, large-01 still
    failing, and the stage drone is silent. The drift job judged the fleet both times, the
    DORA job its rollouts now, and the rollouts job their states."""
    now = await transaction_time(session)  # each harvest moved the clock on a little
    first = fleet.platform_heads["dev"]
    second = fleet.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await fleet.harvest()
    clock.now = now - timedelta(hours=3)
    placements = [
        ("drone-01", "drone", "dev", first),
        ("drone-02", "drone", "dev", first),
        ("large-01", "large", "dev", second),
        ("small-01", "small", "dev", second),
        ("stage-drone-01", "drone", "stage", fleet.platform_heads["stage"]),
        ("stage-large-01", "large", "stage", None),
    ]
    for name, cluster_type, environment, platform in placements:
        cluster = await fleet.add(name, cluster_type, environment)
        cluster.run_platform(platform)
    for name in ("drone-01", "drone-02"):
        fleet.clusters[name].run_app("functional-test", fleet.app_heads["dev"])
    fleet.clusters["large-01"].run_app(
        "performance-test",
        fleet.app_heads["dev"],
        ready=False,
        reason="HealthCheckFailed",
        message="Deployment/hello-world not ready",
    )
    fleet.clusters["stage-drone-01"].run_app("uat-test", fleet.app_heads["stage"])
    await fleet.report("drone-01", "drone-02", "large-01", "small-01", "stage-drone-01")
    await evaluate(session, clock)

    clock.now = now
    fleet.clusters["drone-01"].run_platform(second)
    await fleet.report("drone-01", "drone-02", "large-01", "small-01")
    await evaluate(session, clock)
    await refresh_rollup(session, now=now, settle=timedelta(days=1))
    await keep_rollouts(session, stall_after=STALL_AFTER, source="https://fleetmark.example.com")
    await session.commit()
    return Seeded(fleet, first, second, now)
