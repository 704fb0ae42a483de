"""The history dashboard's timeline annotation (grafana.timeline), run as Grafana runs it as
the read-only role on the seeded fleet: the API's timeline, row for row, narrowed by the
dashboard's variables."""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from dashboards.history import TIMELINE_EVENTS
from hub.client.schemas.timeline import TimelineQuery
from hub.timeline import service
from tests.dashboards.conftest import ReadOnly, Seeded
from tests.dashboards.grafana_sql import expand
from tests.dashboards.test_panels import PANELS
from tests.hub.harvest.scenario import WORKLOAD

HISTORY = "fleetmark-history: Rollouts per workload"


async def annotations(
    readonly: ReadOnly, seeded: Seeded, **chosen: Sequence[str]
) -> list[dict[str, Any]]:
    """The annotation's rows for the last day, as the history dashboard asks for them."""
    variables = await readonly.variables(PANELS[HISTORY].dashboard, chosen)
    return await readonly.rows(
        expand(
            TIMELINE_EVENTS,
            variables=variables,
            time_from=seeded.now - timedelta(days=1),
            time_to=seeded.now,
        )
    )


async def test_the_annotation_shows_the_timeline_of_the_chosen_environments_and_workloads(
    readonly: ReadOnly, seeded: Seeded
) -> None:
    every = await annotations(readonly, seeded)
    stage = await annotations(readonly, seeded, environment=["stage"])
    workload = await annotations(readonly, seeded, workload=[WORKLOAD])
    since = seeded.now - timedelta(days=1)
    asked = TimelineQuery(since=since, until=seeded.now, limit=1000)
    answered = await service.timeline(readonly.session, asked, now=seeded.now)

    def shown(rows: list[dict[str, Any]]) -> list[tuple[datetime, str, str]]:
        return [(row["time"], row["text"], row["tags"]) for row in rows]

    assert sorted(shown(every)) == sorted(
        (
            row.at,
            row.summary,
            f"{row.environment},{row.kind.value}" if row.environment else row.kind.value,
        )
        for row in answered.items
    )
    assert {row["tags"].split(",")[1] for row in every} >= {
        "rollout.started",
        "rollout.converged",
        "rollout.failed",
        "rollout.stalled",
    }
    assert stage
    assert {row["tags"].split(",")[0] for row in stage} == {"stage"}
    assert workload
    assert all(row["text"].startswith(f"{WORKLOAD} ") for row in workload)
