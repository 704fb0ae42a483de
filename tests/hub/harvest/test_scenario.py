"""The reference scenario harvested end to end: platform-gitops (dev, stage) discovers
app-gitops; desired state is kept as validity ranges that grow with changes only."""

from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from hub.git.urls import normalise_repository_url
from hub.harvest.platform import config_hash
from hub.models import AssignmentRevision, Environment, GitBranch, Repository
from tests.hub.harvest import scenario
from tests.hub.harvest.conftest import Harvest, MakeRepo
from tests.hub.harvest.gitrepo import WorkRepo
from tests.hub.harvest.store import HarvestedRepo

Configure = Callable[..., Awaitable[int]]
IMAGES = [
    "docker.io/envoyproxy/envoy:v1.31.0",
    "ghcr.io/contoso/hello-world:1.0.0",
    "ghcr.io/contoso/migrations:7",
]


class Fleet:
    def __init__(self, session: AsyncSession, platform: WorkRepo, app: WorkRepo) -> None:
        self.platform, self.app = platform, app
        self.platform_heads = scenario.build_platform(platform, app.url)
        self.app_heads = scenario.build_app(app)
        self.platform_store = HarvestedRepo(session, platform.url)
        self.app_store = HarvestedRepo(session, app.url)


@pytest.fixture
async def fleet(make_repo: MakeRepo, configure: Configure, session: AsyncSession) -> Fleet:
    built = Fleet(session, make_repo("platform-gitops"), make_repo("app-gitops"))
    # Only the platform repo is configured: app-gitops is found through its reconcilers.
    await configure(built.platform.url, "platform", branches=["dev", "stage"])
    return built


async def test_platform_commits_hold_their_assignments(
    fleet: Fleet, harvest: Harvest, session: AsyncSession
) -> None:
    await harvest()

    dev = await fleet.platform_store.current_assignments("dev")
    assert sorted(dev) == [
        ("drone", "hello-world-app-functional-test"),
        ("large", "hello-world-app-performance-test"),
    ]
    drone = dev[("drone", "hello-world-app-functional-test")]
    assert drone["namespace"] == "dev-drone-hello-world-app-functional-test"
    assert drone["config"] == scenario.CONFIG[("dev", "drone")]
    assert drone["config_hash"] == config_hash(scenario.CONFIG[("dev", "drone")])
    assert drone["reconciler_kind"] == "flux"
    assert (drone["app_url"], drone["app_branch"], drone["app_path"]) == (
        normalise_repository_url(fleet.app.url),
        "dev",
        "functional-test",
    )
    assert drone["valid_from"] == fleet.platform_heads["dev"]
    large = dev[("large", "hello-world-app-performance-test")]
    assert (large["reconciler_kind"], large["app_path"]) == ("argocd", "performance-test")

    stage = await fleet.platform_store.current_assignments("stage")
    assert {key: row["namespace"] for key, row in stage.items()} == {
        ("drone", "hello-world-app-uat-test"): "stage-drone-hello-world-app-uat-test",
        ("large", "hello-world-app-uat-test"): "stage-large-hello-world-app-uat-test",
    }
    assert stage[("large", "hello-world-app-uat-test")]["config"] == {
        "ENVIRONMENT": "Stage",
        "REGION": "West US",
    }
    commits = await fleet.platform_store.commits()
    assert commits[fleet.platform_heads["dev"]]["promoted_commit_sha"] == scenario.PROMOTED["dev"]
    assert (
        commits[fleet.platform_heads["stage"]]["promoted_commit_sha"] == scenario.PROMOTED["stage"]
    )
    # The platform repo's branches are the environments.
    environments = await session.execute(
        select(GitBranch.name, Environment.name)
        .join(Environment, Environment.id == GitBranch.environment_id)
        .where(GitBranch.repository_id == await fleet.platform_store.id())
    )
    assert sorted(environments.all()) == [("dev", "dev"), ("stage", "stage")]


