"""Deployment histories for the DORA tests, with commit and report times chosen so that every
figure can be worked out by hand.

Times are minutes after a base time B (the clock when the history begins). Commits are dated
with those times, so a lead time is a difference of two numbers in the timeline.
"""

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.database import write_session
from hub.dora.service import Refresh, refresh_rollup
from tests.hub.harvest import scenario
from tests.hub.harvest.gitrepo import WorkRepo
from tests.hub.simulated_fleet import SimCluster
from tests.support import FakeClock


def commit_at(
    repo: WorkRepo, branch: str, message: str, files: Mapping[str, str], when: datetime
) -> str:
    """A commit on `branch` authored and committed at `when`; the work tree goes back to dev."""
    repo.checkout(branch)
    repo.write(files)
    stamp = f"{int(when.timestamp())} +0000"
    environment = os.environ | {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    for args in (["add", "--all"], ["commit", "--quiet", "-m", message]):
        subprocess.run(
            ["git", *args], cwd=repo.path, env=environment, check=True, capture_output=True
        )
    sha = repo.head()
    repo.checkout("dev")
    return sha


# Long enough that nothing of a timeline settles unless a test says otherwise.
SETTLE = timedelta(days=1)


async def refresh_dora(
    sessions: async_sessionmaker[AsyncSession], now: datetime, settle: timedelta = SETTLE
) -> Refresh:
    """The DORA job's refresh of its rollup as of `now`, committed."""
    async with write_session(sessions) as session:
        return await refresh_rollup(session, now=now, settle=settle)


@dataclass(frozen=True)
class Timeline:
    clock: FakeClock
    base: datetime

    def at(self, minutes: float) -> datetime:
        return self.base + timedelta(minutes=minutes)

    def go(self, minutes: float) -> None:
        self.clock.now = self.at(minutes)


# Platform commits c1, c2, c3 of dev, and what the clusters do with them:
#
#   B+0    drone-01, drone-02 (Flux) and large-01 (Argo CD) run the dev head, Ready
#   B+10   c1 committed
#   B+15   drone-01 Ready at c1                       c1 starts
#   B+20   drone-02 Ready at c1
#   B+25   large-01 Ready at c1                       c1 complete: lead time 15 min
#   B+60   c2 committed
#   B+65   drone-01 Ready at c2                       c2 starts
#   B+67   drone-03 joins, Ready at c2 at once        not expected by c2 (it began before)
#   B+70   drone-02 attempts c2: Ready false          c2 fails
#   B+75   large-01 Ready at c2
#   B+100  drone-02 Ready at c2                       c2 complete: lead time 40 min;
#                                                     every cluster Ready: restored in 30 min
#   B+120  c3 committed
#   B+125  drone-01 Ready at c3                       c3 starts, expects all four clusters
#   B+126  drone-02 Ready at c3
#   B+128  drone-03 Ready at c3
#   B+130  large-01 Ready at c3                       c3 complete: lead time 10 min
PLATFORM_CLUSTERS = {"drone-01": "drone", "drone-02": "drone", "large-01": "large"}
LATE_CLUSTER = ("drone-03", "drone")
PLATFORM_COMMITS = {"c1": 10, "c2": 60, "c3": 120}
FAILURE = ("ReconciliationFailed", "kustomize build failed: drone/README.md is not YAML")


def commit_platform(platform: WorkRepo, timeline: Timeline) -> dict[str, str]:
    """c1, c2, c3 on the dev branch of platform-gitops; their shas by name."""
    return {
        name: commit_at(
            platform,
            "dev",
            f"Promote dev: {name}",
            {"drone/README.md": f"{name}\n"},
            timeline.at(minutes),
        )
        for name, minutes in PLATFORM_COMMITS.items()
    }


async def play_platform(
    timeline: Timeline,
    clusters: Mapping[str, SimCluster],
    commits: Mapping[str, str],
    late: SimCluster,
) -> None:
    """The clusters' part of the timeline above, from B+15 on (they run the head at B+0)."""

    async def ready(minutes: float, cluster: SimCluster, commit: str) -> None:
        timeline.go(minutes)
        cluster.run_platform(commits[commit])
        await cluster.report()

    drone1, drone2, large = (clusters[name] for name in PLATFORM_CLUSTERS)
    await ready(15, drone1, "c1")
    await ready(20, drone2, "c1")
    await ready(25, large, "c1")
    await ready(65, drone1, "c2")
    await ready(67, late, "c2")
    timeline.go(70)
    reason, message = FAILURE
    drone2.run_platform(
        commits["c1"], attempted=commits["c2"], ready=False, reason=reason, message=message
    )
    await drone2.report()
    await ready(75, large, "c2")
    await ready(100, drone2, "c2")
    await ready(125, drone1, "c3")
    await ready(126, drone2, "c3")
    await ready(128, late, "c3")
    await ready(130, large, "c3")


# Versions 1.1.0 and 1.2.0 of hello-world-app on dev; functional-test runs on the drones (Flux),
# performance-test on large-01 (Argo CD); small-01 carries nothing of it:
#
#   B+0    every cluster runs the dev head; the drones and large-01 run 1.0.0, Ready
#   B+30   1.1.0 committed (every folder)
#   B+40   drone-01 Ready at 1.1.0                    1.1.0 starts
#   B+45   large-01 attempts 1.1.0: Ready false       1.1.0 fails
#   B+50   drone-02 Ready at 1.1.0
#   B+70   large-01 Ready at 1.1.0                    1.1.0 complete: lead time 40 min;
#                                                     restored in 25 min
#   B+100  1.2.0 committed
#   B+105  drone-01 Ready at 1.2.0                    1.2.0 starts
#   B+110  drone-02 Ready at 1.2.0
#   B+112  large-01 Ready at 1.2.0                    1.2.0 complete: lead time 12 min
WORKLOAD_CLUSTERS = {
    "drone-01": "drone",
    "drone-02": "drone",
    "large-01": "large",
    "small-01": "small",
}
TARGETS = {"drone": "functional-test", "large": "performance-test"}
RELEASES = {"1.1.0": 30, "1.2.0": 100}


def commit_releases(app: WorkRepo, timeline: Timeline) -> dict[str, str]:
    """1.1.0 and 1.2.0 on the dev branch of app-gitops; the commits by version."""
    return {
        version: commit_at(
            app,
            "dev",
            f"hello-world {version} on dev",
            scenario.app_gitops("dev", version),
            timeline.at(minutes),
        )
        for version, minutes in RELEASES.items()
    }


def run_everything(clusters: Mapping[str, SimCluster], platform_head: str, app_head: str) -> None:
    """What the clusters run at B+0: the platform head, and their target at `app_head`."""
    for cluster in clusters.values():
        cluster.run_platform(platform_head)
        if cluster.cluster_type in TARGETS:
            cluster.run_app(TARGETS[cluster.cluster_type], app_head)


async def play_releases(
    timeline: Timeline, clusters: Mapping[str, SimCluster], releases: Mapping[str, str]
) -> None:
    """The clusters' part of the release timeline above, from B+40 on; `releases` holds the
    commits of 1.0.0 (the dev head at B+0), 1.1.0 and 1.2.0."""

    async def ready(minutes: float, name: str, version: str) -> None:
        timeline.go(minutes)
        cluster = clusters[name]
        cluster.run_app(TARGETS[cluster.cluster_type], releases[version])
        await cluster.report()

    await ready(40, "drone-01", "1.1.0")
    timeline.go(45)
    large = clusters["large-01"]
    large.run_app(
        TARGETS["large"],
        releases["1.0.0"],
        attempted=releases["1.1.0"],
        ready=False,
        reason="SyncFailed",
        message="ImagePullBackOff: ghcr.io/contoso/hello-world:1.1.0",
    )
    await large.report()
    await ready(50, "drone-02", "1.1.0")
    await ready(70, "large-01", "1.1.0")
    await ready(105, "drone-01", "1.2.0")
    await ready(110, "drone-02", "1.2.0")
    await ready(112, "large-01", "1.2.0")
