"""Ground truth for the suspects and the halts: a scripted fleet of 150 clusters in dev, whose
agents report over the API as simulated time goes by, taking three new platform commits in
rings of 30, the rest staying on the branch's earlier head."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.gate import GateQuery, PromotableQuery
from hub.client.schemas.suspects import SuspectsQuery, SuspectsVerdict, SuspectVerdict
from hub.gate import service as gate_service
from hub.gate.policy import Verdict
from hub.models import GateAnswer, OutboxEvent
from hub.placement import repository as placement_repository
from hub.suspects import service
from tests.conftest import MakeClient
from tests.hub.harvest import scenario
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.simulated_fleet import Fleet, prod_layout
from tests.support import FakeClock, bearer

WINDOW = timedelta(minutes=15)
RING = 30
CLUSTERS = 150
HALTING = ("dev",)


def options(source: str = "https://fleetmark.example.com") -> service.HaltOptions:
    return service.HaltOptions(halting=HALTING, window=WINDOW, min_regressions=3, source=source)


class Rings:
    """The fleet, the three new commits in the order they were made, and when the period began."""

    def __init__(self, fleet: Fleet, base: str, commits: list[str], start: datetime) -> None:
        self.fleet, self.commits, self.start = fleet, commits, start
        # What each cluster runs.
        self.running = dict.fromkeys(fleet.clusters, base)

    def ring(self, index: int) -> list[str]:
        return [f"drone-{n:03}" for n in range(index * RING, (index + 1) * RING)]

    async def apply(self, index: int, commit: str) -> None:
        for name in self.ring(index):
            self.fleet.clusters[name].run_platform(commit)
            self.running[name] = commit
        await self.fleet.report(*self.ring(index))

    async def unready(self, names: list[str], reason: str) -> None:
        for name in names:
            self.fleet.clusters[name].run_platform(
                self.running[name], ready=False, reason=reason, message="pods not ready"
            )
        await self.fleet.report(*names)


@pytest.fixture
async def rings(fleet: Fleet, clock: FakeClock) -> Rings:
    """150 drones in dev run the branch's head, Ready; three new commits are harvested."""
    base = fleet.platform_heads["dev"]
    for n in range(CLUSTERS):
        cluster = await fleet.add(f"drone-{n:03}", "drone")
        cluster.run_platform(base)
    await fleet.report()
    commits = [
        fleet.promote(f"Change {n}", {f"drone/change-{n}.yaml": f"n: {n}\n"}) for n in (1, 2, 3)
    ]
    await fleet.harvest()
    clock.advance(minutes=30)
    return Rings(fleet, base, commits, clock.now)


async def ask(session: AsyncSession, clock: FakeClock, start: datetime) -> Any:
    return await service.suspects(
        session,
        SuspectsQuery(environment="dev", since=start),
        now=clock.now,
        window=WINDOW,
        min_regressions=3,
    )


async def commit_breaking_a_tenth(rings: Rings, clock: FakeClock) -> list[str]:
    """Ring 0 takes the first commit, ring 1 the second, of which 3 clusters turn not Ready
    within minutes, ring 2 the third; the broken clusters, by name."""
    first, second, third = rings.commits
    clock.advance(minutes=5)
    await rings.apply(0, first)
    clock.advance(minutes=5)
    await rings.apply(1, second)
    clock.advance(minutes=3)
    broken = rings.ring(1)[4:7]
    await rings.unready(broken, "HealthCheckFailed")
    clock.advance(minutes=17)
    await rings.apply(2, third)
    clock.advance(minutes=20)
    return broken


async def test_a_fleet_wide_failure_across_commits_is_inconclusive(
    rings: Rings, session: AsyncSession, clock: FakeClock
) -> None:
    for index, commit in enumerate(rings.commits):
        clock.advance(minutes=3)
        await rings.apply(index, commit)
    clock.advance(minutes=3)
    # Every cluster at once, whatever it applied: the nodes, not a change.
    await rings.unready(list(rings.fleet.clusters), "NodeNotReady")
    clock.advance(minutes=20)

    answer = await ask(session, clock, rings.start)

    assert answer.verdict is SuspectsVerdict.INCONCLUSIVE
    assert {item.verdict for item in answer.items} == {SuspectVerdict.INCONCLUSIVE}
    assert {item.revision for item in answer.items} == set(rings.commits)
    assert all(item.counts.control_regressed == item.counts.control == 120 for item in answer.items)
    assert all(item.reasons[0].reason == "NodeNotReady" for item in answer.items)


