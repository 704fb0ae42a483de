"""The env diff job's refreshes read again what changed since the last one: the clusters
reports wrote, clusters placed elsewhere or decommissioned; every cluster once the harvest moved
a branch, or the last full pass is old. Each test ends by refreshing from scratch, which sums
up what the increments did, and with a periodic full pass, which finds nothing new."""

import json
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.background import pacing
from hub.clusters import service as cluster_service
from hub.clusters.schemas import ClusterPlacement
from hub.envdiff import service, tasks
from hub.placement import repository as placement_repository
from tests.hub.drifting import STALE_AFTER
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, past_the_overlap

# deployed_version without when it was refreshed, and what each cluster runs.
SUMMARY = {
    "deployed_version": "SELECT to_jsonb(t) - 'refreshed_at' FROM deployed_version t",
    "deployed_cluster": "SELECT to_jsonb(t) FROM deployed_cluster t",
}


async def refresh(session: AsyncSession, clock: FakeClock) -> service.Refresh:
    """The job's refresh, now, inside the test's transaction."""
    assert session.bind is not None
    return await tasks.refresh_deployed(
        async_sessionmaker(bind=session.bind, join_transaction_mode="create_savepoint"),
        now=clock.now,
    )


async def summary(session: AsyncSession) -> dict[str, list[str]]:
    found = {}
    for name, query in SUMMARY.items():
        rows = (await session.execute(text(query))).scalars()
        found[name] = sorted(json.dumps(row, sort_keys=True) for row in rows)
    return found


async def deployed(session: AsyncSession) -> dict[tuple[str, str, str | None], int]:
    """(environment, cluster type, version applied or condition) -> clusters running the
    app's folders; `member`: the clusters placed there."""
    rows = await session.execute(
        text("""
            SELECT e.name, d.cluster_type,
                   CASE WHEN d.condition = 'applied' THEN d.version ELSE d.condition END,
                   sum(d.clusters)
            FROM deployed_version d JOIN environment e ON e.id = d.environment_id
            WHERE d.source_url IS NULL OR d.source_path LIKE '%test'
            GROUP BY 1, 2, 3
        """)
    )
    return {(environment, kind, what): clusters for environment, kind, what, clusters in rows}


async def the_summary_holds_as_of(session: AsyncSession) -> object:
    return await session.scalar(text("SELECT min(refreshed_at) FROM deployed_version"))


