"""What the scheduler commits is harvested like any platform GitOps repository: the harvester
finds the assignments the scheduler stored, with the same namespaces and config hashes, and
the control-plane commit each platform commit promotes."""

from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.harvest import service as harvest_service
from hub.harvest import tasks as harvest_tasks
from hub.harvest.schemas import RepositoryConfig
from hub.scheduling import service
from tests.conftest import hub_settings
from tests.hub.harvest.store import HarvestedRepo
from tests.hub.scheduling.conftest import Schedule
from tests.hub.scheduling.fleet import ControlPlane, Platform
from tests.support import FakeClock


async def test_the_harvester_reads_what_the_scheduler_wrote(
    schedule: Schedule,
    control_plane: ControlPlane,
    platform: Platform,
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    outcome = await schedule("dev")
    config = RepositoryConfig(url=str(platform.path), role="platform", branches=["dev"])
    await harvest_service.add_repository(
        session, config, credentials_dir=None, allow_local=True, now=clock.now
    )
    await session.commit()

    await harvest_tasks.run_harvest(
        sessions, hub_settings(data_dir=tmp_path / "harvest"), clock=clock, only=str(platform.path)
    )

    store = HarvestedRepo(session, str(platform.path))
    harvested = await store.current_assignments("dev")
    scheduled = await service.list_assignments(
        session, environment="dev", cluster_type=None, workload=None, limit=10, offset=0
    )
    assert {
        (row["cluster_type_name"], row["deployment_target_name"]): (
            row["namespace"],
            row["config_hash"],
            row["valid_from"],
        )
        for row in harvested.values()
    } == {
        (item.cluster_type, item.deployment_target): (
            item.namespace,
            item.config_hash,
            item.commit_sha,
        )
        for item in scheduled.items
    }
    drone = harvested[("drone", "hello-world-app-functional-test")]
    assert drone["reconciler_kind"] == "flux"
    assert (drone["app_url"], drone["app_branch"], drone["app_path"]) == (
        "https://git.example.com/kaizen/app-gitops",
        "dev",
        "functional-test",
    )
    assert harvested[("large", "hello-world-app-performance-test")]["reconciler_kind"] == "argocd"
    commits = await store.commits()
    assert commits[outcome.commit or ""]["promoted_commit_sha"] == control_plane.main
