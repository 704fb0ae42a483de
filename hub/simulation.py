"""A simulated fleet: clusters whose agents report what their reconcilers run, for `fleetmark
simulate` (a fresh install with something on its dashboards) and the correlation tests.

Pure: `Simulation.step` moves the fleet one round, `Simulation.report` is a cluster's full
snapshot. Each cluster has a Flux or Argo CD root reconciler; agents spell URLs their own ways.
"""

import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import hub

__all__ = [
    "ARGO_ROOT",
    "RECONCILERS",
    "ROOT",
    "SIMULATED_LABEL",
    "Failure",
    "Followed",
    "SimulatedCluster",
    "Simulation",
    "folder",
    "records",
    "spelled",
]

ROOT = "flux-system"
ARGO_ROOT = "platform"
RECONCILERS = {"drone": "flux", "large": "argocd", "small": "flux", "command-center": "flux"}
REPORT_SCHEMA = "fleetmark.report/v1"
# The label every simulated cluster is registered with: simulate takes over no other cluster.
SIMULATED_LABEL = ("fleetmark.io/simulated", "true")

ENVIRONMENTS = ("dev", "stage")
WORKLOAD = "hello-world"
TARGETS = ("functional-test", "performance-test")
REGIONS = ("east-us", "west-europe")
PLATFORM_URL = "https://github.com/contoso/platform-gitops"
APP_URL = "https://github.com/contoso/app-gitops"
# A new release on dev every this many rounds; stage gets dev's previous one at the same time.
RELEASE_EVERY = 6


def spelled(url: str, reconciler: str) -> str:
    """Flux users write `.git`, Argo CD users a trailing slash: one repository either way."""
    return f"{url}.git" if reconciler == "flux" else f"{url}/"


def records(
    reconciler: str,
    name: str,
    *,
    url: str,
    branch: str,
    path: str,
    applied: str | None,
    attempted: str | None,
    ready: bool | None,
    reason: str | None,
    message: str | None,
    suspended: bool = False,
) -> list[dict[str, Any]]:
    """What the agent reports for one reconciler following `url` at `branch`/`path`;
    `suspended`: its reconciliation is suspended (the source object still fetches)."""
    health = {True: "Healthy", False: "Degraded", None: "Progressing"}[ready]
    if reconciler == "argocd":
        return [
            {
                "reconciler": "argocd",
                "kind": "Application",
                "namespace": "argocd",
                "name": name,
                "source": {"url": url, "ref": branch, "path": path},
                "applied_revision": applied,
                "attempted_revision": attempted,
                "ready": ready,
                "reason": reason,
                "message": message,
                "health": health,
                "suspended": suspended,
            }
        ]

    def revision(sha: str | None) -> str | None:
        return None if sha is None else f"{branch}@sha1:{sha}"

    return [
        # The source object fetched the attempted revision; it never applies anything.
        {
            "reconciler": "flux",
            "kind": "GitRepository",
            "namespace": "flux-system",
            "name": name,
            "source": {"url": url, "ref": branch},
            "attempted_revision": revision(attempted),
            "ready": True,
            "reason": "Succeeded",
            "health": "Healthy",
        },
        {
            "reconciler": "flux",
            "kind": "Kustomization",
            "namespace": "flux-system",
            "name": name,
            # As the agent links them: the GitRepository's URL and branch.
            "source": {
                "url": url,
                "ref": f"GitRepository/flux-system/{name}",
                "path": path,
                "url_ref": branch,
            },
            "applied_revision": revision(applied),
            "attempted_revision": revision(attempted),
            "ready": ready,
            "reason": reason,
            "message": message,
            "health": health,
            "suspended": suspended,
        },
    ]


def folder(reconciler: str, name: str) -> str:
    """A folder of a repository as the reconciler's manifests spell it."""
    return f"./{name}" if reconciler == "flux" else name


@dataclass(frozen=True, slots=True)
class Followed:
    """One reconciler of a cluster: its name and the folder it follows, of the platform
    repository (`app` False, at the platform commit) or of the app repository (`app` True)."""

    name: str
    url: str
    path: str
    app: bool


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a cluster's app reconcilers fail on each new revision they try to apply."""

    reason: str
    message: str


@dataclass
class SimulatedCluster:
    name: str
    environment: str
    cluster_type: str
    labels: dict[str, str]
    reconciler: str
    followed: tuple[Followed, ...]
    # The platform and app commits it applied, and the ones it is applying this round.
    applied: tuple[str, str]
    applying: tuple[str, str] | None = None
    sequence: int = 0
    # Set by whoever drives the fleet: its app reconcilers fail on what they try next; its
    # reconciliation is suspended (it stays where it is and falls behind); its agent stopped
    # reporting.
    failure: Failure | None = None
    suspended: bool = False
    silent: bool = False

    def registration(self) -> dict[str, Any]:
        key, value = SIMULATED_LABEL
        return {
            "name": self.name,
            "environment": self.environment,
            "cluster_type": self.cluster_type,
            "labels": {**self.labels, key: value},
        }