async def test_what_a_cluster_ran_when_it_first_reported_is_no_change(
    rings: Rings, session: AsyncSession, clock: FakeClock
) -> None:
    first, second, third = rings.commits
    # From before the drones first reported, running the branch's earlier head: that says
    # what they ran, not that they applied it. One more comes late, not Ready on the second
    # commit from its first report on: neither applied nor regressed.
    came = rings.start - timedelta(minutes=31)
    broken = await commit_breaking_a_tenth(rings, clock)
    late = await rings.fleet.add("drone-late", "drone")
    late.run_platform(second, ready=False, reason="HealthCheckFailed", message="pods not ready")
    await rings.fleet.report("drone-late")
    clock.advance(minutes=1)

    answer = await ask(session, clock, came)

    assert [item.revision for item in answer.items] == [second, third, first]
    assert answer.items[0].counts.model_dump() == {
        "exposed": 30,
        "exposed_regressed": 3,
        "control": 121,
        "control_regressed": 0,
    }
    assert [cluster.cluster for cluster in answer.items[0].clusters] == broken


async def gate(session: AsyncSession, clock: FakeClock, commit: str, **more: Any) -> Any:
    query = GateQuery(environment="dev", commit=commit, allow_stale=True)
    return await gate_service.promotion_gate(
        session, query, now=clock.now, stale_after=timedelta(hours=1), **more
    )


async def promotable(session: AsyncSession, clock: FakeClock, **more: Any) -> Any:
    """The newest commit of dev that 30% of the clusters run, Ready and soaked."""
    query = PromotableQuery(allow_stale=True, min_converged_ratio=0.3, max_commits=10)
    return await gate_service.promotable(
        session, "dev", query, now=clock.now, stale_after=timedelta(hours=1), **more
    )


async def kept_answer(
    session: AsyncSession, clock: FakeClock, commit: str, halting: tuple[str, ...]
) -> str:
    """The gate answers job's round, judging with the halts of `halting`: the verdict kept
    for the commit in dev, which the first reason names a halt for when it fails."""
    answers = gate_service.AnswerOptions(
        soak=timedelta(minutes=10),
        stale_after=timedelta(hours=1),
        newest=3,
        source="https://fleetmark.example.com",
        halting=halting,
    )
    await gate_service.keep_answers(session, answers, now=clock.now)
    kept = (
        await session.execute(
            select(GateAnswer.verdict, GateAnswer.reasons).where(
                GateAnswer.environment == "dev", GateAnswer.revision == commit
            )
        )
    ).one()
    halted = kept.reasons[0].startswith(f"halted: platform commit {commit[:12]} is a suspect")
    assert halted == (kept.verdict == "failed")
    return str(kept.verdict)


async def events(session: AsyncSession) -> list[tuple[str, str]]:
    rows = await session.execute(
        select(OutboxEvent.type, OutboxEvent.subject).order_by(OutboxEvent.id)
    )
    return [(row.type, row.subject) for row in rows]


