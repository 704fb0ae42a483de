"""The dashboards on a fleet busy enough that their tables are cut, built once for the module in
a store of its own (the hub's jobs commit, as they do in production), its panels run as
Grafana runs them as the read-only role: what a cut keeps (the most severe rows, prod before
dev), the counts beside the tables, the fleet's health per environment and hour as the rollup
job sampled it, what changed aggregated per rollout, and how fresh the jobs' results are.

The fleet, over the last two hours and more (environments dev, stage and prod declared in that
order):

- six clusters in prod and six in dev with 100 reconcilers failing each (prod's from the
  second step on), and their root reconciler; a prod and a dev cluster with reconcilers
  suspended; a stage cluster silent since the first step; 5 prod and 495 dev clusters that
  never reported;
- the roots of prod's seven reporting clusters move from commit A to B at the second step,
  dev's at the third;
- the rollup job samples the fleet's health at each step: two samples in the first hour, none
  in the next, one now.
"""

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from hub import store
from hub.app import create_app
from hub.background import repository as job_runs
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterRegistration
from hub.database import create_sessionmaker, write_session
from hub.dora.tasks import DORA_JOB
from hub.drift.service import evaluate_drift
from hub.drift.tasks import DRIFT_JOB
from hub.envdiff.tasks import ENV_DIFF_JOB
from hub.harvest.schemas import RepositoriesFile
from hub.harvest.service import sync_repositories_file
from hub.rollouts.tasks import ROLLOUTS_JOB
from tests.conftest import TOKEN_SECRET, DatabaseServer, hub_settings
from tests.dashboards.conftest import PanelQuery, ReadOnly
from tests.dashboards.test_panels import PANELS, times
from tests.hub.drifting import ANNOUNCING
from tests.support import SHA_A, SHA_B, Agent, FakeClock, kustomization

FAILING = 100
NEVER = {"prod": 5, "dev": 495}
# The rollup job's staleness threshold for its samples.
STALE_AFTER = timedelta(minutes=30)
# The hub's jobs off while the fleet is built: the test runs them.
QUIET = timedelta(days=1)


def _root(sha: str) -> dict[str, Any]:
    return kustomization("flux-system", f"main@sha1:{sha}")


def _failing(count: int, ready: bool) -> list[dict[str, Any]]:
    return [
        kustomization(
            f"app-{number:03d}",
            None,
            attempted_revision=None,
            ready=ready,
            reason=None if ready else "BuildFailed",
            message=None if ready else "kustomize build failed",
        )
        for number in range(count)
    ]


def _suspended(count: int) -> list[dict[str, Any]]:
    return [kustomization(f"paused-{number}", None, suspended=True) for number in range(count)]


@dataclass
class Busy:
    url: str
    engine: AsyncEngine
    role: str
    timescaledb: bool
    # The hour of the first step, and when the rollup job sampled the fleet.
    first_hour: datetime
    samples: Sequence[datetime]

    @property
    def now(self) -> datetime:
        return self.samples[-1]