def _made_up_cluster(
    name: str, environment: str, cluster_type: str, labels: dict[str, str], applied: tuple[str, str]
) -> SimulatedCluster:
    """A cluster of `fleetmark simulate`'s made-up fleet: every target of the app repository."""
    reconciler = RECONCILERS[cluster_type]
    root = ROOT if reconciler == "flux" else ARGO_ROOT
    return SimulatedCluster(
        name=name,
        environment=environment,
        cluster_type=cluster_type,
        labels=labels,
        reconciler=reconciler,
        followed=(
            Followed(root, PLATFORM_URL, folder(reconciler, cluster_type), app=False),
            *(
                Followed(f"{WORKLOAD}-{target}", APP_URL, folder(reconciler, target), app=True)
                for target in TARGETS
            ),
        ),
        applied=applied,
    )


@dataclass
class Simulation:
    """A fleet and what each environment's branches hold (`heads`: platform commit, app
    commit). With `release_every`, `step` makes up a release every so many rounds; without,
    whoever drives the fleet sets `heads` when a branch moves."""

    clusters: list[SimulatedCluster]
    heads: dict[str, tuple[str, str]]
    release_every: int | None = None
    seed: int | None = None
    boot_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    rounds: int = 0

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)  # noqa: S311 - made-up commits, not secrets

    @classmethod
    def made_up(cls, clusters_per_type: int, seed: int | None = None) -> "Simulation":
        """`clusters_per_type` clusters of each cluster type in each environment, following
        made-up repositories, with a made-up release every RELEASE_EVERY rounds."""
        simulation = cls(clusters=[], heads={}, release_every=RELEASE_EVERY, seed=seed)
        first = (simulation.made_up_sha(), simulation.made_up_sha())
        simulation.heads = dict.fromkeys(ENVIRONMENTS, first)
        simulation.clusters = [
            _made_up_cluster(
                f"{cluster_type}-{environment}-{index + 1}",
                environment,
                cluster_type,
                {"region": REGIONS[index % len(REGIONS)]},
                first,
            )
            for environment in ENVIRONMENTS
            for cluster_type in RECONCILERS
            for index in range(clusters_per_type)
        ]
        return simulation

    def made_up_sha(self) -> str:
        return f"{self._random.getrandbits(160):040x}"

    def reporting(self) -> list[SimulatedCluster]:
        """The clusters whose agents report."""
        return [cluster for cluster in self.clusters if not cluster.silent]

    def step(self) -> None:
        """One round on: releases (a new one on dev, dev's previous one on stage), and one
        cluster per environment starting to catch up, which applies a round later."""
        self.rounds += 1
        for cluster in self.clusters:
            if cluster.applying is None:
                continue
            if cluster.failure is None:
                cluster.applied, cluster.applying = cluster.applying, None
            else:
                # The platform applies; the app's new revision keeps failing.
                cluster.applied = (cluster.applying[0], cluster.applied[1])
        if self.release_every is not None and self.rounds % self.release_every == 0:
            self.heads["stage"] = self.heads["dev"]
            self.heads["dev"] = (self.made_up_sha(), self.made_up_sha())
        for environment, head in self.heads.items():
            behind = [
                cluster
                for cluster in self.clusters
                if cluster.environment == environment
                and not cluster.suspended
                and cluster.applied != head
                and cluster.applying != head
            ]
            if behind:
                behind[0].applying = head

    def objects(self, cluster: SimulatedCluster) -> list[dict[str, Any]]:
        """What the cluster's reconcilers run: the platform's root, then each target's.

        A reconciler with a new revision to apply is progressing this round; an app
        reconciler of a cluster with a failure fails on it instead."""
        reconciler = cluster.reconciler
        attempted = cluster.applying or cluster.applied
        found = []
        for followed in cluster.followed:
            applied, trying = cluster.applied[followed.app], attempted[followed.app]
            failure = cluster.failure if followed.app and trying != applied else None
            ready = True if trying == applied else None if failure is None else False
            reason = {True: "ReconciliationSucceeded", None: "Progressing"}.get(ready)
            found += records(
                reconciler,
                followed.name,
                url=spelled(followed.url, reconciler),
                branch=cluster.environment,
                path=followed.path,
                applied=applied,
                attempted=trying,
                ready=ready,
                reason=reason if failure is None else failure.reason,
                message=None if failure is None else failure.message,
                suspended=cluster.suspended,
            )
        return found

    def report(self, cluster: SimulatedCluster, observed_at: datetime) -> dict[str, Any]:
        """The cluster's next report: a full snapshot."""
        cluster.sequence += 1
        return {
            "schema": REPORT_SCHEMA,
            "cluster": cluster.registration(),
            "agent": {
                "version": hub.__version__,
                "boot_id": self.boot_id,
                "instance": cluster.name,
            },
            "sequence": cluster.sequence,
            "observed_at": observed_at.isoformat(),
            "full_snapshot": True,
            "objects": self.objects(cluster),
        }
