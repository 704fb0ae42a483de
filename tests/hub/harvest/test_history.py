"""Commits, branches and ancestry: incremental runs, merges, force-pushes, vanished branches."""

from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from hub.settings import HubSettings
from tests.hub.harvest.conftest import Harvest, MakeRepo
from tests.hub.harvest.gitrepo import WorkRepo
from tests.hub.harvest.store import HarvestedRepo

Configure = Callable[..., Awaitable[int]]


@pytest.fixture
async def app_repo(make_repo: MakeRepo, configure: Configure) -> WorkRepo:
    repo = make_repo("app-gitops")
    await configure(repo.url, "app", branches=["dev"])
    return repo


def chain(repo: WorkRepo, count: int, prefix: str = "change") -> list[str]:
    return [
        repo.commit(f"{prefix} {index}", {"functional-test/values.txt": f"{prefix} {index}\n"})
        for index in range(count)
    ]


async def test_first_harvest_stores_every_commit_with_its_metadata(
    app_repo: WorkRepo, harvest: Harvest, session: AsyncSession
) -> None:
    shas = chain(app_repo, 3)

    report = await harvest()

    [outcome] = report.repositories
    assert [(b.name, b.new_commits, b.head_sha) for b in outcome.branches] == [("dev", 3, shas[-1])]
    store = HarvestedRepo(session, app_repo.url)
    commits = await store.commits()
    assert set(commits) == set(shas)
    assert commits[shas[1]]["parent_shas"] == [shas[0]]
    assert [commits[sha]["generation"] for sha in shas] == [0, 1, 2]
    assert commits[shas[2]]["message"] == "change 2"
    assert commits[shas[2]]["author_email"] == "bot@contoso.example"
    assert commits[shas[2]]["committed_at"] > commits[shas[0]]["committed_at"]
    assert all(commit["reachable"] for commit in commits.values())
    assert (await store.branch("dev"))["head_sha"] == shas[-1]
    assert await store.members("dev") == {sha: (index, True) for index, sha in enumerate(shas)}


async def test_incremental_run_reads_only_new_commits(
    app_repo: WorkRepo, harvest: Harvest, session: AsyncSession
) -> None:
    first = chain(app_repo, 2)
    await harvest()
    unchanged = await harvest()
    later = chain(app_repo, 3, prefix="later")

    report = await harvest()

    assert unchanged.repositories[0].branches[0].new_commits == 0
    assert report.repositories[0].branches[0].new_commits == 3
    store = HarvestedRepo(session, app_repo.url)
    assert await store.members("dev") == {
        sha: (index, True) for index, sha in enumerate(first + later)
    }
    assert await store.is_ancestor(first[0], later[-1]) is True
    assert await store.is_ancestor(later[-1], first[0]) is False
    assert await store.is_ancestor(later[0], later[0]) is True


async def test_merge_commit_places_side_commits_at_the_merge(
    app_repo: WorkRepo, harvest: Harvest, session: AsyncSession
) -> None:
    base = chain(app_repo, 2)
    app_repo.checkout("feature", new=True)
    side = chain(app_repo, 2, prefix="feature")
    app_repo.checkout("dev")
    parallel = app_repo.commit("hotfix on dev", {"performance-test/values.txt": "hotfix\n"})
    merge = app_repo.merge("feature", "Merge feature into dev")
    after = app_repo.commit("after the merge", {"README.md": "after\n"})

    await harvest()

    store = HarvestedRepo(session, app_repo.url)
    members = await store.members("dev")
    assert members == {
        base[0]: (0, True),
        base[1]: (1, True),
        parallel: (2, True),
        side[0]: (3, False),
        side[1]: (3, False),
        merge: (3, True),
        after: (4, True),
    }
    assert (await store.commits())[merge]["parent_shas"] == [parallel, side[1]]
    assert (await store.commits())[merge]["generation"] == 4
    assert await store.is_ancestor(side[0], merge) is True
    assert await store.is_ancestor(side[0], after) is True
    # The side commits are not ancestors of the chain commit before the merge...
    assert await store.is_ancestor(side[0], parallel) is False
    # ...and a commit off every first-parent chain is beyond what the index answers.
    assert await store.is_ancestor(base[0], side[1]) is None


async def test_force_push_marks_dropped_commits_unreachable_and_follows_the_new_head(
    app_repo: WorkRepo, harvest: Harvest, session: AsyncSession
) -> None:
    kept = chain(app_repo, 2)
    dropped = chain(app_repo, 2, prefix="dropped")
    await harvest()
    app_repo.reset(kept[-1])
    rewritten = chain(app_repo, 3, prefix="rewritten")

    report = await harvest()

    [branch] = report.repositories[0].branches
    assert (branch.rewritten, branch.new_commits, branch.head_sha) == (True, 3, rewritten[-1])
    store = HarvestedRepo(session, app_repo.url)
    commits = await store.commits()
    assert {sha: commits[sha]["reachable"] for sha in kept + dropped + rewritten} == {
        **{sha: True for sha in kept + rewritten},
        **{sha: False for sha in dropped},
    }
    assert (await store.branch("dev"))["head_sha"] == rewritten[-1]
    assert await store.members("dev") == {
        sha: (index, True) for index, sha in enumerate(kept + rewritten)
    }
    assert await store.is_ancestor(dropped[0], rewritten[-1]) is False
    assert await store.is_ancestor(kept[0], rewritten[-1]) is True