async def test_a_commit_breaking_a_tenth_ranks_first_and_halts_until_superseded(
    rings: Rings, session: AsyncSession, clock: FakeClock
) -> None:
    broken = await commit_breaking_a_tenth(rings, clock)
    first, second, third = rings.commits

    answer = await ask(session, clock, rings.start)

    assert answer.verdict is SuspectsVerdict.SUSPECTS
    assert [(item.revision, item.verdict) for item in answer.items] == [
        (second, SuspectVerdict.SUSPECT),
        (third, SuspectVerdict.NOT_SUSPECT),
        (first, SuspectVerdict.NOT_SUSPECT),
    ]
    top = answer.items[0]
    assert top.counts.model_dump() == {
        "exposed": 30,
        "exposed_regressed": 3,
        "control": 120,
        "control_regressed": 0,
    }
    assert [cluster.cluster for cluster in top.clusters] == broken
    assert [(reason.reason, reason.clusters) for reason in top.reasons] == [
        ("HealthCheckFailed", 3)
    ]
    assert top.score == pytest.approx((4 / 31) / (1 / 121))
    assert top.p_value < 0.01
    # The broken clusters regressed in the first commit's span, among its control group; the
    # third's span began after they did.
    assert answer.items[2].counts.control_regressed == 3
    assert answer.items[1].counts.control_regressed == 0

    before = await gate(session, clock, second, halting=HALTING)
    assert before.verdict is Verdict.FAILED
    assert before.halt is None

    kept = await service.keep_halts(session, options(), now=clock.now)

    assert (kept.started, kept.ended) == (1, 0)
    assert await events(session) == [
        ("fleetmark.suspect.found", f"suspects/dev/{second}"),
        ("fleetmark.rollout.halted", f"rollouts/dev/{second}"),
    ]
    halted = await gate(session, clock, second, halting=HALTING)
    assert halted.verdict is Verdict.FAILED
    assert halted.options.halt_on_regression is True
    assert halted.reasons[0].startswith(
        f"halted: platform commit {second[:12]} is a suspect in dev (3 of 30 (10%) exposed"
    )
    assert halted.halt is not None
    assert [c.cluster for c in halted.halt.evidence.clusters] == broken
    # The setting off: the gate answers as it always did.
    unset = await gate(session, clock, second)
    assert unset.halt is None
    assert unset.options.halt_on_regression is False
    assert unset.reasons == before.reasons
    # Other commits are not halted; a second round halts nothing again and says nothing again.
    assert (await gate(session, clock, first, halting=HALTING)).halt is None
    again = await service.keep_halts(session, options(), now=clock.now)
    assert (again.started, again.ended, again.events) == (0, 0, 0)
    recommended = await service.recommendations(
        session, now=clock.now, soak=timedelta(0), halting=HALTING
    )
    assert [(h.revision, h.environment) for h in recommended.halts] == [(second, "dev")]

    # The broken ring moves on to the third commit: it supersedes the halted one.
    clock.advance(minutes=1)
    await rings.apply(1, third)
    clock.advance(minutes=1)
    ended = await service.keep_halts(session, options(), now=clock.now)

    assert (ended.started, ended.ended) == (0, 1)
    assert (await events(session))[-1] == ("fleetmark.rollout.unhalted", f"rollouts/dev/{second}")
    after = await gate(session, clock, second, halting=HALTING)
    assert after.halt is None
    cleared = await service.recommendations(
        session, now=clock.now, soak=timedelta(0), halting=HALTING
    )
    assert cleared.halts == []


async def test_an_admin_clears_a_halt_over_the_api(
    rings: Rings,
    session: AsyncSession,
    clock: FakeClock,
    make_client: MakeClient,
    admin_token: str,
    read_token: str,
) -> None:
    client = await make_client(halt_on_regression=list(HALTING))
    await commit_breaking_a_tenth(rings, clock)
    second = rings.commits[1]
    await service.keep_halts(session, options(), now=clock.now)
    # As the job's round does.
    await session.commit()
    # The broken clusters recover: 60 of 150 run the halted commit, Ready and soaked.
    for name in rings.ring(1)[4:7]:
        rings.fleet.clusters[name].run_platform(second)
    await rings.fleet.report(*rings.ring(1)[4:7])
    clock.advance(minutes=11)
    assert (await promotable(session, clock)).commit == second
    walked = await promotable(session, clock, halting=HALTING)
    assert walked.commit == rings.commits[0]
    assert walked.gate.verdict is Verdict.PASSED
    assert walked.reason.startswith(
        f"{rings.commits[0][:12]} is the newest platform commit of dev that passes "
        f"(3 examined); halted: platform commit {second[:12]} is a suspect in dev"
    )
    # The kept answers judge with the halts too: the halted commit fails, and says why.
    assert await kept_answer(session, clock, second, ()) == "pending"
    assert await kept_answer(session, clock, second, HALTING) == "failed"
    assert (await events(session))[-1] == ("fleetmark.gate.failed", f"gates/dev/{second}")
    listed = await client.get("/api/v1/recommendations", headers=bearer(read_token))
    assert listed.status_code == 200, listed.text
    [halt] = listed.json()["halts"]
    assert halt["revision"] == second
    assert halt["ended_at"] is None
    url = f"/api/v1/halts/{halt['id']}/clear"
    body = {"by": "alice", "reason": "a node pool, not the commit"}

    refused = await client.post(url, json=body, headers=bearer(read_token))
    assert refused.status_code == 403
    cleared = await client.post(url, json=body, headers=bearer(admin_token))

    assert cleared.status_code == 200, cleared.text
    assert cleared.json() | {"evidence": None} == halt | {
        "ended_at": clock.now.isoformat().replace("+00:00", "Z"),
        "ended_how": "cleared",
        "cleared_by": "alice",
        "clear_reason": "a node pool, not the commit",
        "evidence": None,
    }
    assert (await gate(session, clock, second, halting=HALTING)).halt is None
    assert (await promotable(session, clock, halting=HALTING)).commit == second
    assert (await events(session))[-1] == ("fleetmark.rollout.unhalted", f"rollouts/dev/{second}")
    # Cleared once: not halted again by the next round, nor cleared twice.
    assert (await service.keep_halts(session, options(), now=clock.now)).started == 0
    twice = await client.post(url, json=body, headers=bearer(admin_token))
    assert twice.status_code == 409
    assert twice.json()["error"] == "halt_ended"
    unknown = await client.post(
        "/api/v1/halts/999999/clear", json=body, headers=bearer(admin_token)
    )
    assert unknown.status_code == 404
    assert unknown.json()["detail"] == "no halt has id 999999"


