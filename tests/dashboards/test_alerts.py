"""The alert rules' queries, run as Grafana's read-only role on the seeded fleet: each returns a
row (an alert instance, labelled by its text columns) exactly for what is in that condition.
And the provisioning file is Grafana's format: a group of rules, each a query and a reduce and
threshold expression on it."""

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.ext.asyncio import AsyncSession

from dashboards import alerts, build
from hub.promotion import service
from hub.rollouts.service import keep_rollouts
from tests.correlation.drifting import evaluate
from tests.dashboards.conftest import ReadOnly, Seeded
from tests.harvest.conftest import Harvest
from tests.harvest.scenario import WORKLOAD
from tests.support import FakeClock

RULES = {rule.uid: rule for rule in alerts.RULES}


async def firing(readonly: ReadOnly, uid: str) -> list[dict[str, Any]]:
    """The rows (alert instances) the rule's query returns; it takes no macro or variable."""
    return await readonly.rows(RULES[uid].sql)


def labels(rows: list[dict[str, Any]], *names: str) -> set[tuple[Any, ...]]:
    return {tuple(row[name] for name in names) for row in rows}


async def test_a_cluster_drifted_longer_than_the_threshold_fires(
    seeded: Seeded, session: AsyncSession, readonly: ReadOnly, clock: FakeClock
) -> None:
    # drone-03 joins now behind the dev head: drifted, but only just.
    late = await seeded.fleet.add("drone-03", "drone")
    late.run_platform(seeded.first)
    await seeded.fleet.report("drone-03")
    await evaluate(session, clock)

    rows = await firing(readonly, "fleetmark-cluster-drifted")
    drifted = await readonly.rows(
        "SELECT cluster FROM grafana.cluster WHERE drifted_since IS NOT NULL"
    )

    # drone-02 and large-01 have been drifted for three hours, and stage's large (it never
    # reported); drone-01 caught up, and the drift of drone-03 (and of the stage drone, silent
    # since) began now.
    assert labels(rows, "environment", "cluster_type", "cluster") == {
        ("dev", "drone", "drone-02"),
        ("dev", "large", "large-01"),
        ("stage", "large", "stage-large-01"),
    }
    assert {round(row["minutes_drifted"] / 60) for row in rows} == {3}
    assert {"drone-03", "stage-drone-01"} <= {row["cluster"] for row in drifted}


async def test_a_stale_cluster_fires(seeded: Seeded, readonly: ReadOnly) -> None:
    rows = await firing(readonly, "fleetmark-cluster-stale")

    # The stage drone last reported three hours ago; the stage large never did (not stale:
    # never reported), the dev clusters reported now.
    assert labels(rows, "environment", "cluster_type", "cluster") == {
        ("stage", "drone", "stage-drone-01")
    }
    assert round(rows[0]["minutes_silent"] / 60) == 3


async def test_a_failing_harvest_fires(
    seeded: Seeded, readonly: ReadOnly, configure: Any, harvest: Harvest, tmp_path: Path
) -> None:
    assert await firing(readonly, "fleetmark-harvest-failing") == []
    missing = (tmp_path / "remotes" / "gone").as_uri()
    await configure(missing, "platform", branches=["dev"])
    await harvest()

    rows = await firing(readonly, "fleetmark-harvest-failing")

    assert [(row["role"], row["failing"]) for row in rows] == [("platform", 1)]
    assert rows[0]["repository"].endswith("/remotes/gone")


async def test_a_failed_gate_fires(
    seeded: Seeded, session: AsyncSession, readonly: ReadOnly
) -> None:
    options = service.AnswerOptions(
        soak=timedelta(minutes=10), stale_after=timedelta(minutes=10), newest=5
    )
    assert await firing(readonly, "fleetmark-gate-failed") == []
    await service.keep_answers(session, options, now=seeded.now)

    rows = await firing(readonly, "fleetmark-gate-failed")

    # The version large-01 fails; dev's newest platform commit is pending, not failed.
    assert [
        (row["environment"], row["subject"], row["workload"], row["revision"], row["blocking"])
        for row in rows
    ] == [("dev", "workload version", WORKLOAD, "1.0.0", 1)]


async def test_a_stalled_rollout_fires(
    seeded: Seeded, session: AsyncSession, readonly: ReadOnly
) -> None:
    rows = await firing(readonly, "fleetmark-rollout-stalled")
    # Judged with a stall-after longer than its three hours: in progress, not stalled.
    await keep_rollouts(session, stall_after=timedelta(hours=4))
    patient = await firing(readonly, "fleetmark-rollout-stalled")

    # dev's second platform commit: no expected cluster reached it since large-01 and
    # small-01 three hours ago; drone-01 and drone-02 still to reach it. Version 1.0.0 failed
    # there (a failure, not a stall).
    assert [
        (row["environment"], row["subject"], row["workload"], row["revision"]) for row in rows
    ] == [("dev", "platform commit", "", seeded.second)]
    assert [row["clusters_to_reach"] for row in rows] == [2]
    assert patient == []


def test_the_provisioning_file_has_every_rule_as_grafana_reads_it() -> None:
    document = yaml.safe_load(build.render()[build.ALERT_RULES])

    assert document["apiVersion"] == 1
    [group] = document["groups"]
    assert (group["folder"], group["interval"]) == (alerts.FOLDER, "1m")
    assert [rule["uid"] for rule in group["rules"]] == list(RULES)
    for rule in group["rules"]:
        assert len(rule["uid"]) <= 40
        query, reduce, threshold = rule["data"]
        assert (query["datasourceUid"], query["model"]["format"]) == ("fleetmark", "table")
        assert query["model"]["rawSql"] == RULES[rule["uid"]].sql.strip()
        assert (reduce["model"]["type"], reduce["model"]["expression"]) == ("reduce", "A")
        assert threshold["model"]["type"] == "threshold"
        assert threshold["model"]["conditions"] == [{"evaluator": {"type": "gt", "params": [0]}}]
        assert rule["condition"] == threshold["refId"] == "C"
        assert rule["noDataState"] == "OK"


def test_no_environment_or_cluster_is_named_in_a_rule() -> None:
    text = build.render()[build.ALERT_RULES]

    assert re.findall(r"'(dev|stage|prod|drone-\d+|large-\d+)'", text) == []