async def test_reset_to_an_older_commit_moves_the_head_back(
    app_repo: WorkRepo, harvest: Harvest, session: AsyncSession
) -> None:
    shas = chain(app_repo, 4)
    await harvest()
    app_repo.reset(shas[1])

    report = await harvest()

    assert report.repositories[0].branches[0].rewritten
    store = HarvestedRepo(session, app_repo.url)
    assert (await store.branch("dev"))["head_sha"] == shas[1]
    assert await store.members("dev") == {shas[0]: (0, True), shas[1]: (1, True)}
    assert [(await store.commits())[sha]["reachable"] for sha in shas] == [True, True, False, False]


async def test_merge_that_drops_the_old_head_from_the_chain_renumbers_the_branch(
    app_repo: WorkRepo, harvest: Harvest, session: AsyncSession
) -> None:
    base = chain(app_repo, 2)
    harvested_head = app_repo.commit("pushed", {"README.md": "pushed\n"})
    await harvest()
    # Someone merged the harvested head into their own older work and pushed the result:
    # the old head is now the merge's second parent, off the first-parent chain.
    app_repo.checkout("local", new=True, start=base[-1])
    local = app_repo.commit("local work", {"uat-test/values.txt": "local\n"})
    merge = app_repo.merge("dev", "Merge branch 'dev'")
    app_repo.checkout("dev")
    app_repo.reset(merge)

    await harvest()

    store = HarvestedRepo(session, app_repo.url)
    assert await store.members("dev") == {
        base[0]: (0, True),
        base[1]: (1, True),
        local: (2, True),
        harvested_head: (3, False),
        merge: (3, True),
    }
    assert await store.is_ancestor(harvested_head, merge) is True
    assert all(commit["reachable"] for commit in (await store.commits()).values())


async def test_two_branches_share_commits_and_each_has_its_own_chain(
    make_repo: MakeRepo, configure: Configure, harvest: Harvest, session: AsyncSession
) -> None:
    repo = make_repo("app-gitops")
    shared = chain(repo, 2)
    repo.checkout("stage", new=True)
    stage_only = repo.commit("stage only", {"uat-test/values.txt": "stage\n"})
    repo.checkout("dev")
    dev_only = repo.commit("dev only", {"functional-test/values.txt": "dev\n"})
    await configure(repo.url, "app", branches=["dev", "stage"])

    await harvest()

    store = HarvestedRepo(session, repo.url)
    assert len(await store.commits()) == 4
    assert await store.members("dev") == {
        shared[0]: (0, True),
        shared[1]: (1, True),
        dev_only: (2, True),
    }
    assert await store.members("stage") == {
        shared[0]: (0, True),
        shared[1]: (1, True),
        stage_only: (2, True),
    }
    assert await store.is_ancestor(shared[1], stage_only) is True
    assert await store.is_ancestor(dev_only, stage_only) is False


async def test_vanished_branch_is_an_error_and_its_commits_become_unreachable(
    make_repo: MakeRepo, configure: Configure, harvest: Harvest, session: AsyncSession
) -> None:
    repo = make_repo("app-gitops")
    shared = repo.commit("shared", {"README.md": "hello\n"})
    repo.checkout("stage", new=True)
    stage_only = repo.commit("stage only", {"uat-test/values.txt": "stage\n"})
    repo.checkout("dev")
    await configure(repo.url, "app", branches=["dev", "stage"])
    await harvest()
    repo.git("branch", "--quiet", "-D", "stage")

    report = await harvest()

    store = HarvestedRepo(session, repo.url)
    assert [b.name for b in report.repositories[0].branches] == ["dev"]
    assert (await store.branch("stage"))["deleted_at"] is not None
    commits = await store.commits()
    assert (commits[shared]["reachable"], commits[stage_only]["reachable"]) == (True, False)
    messages = [error["message"] for error in await store.errors()]
    assert "branch 'stage' no longer exists on the remote" in messages
    assert "branch 'stage' does not exist on the remote" in messages


async def test_the_git_cache_is_the_hubs_users_alone(
    app_repo: WorkRepo, harvest: Harvest, harvest_settings: HubSettings
) -> None:
    chain(app_repo, 1)

    await harvest()

    cache = harvest_settings.effective_git_cache_dir
    (clone,) = cache.iterdir()
    assert [oct(folder.stat().st_mode & 0o777) for folder in (cache, clone)] == ["0o700"] * 2