async def test_app_repo_is_discovered_and_harvested_per_folder(
    fleet: Fleet, harvest: Harvest, session: AsyncSession
) -> None:
    report = await harvest()

    assert [(r.url, r.role) for r in report.repositories] == [
        (normalise_repository_url(fleet.platform.url), "platform"),
        (normalise_repository_url(fleet.app.url), "app"),
    ]
    discovered = await session.scalar(
        select(Repository).where(Repository.url == normalise_repository_url(fleet.app.url))
    )
    assert discovered is not None
    assert (discovered.source, discovered.clone_url, sorted(discovered.branches or [])) == (
        "discovered",
        fleet.app.url,
        ["dev", "stage"],
    )
    dev = await fleet.app_store.current_manifests("dev")
    assert sorted(dev) == ["functional-test", "performance-test", "uat-test"]
    assert {
        path: (row["workload_version"], row["version_source"]) for path, row in dev.items()
    } == {
        "functional-test": ("1.0.0", "descriptor"),
        "performance-test": ("1.0.0", "label"),
        "uat-test": ("1.0.0", "image"),
    }
    assert dev["uat-test"]["images"] == IMAGES
    assert dev["uat-test"]["manifest_digest"].startswith("sha256:")
    assert dev["uat-test"]["valid_from"] == fleet.app_heads["dev"]
    # stage branched off dev: a folder the stage commit left as it was keeps dev's revision.
    stage = await fleet.app_store.current_manifests("stage")
    assert stage["functional-test"]["valid_from"] == fleet.app_heads["stage"]
    assert stage["uat-test"]["valid_from"] == fleet.app_heads["dev"]


async def test_new_commits_add_revisions_only_where_something_changed(
    fleet: Fleet, harvest: Harvest
) -> None:
    await harvest()
    # Story step 3: a new image tag on dev, for functional-test only.
    release = fleet.app.commit(
        "hello-world 1.1.0 on dev",
        {
            "functional-test/deployment.yaml": scenario.deployment("1.1.0"),
            "functional-test/descriptor.yaml": scenario.descriptor(
                "functional-test", "dev", "1.1.0"
            ),
        },
    )
    # Story step 4: west-us-config changes on stage; only the west-us cluster type (large).
    fleet.platform.checkout("stage")
    stage_config = {
        "ENVIRONMENT": "Stage",
        "REGION": "West US",
        "DATABASE_URL": "mysql://west-2:8806/db",
    }
    change = fleet.platform.commit(
        "Promote stage: new west-us DATABASE_URL",
        scenario.assignment(
            "stage",
            "large",
            "uat-test",
            scenario.flux_reconciler(
                "uat-test",
                "stage-large-hello-world-app-uat-test",
                fleet.app.url,
                "stage",
                "./uat-test",
            ),
            stage_config,
        ),
    )
    # Commits that change nothing the harvester keeps: a README, and a reformatted config.
    fleet.platform.commit("docs", {"README.md": "Platform GitOps repository, now documented.\n"})
    drone_config = "stage-drone-hello-world-app-uat-test"
    fleet.platform.commit(
        "reformat",
        {
            "drone/hello-world-app-uat-test/platform-config.yaml": "# reformatted\n"
            + scenario.config_yaml(drone_config, {"ENVIRONMENT": "Stage"}).replace(
                '"Stage"', "Stage"
            )
        },
    )

    report = await harvest()

    new = {(r.role, b.name): b.new_commits for r in report.repositories for b in r.branches}
    assert new == {
        ("platform", "dev"): 0,
        ("platform", "stage"): 3,
        ("app", "dev"): 1,
        ("app", "stage"): 0,
    }
    manifests = await fleet.app_store.manifest_revisions("dev")
    functional = [row for row in manifests if row["path"] == "functional-test"]
    assert [(r["workload_version"], r["valid_from"], r["valid_until"]) for r in functional] == [
        ("1.0.0", fleet.app_heads["dev"], release),
        ("1.1.0", release, None),
    ]
    assert len([row for row in manifests if row["path"] == "uat-test"]) == 1
    stage = await fleet.platform_store.assignment_revisions("stage")
    large = [row for row in stage if row["cluster_type_name"] == "large"]
    assert [(r["valid_from"], r["valid_until"]) for r in large] == [
        (fleet.platform_heads["stage"], change),
        (change, None),
    ]
    assert large[-1]["config"] == stage_config
    assert len([row for row in stage if row["cluster_type_name"] == "drone"]) == 1


