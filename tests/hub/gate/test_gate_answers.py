"""The gate answers the promotion job keeps (gate_answer) for the newest platform commits and
workload versions of each environment: the answers GET /api/v1/gates/promotion gives."""

from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.app import create_app
from hub.background.runner import run_round
from hub.gate import service, tasks
from hub.gate.repository import ANSWERS_LOCK
from hub.gate.tasks import GATE_ANSWERS_JOB
from hub.models import GateAnswer
from tests.conftest import hub_settings
from tests.hub.conftest import ServedFleet
from tests.hub.harvest import scenario
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.outbox import published
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, bearer

GATE = "/api/v1/gates/promotion"
OPTIONS = service.AnswerOptions(
    soak=timedelta(minutes=10),
    stale_after=timedelta(seconds=600),
    newest=5,
    source="https://fleetmark.example.com",
)


@pytest.fixture
async def story(fleet: Fleet, clock: FakeClock) -> Fleet:
    """dev: two drones (Flux) and a large (Argo CD). A second platform commit runs on the
    drones while the large fails it; version 1.1.0 runs on the drone-01 while the large fails
    it. stage: a drone that has run the stage head, Ready, for the soak."""
    first = fleet.platform_heads["dev"]
    second = fleet.promote("Promote dev: platform config", {"large/README.md": "west-us\n"})
    fleet.release("1.1.0")
    await fleet.harvest()
    old_app, new_app = fleet.app_heads["dev"], fleet.app.head("dev")
    for name, cluster_type in [("drone-01", "drone"), ("drone-02", "drone"), ("large-01", "large")]:
        await fleet.add(name, cluster_type)
    stage = await fleet.add("drone-11", "drone", environment="stage")
    stage.run_platform(fleet.platform_heads["stage"])
    for name in ("drone-01", "drone-02"):
        fleet.clusters[name].run_platform(second)
    fleet.clusters["drone-01"].run_app("functional-test", new_app)
    fleet.clusters["drone-02"].run_app("functional-test", old_app)
    large = fleet.clusters["large-01"]
    large.run_platform(first, attempted=second, ready=False, reason="SyncFailed", message="boom")
    large.run_app("performance-test", old_app, attempted=new_app, ready=False, reason="SyncFailed")
    await fleet.report()
    clock.advance(minutes=11)
    await fleet.report()
    return fleet


async def kept(session: AsyncSession) -> list[dict[str, Any]]:
    """The kept answers as values (a request's rollback would expire ORM objects)."""
    rows = await session.execute(
        select(*GateAnswer.__table__.c).order_by(
            GateAnswer.environment_position,
            GateAnswer.workload.nulls_first(),
            GateAnswer.newest,
        )
    )
    return [dict(row) for row in rows.mappings()]