async def _build(url: str, engine: AsyncEngine, role: str) -> Busy:
    sessions = create_sessionmaker(engine)
    now = datetime.now(UTC)
    first_hour = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    clock = FakeClock(first_hour)
    settings = hub_settings(
        drift_interval=QUIET,
        env_diff_interval=QUIET,
        dora_interval=QUIET,
        gate_answers_interval=QUIET,
    )
    clusters = {
        **{f"prod-fail-{n:02d}": ("prod", "large") for n in range(1, 7)},
        **{f"dev-fail-{n:02d}": ("dev", "large") for n in range(1, 7)},
        "prod-ok-01": ("prod", "drone"),
        "dev-ok-01": ("dev", "drone"),
        "stage-silent-01": ("stage", "drone"),
    }
    never = {
        f"{environment}-never-{n:03d}": (environment, "drone")
        for environment, count in NEVER.items()
        for n in range(1, count + 1)
    }
    tokens = {}
    async with write_session(sessions) as session:
        await sync_repositories_file(
            session, RepositoriesFile(environments=["dev", "stage", "prod"])
        )
        for name, (environment, cluster_type) in (clusters | never).items():
            registration = ClusterRegistration(
                name=name, environment=environment, cluster_type=cluster_type
            )
            registered = await cluster_service.register(
                session, registration, token_secret=TOKEN_SECRET
            )
            tokens[name] = registered.token
        await session.execute(text(f'CREATE ROLE "{role}" NOLOGIN'))
        await store.grant_readonly(session, role)
        timescaledb = (await store.backend(session)).timescaledb is not None

    app = create_app(settings, url, clock=clock)
    transport = httpx.ASGITransport(app=app)
    samples = []
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://hub.test") as client,
    ):
        agents = {name: Agent(client, clock, name, tokens[name]) for name in clusters}

        async def step(at: datetime, reports: dict[str, list[dict[str, Any]]]) -> None:
            clock.now = at
            for name, objects in reports.items():
                await agents[name].send_ok(objects, full_snapshot=True)
            async with write_session(sessions) as session:
                await evaluate_drift(
                    session, now=at, stale_after=timedelta(minutes=10), announcing=ANNOUNCING
                )

        async def sample(at: datetime) -> None:
            samples.append(at)
            assert await store.refresh_rollups(sessions, at, STALE_AFTER)

        def fleet(prod: str, dev: str, prod_failing: bool) -> dict[str, list[dict[str, Any]]]:
            return {
                **{
                    f"prod-fail-{n:02d}": [_root(prod), *_failing(FAILING, not prod_failing)]
                    for n in range(1, 7)
                },
                **{
                    f"dev-fail-{n:02d}": [_root(dev), *_failing(FAILING, False)]
                    for n in range(1, 7)
                },
                "prod-ok-01": [_root(prod), *_suspended(2)],
                "dev-ok-01": [_root(dev), *_suspended(1)],
            }

        await step(
            first_hour + timedelta(minutes=5),
            fleet(SHA_A, SHA_A, prod_failing=False) | {"stage-silent-01": [_root(SHA_A)]},
        )
        await sample(first_hour + timedelta(minutes=10))
        await step(first_hour + timedelta(minutes=15), fleet(SHA_B, SHA_A, prod_failing=True))
        await sample(first_hour + timedelta(minutes=20))
        now = datetime.now(UTC)
        await step(now, fleet(SHA_B, SHA_B, prod_failing=True))
        await sample(now)
    return Busy(url, engine, role, timescaledb, first_hour, samples)


@pytest.fixture(scope="module")
async def busy(database_server: DatabaseServer) -> AsyncIterator[Busy]:
    role = f"grafana_busy_{uuid.uuid4().hex[:12]}"
    with database_server.migrated_database() as url:
        engine = create_async_engine(url)
        try:
            yield await _build(url, engine, role)
        finally:
            # Roles are the server's: dropped with what it was granted, before the database.
            async with engine.begin() as connection:
                made = text("SELECT 1 FROM pg_roles WHERE rolname = :role")
                if await connection.scalar(made, {"role": role}):
                    await connection.execute(text(f'DROP OWNED BY "{role}"'))
                    await connection.execute(text(f'DROP ROLE "{role}"'))
            await engine.dispose()


@pytest.fixture
async def busy_session(busy: Busy) -> AsyncIterator[AsyncSession]:
    """A transaction of the test's own on the busy store, rolled back after it."""
    async with busy.engine.connect() as connection:
        transaction = await connection.begin()
        session = AsyncSession(bind=connection, join_transaction_mode="create_savepoint")
        try:
            yield session
        finally:
            await session.close()
            await transaction.rollback()


@pytest.fixture
def grafana(busy: Busy, busy_session: AsyncSession) -> ReadOnly:
    return ReadOnly(busy_session, busy.role, busy.timescaledb)


async def shown(
    grafana: ReadOnly, busy: Busy, key: str, **chosen: list[str]
) -> list[dict[str, Any]]:
    """The rows panel `key` shows for the last day, the variables at "All" but `chosen`; on
    TimescaleDB the same with `$__timeGroup` as time_bucket."""
    query: PanelQuery = PANELS[key]
    variables = await grafana.variables(query.dashboard, chosen)
    start, end = busy.now - timedelta(days=1), busy.now + timedelta(hours=1)
    rows = await grafana.panel(query, variables, start, end)
    if grafana.timescaledb:
        bucketed = await grafana.panel(query, variables, start, end, True)
        series = rows and "time" in rows[0]
        assert (times(bucketed) == times(rows)) if series else (bucketed == rows), key
    return rows