async def test_storage_grows_with_changes_not_with_commits(
    fleet: Fleet, harvest: Harvest, session: AsyncSession
) -> None:
    await harvest()
    for index in range(30):
        fleet.platform.commit(f"unrelated {index}", {"docs/notes.md": f"note {index}\n"})

    await harvest()

    revisions = await session.scalar(select(func.count()).select_from(AssignmentRevision))
    assert revisions == 4  # two assignments on dev, two on stage
    assert len(await fleet.platform_store.commits()) == 33  # 3 before, 30 new


async def test_removed_assignment_folder_ends_its_range(fleet: Fleet, harvest: Harvest) -> None:
    await harvest()
    folder = "large/hello-world-app-performance-test"
    removal = fleet.platform.commit(
        "Unschedule performance-test",
        {
            f"{folder}/{name}": None
            for name in ("namespace.yaml", "platform-config.yaml", "reconciler.yaml")
        },
    )

    await harvest()

    revisions = await fleet.platform_store.assignment_revisions("dev")
    ended = [r for r in revisions if r["cluster_type_name"] == "large"]
    assert [r["valid_until"] for r in ended] == [removal]
    assert sorted(await fleet.platform_store.current_assignments("dev")) == [
        ("drone", "hello-world-app-functional-test")
    ]


async def test_force_push_rewinds_the_ranges_to_the_shared_history(
    fleet: Fleet, harvest: Harvest
) -> None:
    await harvest()
    base = fleet.platform_heads["dev"]
    namespace = "dev-drone-hello-world-app-functional-test"
    bad = fleet.platform.commit(
        "Wrong config",
        {
            "drone/hello-world-app-functional-test/platform-config.yaml": scenario.config_yaml(
                namespace, {"X": "1"}
            )
        },
    )
    await harvest()
    fleet.platform.reset(base)
    good = fleet.platform.commit(
        "Right config",
        {
            "drone/hello-world-app-functional-test/platform-config.yaml": scenario.config_yaml(
                namespace, {"Y": "2"}
            )
        },
    )

    await harvest()

    drone = [
        r
        for r in await fleet.platform_store.assignment_revisions("dev")
        if r["cluster_type_name"] == "drone"
    ]
    assert [(r["config"], r["valid_from"], r["valid_until"]) for r in drone] == [
        (scenario.CONFIG[("dev", "drone")], base, good),
        ({"Y": "2"}, good, None),
    ]
    assert (await fleet.platform_store.commits())[bad]["reachable"] is False


async def test_backfill_rebuilds_the_same_ranges(fleet: Fleet, harvest: Harvest) -> None:
    await harvest()
    fleet.platform.commit("docs", {"README.md": "more\n"})
    await harvest()
    before = await fleet.platform_store.assignment_revisions("dev")

    report = await harvest(backfill=True)

    after = await fleet.platform_store.assignment_revisions("dev")
    assert report.repositories[0].branches[0].rewritten
    fields = (
        "cluster_type_name",
        "deployment_target_name",
        "namespace",
        "config_hash",
        "valid_from",
        "valid_until",
    )
    assert [tuple(r[f] for f in fields) for r in after] == [
        tuple(r[f] for f in fields) for r in before
    ]


async def test_argocd_multi_source_discovers_the_values_repository(
    make_repo: MakeRepo, configure: Configure, harvest: Harvest, session: AsyncSession
) -> None:
    app = make_repo("helm-values")
    app.commit("values", {"performance-test/values.yaml": "replicas: 3\n"})
    platform = make_repo("platform-gitops")
    platform.commit(
        "Promote dev",
        scenario.assignment(
            "dev",
            "large",
            "performance-test",
            scenario.argocd_reconciler(
                "performance-test", "ns", app.url, "dev", "performance-test", helm_values=True
            ),
        ),
    )
    await configure(platform.url, "platform", branches=["dev"])

    await harvest()

    [assignment] = (await HarvestedRepo(session, platform.url).current_assignments("dev")).values()
    assert (assignment["app_url"], assignment["app_path"]) == (
        normalise_repository_url(app.url),
        "performance-test",
    )
    manifests = await HarvestedRepo(session, app.url).current_manifests("dev")
    assert list(manifests) == ["performance-test"]
    assert manifests["performance-test"]["images"] == []