async def endpoint(client: httpx.AsyncClient, token: str, answer: dict[str, Any]) -> dict[str, Any]:
    target = (
        {"commit": answer["revision"]}
        if answer["workload"] is None
        else {"workload": answer["workload"], "version": answer["revision"]}
    )
    response = await client.get(
        GATE,
        params={"environment": answer["environment"], "soak": "600", "limit": 20, **target},
        headers=bearer(token),
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_the_kept_answers_are_the_endpoints(
    story: Fleet,
    session: AsyncSession,
    clock: FakeClock,
    client: httpx.AsyncClient,
    read_token: str,
) -> None:
    count = await service.keep_answers(session, OPTIONS, now=clock.now)
    answers = await kept(session)

    assert count == len(answers)
    dev_commits = [
        a["revision"] for a in answers if a["environment"] == "dev" and a["workload"] is None
    ]
    # The dev branch's first-parent chain, newest first.
    assert dev_commits[:2] == [story.platform.head("dev"), story.platform_heads["dev"]]
    for answer in answers:
        body = await endpoint(client, read_token, answer)
        blocking = [
            {
                "cluster": cluster["name"],
                "cluster_type": cluster["cluster_type"],
                "state": cluster["state"],
                "explanation": cluster["explanation"],
            }
            for cluster in body["clusters"]["items"]
            if cluster["state"] != "compliant"
        ]
        counts = body["counts"]
        assert (
            answer["verdict"],
            answer["reasons"],
            answer["expected"],
            answer["compliant"],
            answer["stale"],
            answer["never_reported"],
            answer["blocking"],
            answer["blocking_count"],
        ) == (
            body["verdict"],
            body["reasons"],
            counts["expected"],
            counts["compliant"],
            counts["stale"],
            counts["never_reported"],
            blocking,
            counts["expected"] - counts["compliant"],
        ), answer["revision"]


async def test_a_failed_gate_is_kept_with_its_blocking_cluster(
    story: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await service.keep_answers(session, OPTIONS, now=clock.now)
    answers = {(a["environment"], a["workload"], a["newest"]): a for a in await kept(session)}

    head = answers[("dev", None, 1)]
    assert (head["revision"], head["verdict"], head["blocking_count"]) == (
        story.platform.head("dev"),
        "failed",
        1,
    )
    assert [(b["cluster"], b["state"]) for b in head["blocking"]] == [("large-01", "failed")]
    version = answers[("dev", WORKLOAD, 1)]
    assert (version["revision"], version["verdict"]) == ("1.1.0", "failed")
    assert [(b["cluster"], b["state"]) for b in version["blocking"]] == [
        ("large-01", "failed"),
        ("drone-02", "not_applied"),
    ]
    assert answers[("dev", WORKLOAD, 2)]["revision"] == "1.0.0"
    stage = answers[("stage", None, 1)]
    assert (stage["revision"], stage["verdict"], stage["blocking"]) == (
        story.platform_heads["stage"],
        "passed",
        [],
    )


async def test_a_new_run_replaces_the_answers(
    story: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await service.keep_answers(session, OPTIONS, now=clock.now)
    large = story.clusters["large-01"]
    large.run_platform(story.platform.head("dev"))
    large.run_app("performance-test", story.app.head("dev"))
    await story.report()
    clock.advance(minutes=10)
    await story.report()

    await service.keep_answers(session, OPTIONS, now=clock.now)
    answers = {(a["environment"], a["workload"], a["newest"]): a for a in await kept(session)}

    assert answers[("dev", None, 1)]["verdict"] == "passed"
    assert answers[("dev", None, 1)]["evaluated_at"] == clock.now
    assert [b["cluster"] for b in answers[("dev", WORKLOAD, 1)]["blocking"]] == ["drone-02"]


async def test_a_changed_verdict_is_announced_once(
    story: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    await service.keep_answers(session, OPTIONS, now=clock.now)
    first = await published(session, "fleetmark.gate.")
    answers = await kept(session)
    await service.keep_answers(session, OPTIONS, now=clock.now)
    again = await published(session, "fleetmark.gate.")

    # Judged for the first time: every verdict but pending is announced, once.
    announced = {
        (a["environment"], a["workload"], a["revision"], a["verdict"])
        for a in answers
        if a["verdict"] != "pending"
    }
    assert len(first) == len(announced)
    assert {
        (
            e["environment"],
            e["workload"],
            e["data"]["target"]["commit"] or e["data"]["target"]["version"],
            e["data"]["verdict"],
        )
        for e in first
    } == announced
    assert again == first
    head = story.platform.head("dev")
    failed = next(e for e in first if e["subject"] == f"gates/dev/{head}")
    assert failed["type"] == "fleetmark.gate.failed"
    assert failed["data"]["previous_verdict"] is None
    assert failed["data"]["counts"] | {"expected": 3, "failed": 1} == failed["data"]["counts"]
    assert failed["data"]["evidence_url"] == (
        f"https://fleetmark.example.com/gate?environment=dev&commit={head}"
    )
    # It concerns the environment's clusters, of both its types.
    assert {tuple(e["cluster_types"]) for e in first if e["environment"] == "dev"} == {
        ("drone", "large")
    }

    large = story.clusters["large-01"]
    large.run_platform(head)
    await story.report()
    clock.advance(minutes=10)
    await story.report()
    await service.keep_answers(session, OPTIONS, now=clock.now)
    await service.keep_answers(session, OPTIONS, now=clock.now)
    changed = (await published(session, "fleetmark.gate."))[len(first) :]
    before = {(a["environment"], a["workload"], a["revision"]): a["verdict"] for a in answers}
    after = {(a["environment"], a["workload"], a["revision"]): a for a in await kept(session)}

    # One event per verdict that changed, naming the verdict before.
    assert {
        (e["subject"], e["data"]["previous_verdict"], e["data"]["verdict"]) for e in changed
    } == {
        (
            "/".join(["gates", *(part for part in key if part is not None)]),
            verdict,
            after[key]["verdict"],
        )
        for key, verdict in before.items()
        if after[key]["verdict"] != verdict
    }
    assert len(changed) == len({e["subject"] for e in changed})
    assert ("fleetmark.gate.passed", f"gates/dev/{head}", "failed") in [
        (e["type"], e["subject"], e["data"]["previous_verdict"]) for e in changed
    ]


async def test_a_rolled_back_judgement_leaves_no_event(
    story: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    async with session.begin_nested() as judging:
        await service.keep_answers(session, OPTIONS, now=clock.now)
        assert await published(session, "fleetmark.gate.") != []
        await judging.rollback()

    assert await published(session, "fleetmark.gate.") == []


async def test_one_replica_keeps_the_answers_at_a_time(served_fleet: ServedFleet) -> None:
    live = served_fleet
    scenario.build_platform(live.platform, live.app.url)
    scenario.build_app(live.app)
    await live.start([("drone-01", "dev", "drone")])
    settings = hub_settings()

    async with live.engine.connect() as replica:  # another replica is judging
        await replica.execute(text("SELECT pg_advisory_lock(:key)"), {"key": ANSWERS_LOCK})
        skipped = await run_round(tasks.GATE_ANSWERS, live.sessions, settings, live.clock)
        await replica.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": ANSWERS_LOCK})
    ran = await tasks.scheduled_answers(live.sessions, settings, clock=live.clock)
    async with live.sessions() as session:
        answers = await kept(session)

    assert skipped == "skipped"
    assert ran == len(answers)
    assert {(a["environment"], a["workload"]) for a in answers} == {
        ("dev", None),
        ("stage", None),
        ("dev", WORKLOAD),
        ("stage", WORKLOAD),
    }


async def test_the_hub_keeps_the_answers_every_interval(
    database_url: str, clock: FakeClock
) -> None:
    app = create_app(hub_settings(gate_answers_interval="90"), database_url, clock=clock)

    async with app.router.lifespan_context(app):
        job = app.state.jobs.scheduler.get_job(GATE_ANSWERS_JOB)

    assert job.trigger.interval == timedelta(seconds=90)