async def test_a_cut_keeps_the_most_severe_clusters_prods_first(
    grafana: ReadOnly, busy: Busy
) -> None:
    attention = await shown(grafana, busy, "fleetmark-fleet: Clusters that need attention")
    [counted] = await shown(grafana, busy, "fleetmark-fleet: Need attention")

    # 12 failing, 1 stale, 500 never reported: 513, of which the table shows 500.
    assert counted["Need attention"] == 513
    assert len(attention) == 500
    states = [(row["State"], row["Environment"]) for row in attention]
    assert states[:12] == [("failing", "prod")] * 6 + [("failing", "dev")] * 6
    assert states[12] == ("stale", "stage")
    assert states[13:18] == [("never reported", "prod")] * 5
    # What the cut leaves out: 13 of dev's clusters that never reported, the least pressing.
    assert states[18:] == [("never reported", "dev")] * 482


async def test_a_cut_of_drifted_keeps_prods_failures_first(grafana: ReadOnly, busy: Busy) -> None:
    drifted = await shown(grafana, busy, "fleetmark-drift: Drifted")
    [counted] = await shown(grafana, busy, "fleetmark-drift: Drifted rows")
    [reasons] = await shown(grafana, busy, "fleetmark-drift: Drift by reason")
    stage = await shown(grafana, busy, "fleetmark-drift: Drifted", environment=["stage"])

    # 1,200 failing objects, the silent cluster's object and 500 clusters never reported.
    assert counted["Rows"] == 1701
    assert len(drifted) == 1000
    shown_rows = [(row["Reasons"], row["Environment"]) for row in drifted]
    assert shown_rows == [("failing", "prod")] * 600 + [("failing", "dev")] * 400
    assert {name: value for name, value in reasons.items() if value} == {
        "failing": 1200,
        "stale": 501,
    }
    assert [(row["Cluster"], row["Reasons"]) for row in stage] == [("stage-silent-01", "stale")]


async def test_suspended_reconcilers_the_latest_environment_first(
    grafana: ReadOnly, busy: Busy
) -> None:
    suspended = await shown(grafana, busy, "fleetmark-fleet: Suspended reconcilers")
    [counted] = await shown(grafana, busy, "fleetmark-fleet: Suspended")

    assert [(row["Cluster"], row["Object"]) for row in suspended] == [
        ("prod-ok-01", "Kustomization/flux-system/paused-0"),
        ("prod-ok-01", "Kustomization/flux-system/paused-1"),
        ("dev-ok-01", "Kustomization/flux-system/paused-0"),
    ]
    assert counted["Suspended"] == 3


async def test_cluster_detail_opens_on_the_most_severe_cluster(
    grafana: ReadOnly, busy: Busy
) -> None:
    dashboard = PANELS["fleetmark-cluster: Cluster"].dashboard
    variables = await grafana.variables(dashboard)
    [cluster] = await shown(grafana, busy, "fleetmark-cluster: Cluster")
    objects = await shown(grafana, busy, "fleetmark-cluster: Objects")
    [counted] = await shown(grafana, busy, "fleetmark-cluster: All objects")

    options = variables["cluster"].options
    assert options[:13] == [
        *(f"prod-fail-{n:02d}" for n in range(1, 7)),
        *(f"dev-fail-{n:02d}" for n in range(1, 7)),
        "stage-silent-01",
    ]
    assert options[-2:] == ["prod-ok-01", "dev-ok-01"]
    assert len(options) == 515
    assert cluster["Cluster"] == "prod-fail-01"
    assert [row["State"] for row in objects] == ["failing"] * FAILING + ["ready"]
    assert counted["Objects"] == FAILING + 1