async def nothing_new_from_scratch(
    session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh from an empty summary sums up what the increments did; then the periodic full
    pass finds nothing new either."""
    before = await summary(session)
    await session.execute(text("DELETE FROM deployed_cluster"))
    await session.execute(text("DELETE FROM deployed_part"))
    await session.execute(text("DELETE FROM deployed_refresh"))
    from_scratch = await refresh(session, clock)
    assert from_scratch.full
    assert await summary(session) == before
    clock.advance(minutes=1)
    with monkeypatch.context() as patch:
        patch.setattr(service, "FULL_PASS_EVERY", timedelta(0))
        periodic = await refresh(session, clock)
    assert periodic.full
    assert await summary(session) == before


@pytest.fixture
async def steady(fleet: Fleet, session: AsyncSession, clock: FakeClock) -> Fleet:
    """Two drones in dev and one in stage, each running its environment's heads, summed up by
    a full refresh a while after the harvest; a while later they reported again, with nothing
    new, and a refresh ran, so that what the first reports wrote lies before the next one's
    overlap."""
    for name, environment, target in [
        ("drone-01", "dev", "functional-test"),
        ("drone-02", "dev", "functional-test"),
        ("drone-s1", "stage", "uat-test"),
    ]:
        cluster = await fleet.add(name, "drone", environment)
        cluster.run_platform(fleet.platform_heads[environment])
        cluster.run_app(target, fleet.app_heads[environment])
    past_the_overlap(clock)
    await fleet.report()
    first = await refresh(session, clock)
    past_the_overlap(clock)
    await fleet.report()
    again = await refresh(session, clock)
    assert (first.full, first.clusters) == (True, 3)
    assert not again.full
    assert await deployed(session) == {
        ("dev", "drone", "member"): 2,
        ("dev", "drone", "1.0.0"): 2,
        ("stage", "drone", "member"): 1,
        ("stage", "drone", "1.0.0"): 1,
    }
    return fleet


async def test_a_refresh_reads_again_the_clusters_a_report_changed(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.advance(minutes=1)
    steady.clusters["drone-02"].run_app(
        "functional-test", steady.app_heads["dev"], ready=False, message="image pull failed"
    )
    await steady.report()

    refreshed = await refresh(session, clock)

    assert (refreshed.full, refreshed.clusters, refreshed.parts) == (False, 1, 1)
    assert await deployed(session) == {
        ("dev", "drone", "member"): 2,
        ("dev", "drone", "1.0.0"): 1,
        ("dev", "drone", "failing"): 1,
        ("stage", "drone", "member"): 1,
        ("stage", "drone", "1.0.0"): 1,
    }
    assert await the_summary_holds_as_of(session) == clock.now
    await nothing_new_from_scratch(session, clock, monkeypatch)


async def test_a_refresh_holds_as_of_its_time_though_no_cluster_changed(
    steady: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    clock.advance(minutes=1)

    refreshed = await refresh(session, clock)

    assert (refreshed.full, refreshed.clusters) == (False, 0)
    assert await the_summary_holds_as_of(session) == clock.now


async def test_a_refresh_drops_a_decommissioned_cluster(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.advance(minutes=1)
    await cluster_service.decommission(session, "drone-02", now=clock.now, stale_after=STALE_AFTER)

    refreshed = await refresh(session, clock)

    assert (refreshed.full, refreshed.clusters) == (False, 1)
    assert await deployed(session) == {
        ("dev", "drone", "member"): 1,
        ("dev", "drone", "1.0.0"): 1,
        ("stage", "drone", "member"): 1,
        ("stage", "drone", "1.0.0"): 1,
    }
    await nothing_new_from_scratch(session, clock, monkeypatch)


async def test_a_refresh_counts_a_cluster_placed_elsewhere_there(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.advance(minutes=1)
    await cluster_service.place(
        session,
        "drone-02",
        ClusterPlacement(environment="stage", cluster_type="drone"),
        now=clock.now,
        stale_after=STALE_AFTER,
    )

    refreshed = await refresh(session, clock)

    assert (refreshed.full, refreshed.clusters) == (False, 1)
    # It still runs dev's folder, now counted in stage.
    assert await deployed(session) == {
        ("dev", "drone", "member"): 1,
        ("dev", "drone", "1.0.0"): 1,
        ("stage", "drone", "member"): 2,
        ("stage", "drone", "1.0.0"): 2,
    }
    await nothing_new_from_scratch(session, clock, monkeypatch)


async def test_a_refresh_looks_versions_up_again_once_the_harvest_moved_a_branch(
    steady: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rounds enough to move past two overlaps before the harvest, none of them a full pass.
    monkeypatch.setattr(service, "FULL_PASS_EVERY", timedelta(hours=1))
    # drone-01 runs a release the hub has not harvested yet: its version is not known.
    release = steady.release("1.1.0")
    steady.clusters["drone-01"].run_app("functional-test", release)
    await steady.report()
    before = await refresh(session, clock)
    unharvested = await deployed(session)
    past_the_overlap(clock)
    # Its report still lies within this round's overlap; not within the next one's.
    await refresh(session, clock)
    past_the_overlap(clock)
    await steady.harvest()

    after = await refresh(session, clock)
    clock.advance(seconds=30)
    next_round = await refresh(session, clock)

    assert (before.full, before.clusters) == (False, 1)
    assert ("dev", "drone", "1.1.0") not in unharvested
    # No object is read again: the version is looked up again for what follows the branch.
    assert (after.full, after.clusters, after.parts) == (False, 0, 1)
    assert await deployed(session) == {
        ("dev", "drone", "member"): 2,
        ("dev", "drone", "1.0.0"): 1,
        ("dev", "drone", "1.1.0"): 1,
        ("stage", "drone", "member"): 1,
        ("stage", "drone", "1.0.0"): 1,
    }
    # The harvest still lies within the next round's overlap: it finds nothing to change.
    assert (next_round.full, next_round.clusters, next_round.parts) == (False, 0, 0)
    await nothing_new_from_scratch(session, clock, monkeypatch)


async def test_many_changed_clusters_are_read_a_part_at_a_time(
    fleet: Fleet, session: AsyncSession, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollout changes many clusters at once: an increment reads them in units of a part's
    size, and sums up each part they lie in."""
    monkeypatch.setattr(placement_repository, "PART_CLUSTERS", 1)
    monkeypatch.setattr(tasks, "PART_CLUSTERS", 1)
    monkeypatch.setattr(pacing, "PART_PACE", 0)
    for name in ("drone-01", "drone-02", "drone-03"):
        cluster = await fleet.add(name, "drone", "dev")
        cluster.run_platform(fleet.platform_heads["dev"])
        cluster.run_app("functional-test", fleet.app_heads["dev"])
    await fleet.report()
    first = await refresh(session, clock)
    past_the_overlap(clock)
    # The reports still lie within this round's overlap; not within the next one's.
    await refresh(session, clock)
    past_the_overlap(clock)
    for name in ("drone-01", "drone-03"):
        fleet.clusters[name].run_app(
            "functional-test", fleet.app_heads["dev"], ready=False, message="image pull failed"
        )
    await fleet.report()

    refreshed = await refresh(session, clock)

    assert (first.full, first.clusters) == (True, 3)
    assert (refreshed.full, refreshed.clusters, refreshed.parts) == (False, 2, 2)
    assert await deployed(session) == {
        ("dev", "drone", "member"): 3,
        ("dev", "drone", "1.0.0"): 1,
        ("dev", "drone", "failing"): 2,
    }
    await nothing_new_from_scratch(session, clock, monkeypatch)


async def test_every_cluster_is_read_again_once_the_last_full_pass_is_old(
    steady: Fleet, session: AsyncSession, clock: FakeClock
) -> None:
    clock.advance(minutes=1)
    await steady.report()
    meanwhile = await refresh(session, clock)
    # The fixture's first refresh was the last full pass.
    clock.advance(seconds=service.FULL_PASS_EVERY.total_seconds())

    again = await refresh(session, clock)
    after = await refresh(session, clock)

    assert (meanwhile.full, meanwhile.clusters) == (False, 0)
    assert (again.full, again.clusters) == (True, 3)
    assert (after.full, after.clusters) == (False, 0)
