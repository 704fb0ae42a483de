"""The Promotion dashboard on the seeded fleet, run as Grafana runs it as the read-only role:
the answers the promotion job keeps, with the failed gate and its blocking cluster."""

from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from hub.gate import service
from tests.dashboards.conftest import ReadOnly, Seeded
from tests.dashboards.test_panels import PANELS
from tests.hub.harvest.scenario import WORKLOAD

OPTIONS = service.AnswerOptions(
    soak=timedelta(minutes=10),
    stale_after=timedelta(minutes=10),
    newest=5,
    source="https://fleetmark.example.com",
)


async def show(
    readonly: ReadOnly, seeded: Seeded, title: str, **chosen: list[str]
) -> list[dict[str, Any]]:
    query = PANELS[f"fleetmark-promotion: {title}"]
    variables = await readonly.variables(query.dashboard, chosen)
    return await readonly.panel(
        query, variables, seeded.now - timedelta(days=1), seeded.now, readonly.timescaledb
    )


async def test_a_failed_gate_shows_with_its_blocking_cluster(
    seeded: Seeded, session: AsyncSession, readonly: ReadOnly
) -> None:
    await service.keep_answers(session, OPTIONS, now=seeded.now)

    blocking = await show(readonly, seeded, "Blocking clusters", environment=["dev"])
    [counted] = await show(readonly, seeded, "Blocking", environment=["dev"])
    answers = await show(readonly, seeded, "Gate answers", environment=["dev"])

    # large-01 fails the workload's version; drone-02 has not applied the second commit and
    # drone-01 has run it for less than the soak: furthest from compliance first.
    assert [
        (row["Subject"], row["Revision"], row["Verdict"], row["Cluster"], row["State"])
        for row in blocking
    ] == [
        (WORKLOAD, "1.0.0", "failed", "large-01", "failed"),
        ("platform commits", seeded.second[:12], "pending", "drone-02", "not_applied"),
        ("platform commits", seeded.second[:12], "pending", "drone-01", "soaking"),
    ]
    assert counted["Blocking"] == len(blocking)
    shown = [
        (row["Subject"], row["Revision"], row["Newest"], row["Verdict"], row["Blocking clusters"])
        for row in answers
    ]
    # The dev branch's chain, newest first (its first commit passes too), then the version.
    assert shown[:2] == [
        ("platform commits", seeded.second[:12], 1, "pending", "drone-02, drone-01"),
        ("platform commits", seeded.first[:12], 2, "passed", None),
    ]
    assert shown[-1] == (WORKLOAD, "1.0.0", 1, "failed", "large-01")
    assert answers[-1]["Compliant"] == "2 of 3"


async def test_what_is_promotable(
    seeded: Seeded, session: AsyncSession, readonly: ReadOnly
) -> None:
    await service.keep_answers(session, OPTIONS, now=seeded.now)

    promotable = await show(readonly, seeded, "Promotable")
    verdicts = await show(readonly, seeded, "Gates of the newest commits and versions")
    workload_only = await show(readonly, seeded, "Promotable", workload=[WORKLOAD])

    assert [
        (row["Environment"], row["Subject"], row["Newest"], row["Verdict"], row["Promotable"])
        for row in promotable
    ] == [
        ("dev", "platform commits", seeded.second[:12], "pending", seeded.first[:12]),
        ("dev", WORKLOAD, "1.0.0", "failed", None),
        ("stage", "platform commits", seeded.fleet.platform_heads["stage"][:12], "pending", None),
        ("stage", WORKLOAD, "1.0.0", "pending", None),
    ]
    assert promotable[0]["Newer than it"] == 1
    assert verdicts == [{"Passed": 0, "Pending": 3, "Failed": 1}]
    assert [row["Subject"] for row in workload_only] == [WORKLOAD, WORKLOAD]
