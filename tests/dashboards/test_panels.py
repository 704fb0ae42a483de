"""Every panel of every built dashboard, run as Grafana runs it (macros and variables
expanded) as the read-only role on a simulated fleet; the dashboards' own panels checked on
the rows they show."""

from datetime import timedelta
from typing import Any

import pytest

from tests.dashboards.conftest import PanelQuery, ReadOnly, Seeded, panel_queries
from tests.harvest import scenario

QUERIES = panel_queries()
FUNCTIONAL = scenario.target_name("functional-test")
PERFORMANCE = scenario.target_name("performance-test")


def by_key(queries: list[PanelQuery]) -> dict[str, PanelQuery]:
    return {query.key: query for query in queries}


PANELS = by_key(QUERIES)


async def show(
    readonly: ReadOnly, seeded: Seeded, key: str, timescaledb: bool = False, **chosen: list[str]
) -> list[dict[str, Any]]:
    """The rows panel `key` shows for the last day, the variables at "All" but `chosen`."""
    query = PANELS[key]
    variables = await readonly.variables(query.dashboard, chosen)
    return await readonly.panel(
        query,
        variables,
        seeded.now - timedelta(days=1),
        seeded.now + timedelta(hours=1),
        timescaledb=timescaledb,
    )


@pytest.mark.parametrize("query", QUERIES, ids=[query.key for query in QUERIES])
async def test_every_panel_runs_as_the_read_only_role(
    query: PanelQuery, readonly: ReadOnly, seeded: Seeded
) -> None:
    now = seeded.now
    every = await readonly.variables(query.dashboard)
    some = await readonly.variables(
        query.dashboard, {"environment": ["dev"], "cluster": ["drone-02", "large-01"]}
    )
    for variables in (every, some):
        for timescaledb in {False, readonly.timescaledb}:
            for span in (timedelta(days=1), timedelta(days=30)):
                await readonly.panel(query, variables, now - span, now, timescaledb)