async def test_a_workload_version_is_judged_by_the_version_its_commits_carry(
    fleet: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    old = fleet.app_heads["dev"]
    for n in range(6):
        cluster = await fleet.add(f"drone-{n:03}", "drone")
        cluster.run_platform(fleet.platform_heads["dev"])
        cluster.run_app("functional-test", old)
    # The workload is placed on this one too, which has yet to run it: a control cluster.
    placed = await fleet.add("drone-006", "drone")
    placed.run_platform(fleet.platform_heads["dev"])
    await fleet.report()
    new = fleet.release("1.1.0")
    await fleet.harvest()
    clock.advance(minutes=30)
    start = clock.now
    clock.advance(minutes=5)
    exposed = [f"drone-{n:03}" for n in range(3)]
    for name in exposed:
        fleet.clusters[name].run_app("functional-test", new)
    await fleet.report(*exposed)
    clock.advance(minutes=3)
    for name in exposed[:2]:
        fleet.clusters[name].run_app("functional-test", new, ready=False, reason="CrashLoopBackOff")
    await fleet.report(*exposed[:2])
    clock.advance(minutes=20)

    answer = await service.suspects(
        session,
        SuspectsQuery(environment="dev", workload=WORKLOAD, since=start),
        now=clock.now,
        window=WINDOW,
        min_regressions=3,
    )

    [item] = answer.items
    assert (item.kind, item.workload, item.revision) == ("workload_version", WORKLOAD, "1.1.0")
    assert item.counts.model_dump() == {
        "exposed": 3,
        "exposed_regressed": 2,
        "control": 4,
        "control_regressed": 0,
    }
    assert [c.cluster for c in item.clusters] == exposed[:2]
    assert item.verdict is SuspectVerdict.NOT_SUSPECT


async def test_a_halted_version_fails_its_gate_there_and_later_not_earlier(
    unharvested_fleet: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    fleet = unharvested_fleet
    config = {kind: scenario.CONFIG[("stage", kind)] for kind in ("drone", "large")}
    fleet.open_environment("prod", prod_layout(fleet, config))
    await fleet.start()
    old = fleet.app_heads["stage"]
    for n in range(12):
        cluster = await fleet.add(f"drone-{n:03}", "drone", "stage")
        cluster.run_platform(fleet.platform_heads["stage"])
        cluster.run_app("uat-test", old)
    await fleet.report()
    new = {branch: fleet.release("1.1.0", branch) for branch in ("dev", "stage", "prod")}
    await fleet.harvest()
    clock.advance(minutes=30)
    # 3 of the 12 clusters in stage take 1.1.0, and every one of them turns not Ready.
    exposed = [f"drone-{n:03}" for n in range(3)]
    clock.advance(minutes=5)
    for name in exposed:
        fleet.clusters[name].run_app("uat-test", new["stage"])
    await fleet.report(*exposed)
    clock.advance(minutes=3)
    for name in exposed:
        fleet.clusters[name].run_app(
            "uat-test", new["stage"], ready=False, reason="CrashLoopBackOff"
        )
    await fleet.report(*exposed)
    clock.advance(minutes=20)
    # The promotion order, as the repositories file declares it.
    await placement_repository.order_environments(session, ["dev", "stage", "prod"])
    halting = ("stage",)
    halts = service.HaltOptions(
        halting=halting, window=WINDOW, min_regressions=3, source="https://fleetmark.example.com"
    )

    assert (await service.keep_halts(session, halts, now=clock.now)).started == 1

    async def version_gate(environment: str) -> Any:
        query = GateQuery(environment=environment, workload=WORKLOAD, version="1.1.0")
        return await gate_service.promotion_gate(
            session, query, now=clock.now, stale_after=timedelta(hours=1), halting=halting
        )

    dev, stage, prod = [await version_gate(name) for name in ("dev", "stage", "prod")]
    assert dev.halt is None
    assert dev.verdict is not Verdict.FAILED
    for later in (stage, prod):
        assert later.verdict is Verdict.FAILED
        assert later.halt is not None
        assert (later.halt.environment, later.halt.revision) == ("stage", "1.1.0")
        assert later.reasons[0].startswith(f"halted: {WORKLOAD} 1.1.0 is a suspect in stage")
