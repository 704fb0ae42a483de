"""Reports that arrive together share one ingest statement, and each still gets its own answer.

The app here runs its statements on the test session's one connection, taken in turns as from
a pool of one, so the reports that arrive while a statement runs queue up and go out together.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest
from psycopg_pool import PoolTimeout
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.app import create_app
from hub.clusters import repository as clusters
from hub.database import StatementConnection
from hub.harvest.schemas import RepositoriesFile
from hub.harvest.service import sync_repositories_file
from hub.ingest import batcher, service
from hub.ingest.batcher import ReportBatcher
from hub.ingest.schemas import Report, ReportReply
from tests.conftest import (
    TOKEN_SECRET,
    MakeAgent,
    SessionStatements,
    hub_settings,
    use_test_session,
)
from tests.support import SHA_A, SHA_B, Agent, FakeClock, Store, kustomization
from tests.support import report as report_body

V1 = f"dev@sha1:{SHA_A}"
V2 = f"dev@sha1:{SHA_B}"


class OneConnection(SessionStatements):
    """The test session's connection as a pool of one: statements take turns on it, and a test
    can hold it, as a long statement would, to make reports wait."""

    def __init__(self, session: AsyncSession) -> None:
        super().__init__(session)
        self.turn = asyncio.Lock()
        self.statements = 0
        self.waiting = 0
        self.queued = asyncio.Condition()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[StatementConnection]:
        async with self.queued:
            self.waiting += 1
            self.queued.notify_all()
        try:
            await self.turn.acquire()
        finally:
            self.waiting -= 1
        try:
            self.statements += 1
            async with super().connection() as connection:
                yield connection
        finally:
            self.turn.release()

    async def until_waiting(self, count: int) -> None:
        """Let the loop run until `count` statements wait for the connection."""
        async with asyncio.timeout(5), self.queued:
            await self.queued.wait_for(lambda: self.waiting >= count)


@pytest.fixture
def statements(session: AsyncSession) -> OneConnection:
    return OneConnection(session)


@pytest.fixture
def reports(statements: OneConnection) -> ReportBatcher:
    """The batcher the app builds, on the shared connection (FLEETMARK_DATABASE_POOL_TIMEOUT
    as by default)."""
    return ReportBatcher(statements, busy_timeout=10)


@pytest.fixture
async def client(
    session: AsyncSession,
    clock: FakeClock,
    database_url: str,
    statements: OneConnection,
    reports: ReportBatcher,
) -> AsyncIterator[httpx.AsyncClient]:
    """The app on the test session, every request's statements on one shared connection; an
    unexpected error is answered with 500 as a server would, not raised into the test. First
    reports place clusters (FLEETMARK_AGENT_PLACEMENT=first-report), so that batches place."""
    app = create_app(hub_settings(agent_placement="first-report"), database_url, clock=clock)
    async with app.router.lifespan_context(app):
        use_test_session(app, session)
        app.state.statements = statements
        app.state.report_batcher = reports
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://hub.test") as client:
            yield client


async def make_agents(make_agent: MakeAgent, count: int) -> list[Agent]:
    return [await make_agent(f"drone-{index:02d}") for index in range(count)]


async def test_concurrent_reports_share_statements_and_each_is_applied_once_in_order(
    make_agent: MakeAgent, store: Store, clock: FakeClock, statements: OneConnection
) -> None:
    agents = await make_agents(make_agent, 12)
    busy, repeated = agents[0], agents[5]
    t1, t2, t3 = (clock.now - timedelta(seconds=seconds) for seconds in (30, 20, 10))
    both = [kustomization("app-a", V1), kustomization("app-b", V1)]
    sends = [
        agent.send(both, sequence=1, observed_at=t1, full_snapshot=True) for agent in agents
    ] + [
        # The busy cluster's next reports, one of them twice, queued behind its first one.
        busy.send([kustomization("app-a", V2)], sequence=2, observed_at=t2, full_snapshot=True),
        busy.send([kustomization("app-a", V2)], sequence=2, observed_at=t2, full_snapshot=True),
        repeated.send(both, sequence=1, observed_at=t1, full_snapshot=True),
        busy.send(
            [kustomization("app-a", V2), kustomization("app-b", V1)],
            sequence=3,
            observed_at=t3,
            full_snapshot=True,
        ),
    ]

    responses = await asyncio.gather(*sends)

    assert [response.status_code for response in responses] == [200] * len(sends)
    replies = [response.json() for response in responses]
    fresh = {"accepted": 2, "changed": 2, "duplicate": False, "warnings": []}
    duplicate = {"accepted": 0, "changed": 0, "duplicate": True, "warnings": []}
    assert replies[:12] == [fresh] * 12
    assert replies[12:] == [
        {"accepted": 1, "changed": 2, "duplicate": False, "warnings": []},
        duplicate,
        duplicate,
        {"accepted": 2, "changed": 1, "duplicate": False, "warnings": []},
    ]
    # Reports of different clusters went out together; those of one cluster one by one.
    assert 4 <= statements.statements < len(sends)

    for agent in agents[1:]:
        transitions = await store.transitions(agent.cluster)
        assert [(t["name"], t["applied_revision"]) for t in transitions] == [
            ("app-a", V1),
            ("app-b", V1),
        ], agent.cluster
        assert (await store.agent_sessions(agent.cluster))["boot-1"]["report_count"] == 1
    transitions = await store.transitions(busy.cluster)
    assert [
        (t["observed_at"], t["name"], t["applied_revision"], t["removed"]) for t in transitions
    ] == [
        (t1, "app-a", V1, False),
        (t1, "app-b", V1, False),
        (t2, "app-a", V2, False),
        (t2, "app-b", V1, True),
        (t3, "app-b", V1, False),
    ]
    objects = await store.objects(busy.cluster)
    assert {
        name: (row["applied_revision"], row["removed_at"]) for name, row in objects.items()
    } == {
        "app-a": (V2, None),
        "app-b": (V1, None),
    }
    session = (await store.agent_sessions(busy.cluster))["boot-1"]
    assert (session["max_sequence"], session["report_count"]) == (3, 3)
    assert [row["report_count"] for row in await store.heartbeats(busy.cluster)] == [3]


async def test_refused_tokens_in_a_batch_are_answered_alone_and_the_others_land(
    make_agent: MakeAgent, store: Store, clock: FakeClock
) -> None:
    first, second, victim = await make_agents(make_agent, 3)
    intruder = Agent(client=first.client, clock=clock, cluster=victim.cluster, token=first.token)
    stranger = Agent(
        client=first.client, clock=clock, cluster=second.cluster, token="fmc_never-given"
    )

    responses = await asyncio.gather(
        intruder.send([kustomization("planted")]),
        first.send([kustomization("app")]),
        stranger.send([kustomization("planted")]),
        second.send([kustomization("app")]),
    )

    assert [response.status_code for response in responses] == [403, 200, 401, 200]
    assert responses[0].json()["error"] == "cluster_mismatch"
    assert responses[2].json()["error"] == "not_authenticated"
    for agent in (first, second):
        assert list(await store.objects(agent.cluster)) == ["app"]
        assert (await store.agent_sessions(agent.cluster))["boot-1"]["report_count"] == 1
    assert await store.objects(victim.cluster) == {}
    assert await store.agent_sessions(victim.cluster) == {}


async def test_a_report_the_store_refuses_fails_alone(
    make_agent: MakeAgent, session: AsyncSession, store: Store, statements: OneConnection
) -> None:
    agents = await make_agents(make_agent, 4)
    faulty = agents[2]
    # A rule of the store that one report breaks (rolled back with the test's transaction).
    await session.execute(
        text("ALTER TABLE object_state ADD CONSTRAINT no_poison CHECK (name <> 'poison')")
    )
    await session.commit()

    responses = await asyncio.gather(
        *(
            agent.send([kustomization("app"), kustomization("poison" if agent is faulty else "db")])
            for agent in agents
        )
    )

    assert [response.status_code for response in responses] == [200, 200, 500, 200]
    # One statement for the batch, then one per report when the store refused it.
    assert statements.statements == 1 + len(agents)
    for agent in agents:
        if agent is not faulty:
            assert sorted(await store.objects(agent.cluster)) == ["app", "db"]
    assert await store.objects(faulty.cluster) == {}
    # Nothing of the refused report was kept, so its sequence is not taken for a duplicate.
    retried = await faulty.send_ok([kustomization("app")], sequence=faulty.sequence)
    assert retried["duplicate"] is False


async def test_clusters_placed_together_share_the_environment_and_cluster_types_they_name(
    make_agent: MakeAgent, session: AsyncSession, statements: OneConnection
) -> None:
    await sync_repositories_file(session, RepositoriesFile(environments=["staging"]))
    agents = await make_agents(make_agent, 3)
    claims = [("staging", "drone"), ("staging", "drone"), ("staging", "large")]

    responses = await asyncio.gather(
        *(
            agent.send([kustomization("app")], environment=environment, cluster_type=kind)
            for agent, (environment, kind) in zip(agents, claims, strict=True)
        )
    )

    assert [response.json()["warnings"] for response in responses] == [[], [], []]
    assert statements.statements == 1
    placed = [await clusters.find_by_name(session, agent.cluster) for agent in agents]
    assert [(cluster.environment, cluster.cluster_type) for cluster in placed if cluster] == claims
    types = await session.execute(
        text(
            "SELECT ct.name, count(*) FROM cluster c"
            " JOIN cluster_type ct ON ct.id = c.cluster_type_id GROUP BY ct.name ORDER BY ct.name"
        )
    )
    assert [tuple(row) for row in types] == [("drone", 2), ("large", 1)]


def parsed(agent: Agent, name: str) -> Report:
    body = report_body(
        agent.cluster, sequence=1, observed_at=agent.clock.now, objects=[kustomization(name)]
    )
    return Report.model_validate(body)


async def ingest(reports: ReportBatcher, agent: Agent, name: str) -> ReportReply:
    return await service.ingest(
        reports,
        agent.token,
        parsed(agent, name),
        received_at=agent.clock.now,
        max_clock_skew=timedelta(minutes=5),
        max_backdate=timedelta(days=1),
        token_secret=TOKEN_SECRET,
        agent_placement=False,
    )


async def test_a_caller_that_gives_up_while_queued_takes_nothing_from_the_others(
    make_agent: MakeAgent, store: Store, statements: OneConnection, reports: ReportBatcher
) -> None:
    agents = await make_agents(make_agent, 4)
    running: list[asyncio.Task[Any]] = []
    async with statements.turn:
        # The first two reports each go out in a statement of their own that waits...
        for waiting, agent in enumerate(agents[:2], start=1):
            running.append(asyncio.create_task(ingest(reports, agent, "app")))
            await statements.until_waiting(waiting)
        # ...so the next two queue, and the caller of one of them gives up.
        running += [asyncio.create_task(ingest(reports, agent, "app")) for agent in agents[2:]]
        await asyncio.sleep(0)
        running[2].cancel()

    replies = await asyncio.gather(*running, return_exceptions=True)

    assert isinstance(replies[2], asyncio.CancelledError)
    for index in (0, 1, 3):
        assert replies[index] == ReportReply(accepted=1, changed=1, duplicate=False)
        assert list(await store.objects(agents[index].cluster)) == ["app"]
    assert await store.agent_sessions(agents[2].cluster) == {}


async def test_a_report_no_statement_takes_in_time_is_told_the_store_is_busy(
    make_agent: MakeAgent, store: Store, statements: OneConnection
) -> None:
    agents = await make_agents(make_agent, 3)
    # The first two reports are taken by a statement at once, before their time is up.
    reports = ReportBatcher(statements, busy_timeout=0.05)
    async with statements.turn:
        running = []
        for waiting, agent in enumerate(agents[:2], start=1):
            running.append(asyncio.create_task(ingest(reports, agent, "app")))
            await statements.until_waiting(waiting)
        with pytest.raises(PoolTimeout):
            async with asyncio.timeout(5):
                await ingest(reports, agents[2], "app")

    assert [reply.accepted for reply in await asyncio.gather(*running)] == [1, 1]
    assert await store.agent_sessions(agents[2].cluster) == {}


async def test_reports_arriving_while_the_hub_is_busy_wait_for_the_pace_and_go_together(
    make_agent: MakeAgent,
    statements: OneConnection,
    reports: ReportBatcher,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A pause that only a full batch ends, so that the test does not depend on timing.
    monkeypatch.setattr(batcher, "BATCH_PACE", 3600.0)
    monkeypatch.setattr(batcher, "MAX_BATCH_REPORTS", 3)
    agents = await make_agents(make_agent, 4)

    # After a quiet spell, a report goes out at once...
    assert (await ingest(reports, agents[0], "app")).accepted == 1
    assert statements.statements == 1
    # ...the next one waits for the pace...
    second = asyncio.create_task(ingest(reports, agents[1], "app"))
    for _ in range(10):
        await asyncio.sleep(0)
    assert statements.statements == 1
    # ...and goes with those that arrive meanwhile, as soon as they make a full batch.
    async with asyncio.timeout(5):
        replies = await asyncio.gather(
            second, *(ingest(reports, agent, "app") for agent in agents[2:])
        )

    assert [reply.accepted for reply in replies] == [1, 1, 1]
    assert statements.statements == 2