async def test_what_changed_is_a_row_per_rollout(grafana: ReadOnly, busy: Busy) -> None:
    changed = await shown(grafana, busy, "fleetmark-history: What changed when")
    [counted] = await shown(grafana, busy, "fleetmark-history: Changed")
    one = await shown(grafana, busy, "fleetmark-history: What changed when", cluster=["prod-ok-01"])
    rolled_up = await grafana.session.scalar(
        text("SELECT count(*) FROM deployment_hourly_rollup WHERE hour = :hour"),
        {"hour": busy.first_hour},
    )

    a, b = SHA_A[:12], SHA_B[:12]
    first = busy.first_hour + timedelta(minutes=5)
    assert [
        (
            row["Last change"],
            row["Environment"],
            row["Workload"],
            row["From"],
            row["To"],
            row["Clusters"],
            row["Changes"],
        )
        for row in changed
    ] == [
        # Now: dev's seven clusters, from the history since the rollup's last hour.
        (busy.now, "dev", "flux-system", a, b, 7, 7),
        # Prod's rollout, from the rollup: one row for seven clusters.
        (first + timedelta(minutes=10), "prod", "flux-system", a, b, 7, 7),
        # The first commit everywhere, the latest environment first.
        (first, "prod", "flux-system", None, a, 7, 7),
        (first, "stage", "flux-system", None, a, 1, 1),
        (first, "dev", "flux-system", None, a, 7, 7),
    ]
    assert rolled_up
    assert (counted["Rows"], counted["Changes"]) == (5, 29)
    assert [(row["From"], row["To"], row["Clusters"]) for row in one] == [(a, b, 1), (None, a, 1)]


async def test_fleet_health_per_environment_and_hour(grafana: ReadOnly, busy: Busy) -> None:
    failing = times(await shown(grafana, busy, "fleetmark-fleet: Failing clusters"))
    drifted = times(await shown(grafana, busy, "fleetmark-fleet: Drifted clusters"))
    stale = times(await shown(grafana, busy, "fleetmark-fleet: Stale clusters"))
    prod = times(
        await shown(grafana, busy, "fleetmark-fleet: Failing clusters", environment=["prod"])
    )

    first, now = (
        busy.first_hour.timestamp(),
        busy.now.replace(minute=0, second=0, microsecond=0).timestamp(),
    )
    # The first hour: dev's six failing at both samples, prod's at the second only; none
    # sampled in the hour after; now both. Stale: never reported, and stage's silent cluster
    # now (sampled 30 minutes on).
    assert failing == [
        (first, "dev", 6),
        (first, "prod", 3),
        (first, "stage", 0),
        (now, "dev", 6),
        (now, "prod", 6),
        (now, "stage", 0),
    ]
    assert drifted == failing
    assert stale == [
        (first, "dev", 495),
        (first, "prod", 5),
        (first, "stage", 0),
        (now, "dev", 495),
        (now, "prod", 5),
        (now, "stage", 1),
    ]
    assert prod == [row for row in failing if row[1] == "prod"]


async def test_every_dashboard_says_when_the_jobs_last_ran(
    grafana: ReadOnly, busy_session: AsyncSession
) -> None:
    now = await busy_session.scalar(text("SELECT now()"))
    assert isinstance(now, datetime)
    for job, outcome, age in (
        (DRIFT_JOB, "succeeded", 120),
        (ENV_DIFF_JOB, "succeeded", 30),
        (ENV_DIFF_JOB, "failed", 10),
        (DORA_JOB, "succeeded", 300),
        (ROLLOUTS_JOB, "succeeded", 60),
    ):
        finished = now - timedelta(seconds=age)
        await job_runs.record_run(
            busy_session,
            job=job,
            started_at=finished - timedelta(seconds=5),
            finished_at=finished,
            outcome=outcome,
            error=None,
        )
    lines = [query for query in PANELS.values() if query.panel.title == "Data as of"]

    assert len(lines) == len({query.dashboard.uid for query in PANELS.values()})
    for query in lines:
        variables = await grafana.variables(query.dashboard)
        [ages] = await grafana.panel(query, variables, now - timedelta(days=1), now)
        # A failed round does not make the data fresher; a job that never ran has no age.
        assert ages == {
            "Drift": 120,
            "Environment diff": 30,
            "Gate answers": None,
            "DORA": 300,
            "Rollouts": 60,
            "Rollups": None,
        }
