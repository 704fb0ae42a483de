"""A simulated fleet: clusters whose agents report what their reconcilers run.

`fleetmark simulate` registers such a fleet with a hub and keeps it reporting through the report
API, so a fresh install (docker compose, a demo) has dashboards with something on them; the
correlation tests build their fleets from the same records.

Each cluster follows the platform repository's environment branch with a root reconciler (a
Flux GitRepository + Kustomization `flux-system`, or an Argo CD Application `platform`) and,
for each deployment target, the app repository's folder. Agents spell the repository URLs in
their own ways, as real ones do.

The simulation is pure: `Simulation.step` moves the fleet on by one round (now and then a new
release on dev, dev's previous one on stage, one cluster per environment catching up each
round, its reconcilers progressing for a round before they apply), and `Simulation.report`
is a cluster's full snapshot as a contract-v1 report body.
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
) -> list[dict[str, Any]]:
    """What the agent reports for one reconciler following `url` at `branch`/`path`."""
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
        },
    ]


def folder(reconciler: str, name: str) -> str:
    """A folder of a repository as the reconciler's manifests spell it."""
    return f"./{name}" if reconciler == "flux" else name


@dataclass
class SimulatedCluster:
    name: str
    environment: str
    cluster_type: str
    labels: dict[str, str]
    # The platform and app commits it applied, and the ones it is applying this round.
    applied: tuple[str, str]
    applying: tuple[str, str] | None = None
    sequence: int = 0

    @property
    def reconciler(self) -> str:
        return RECONCILERS[self.cluster_type]

    def registration(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "environment": self.environment,
            "cluster_type": self.cluster_type,
            "labels": self.labels,
        }


@dataclass
class Simulation:
    """`clusters_per_type` clusters of each cluster type in each environment."""

    clusters_per_type: int
    seed: int | None = None
    boot_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    rounds: int = 0

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)  # noqa: S311 - made-up commits, not secrets
        first = (self._sha(), self._sha())
        # What each environment's branches hold now: (platform commit, app commit).
        self.heads = dict.fromkeys(ENVIRONMENTS, first)
        self.clusters = [
            SimulatedCluster(
                name=f"{cluster_type}-{environment}-{index + 1}",
                environment=environment,
                cluster_type=cluster_type,
                labels={"region": REGIONS[index % len(REGIONS)]},
                applied=first,
            )
            for environment in ENVIRONMENTS
            for cluster_type in RECONCILERS
            for index in range(self.clusters_per_type)
        ]

    def _sha(self) -> str:
        return f"{self._random.getrandbits(160):040x}"

    def step(self) -> None:
        """One round on: releases, and one cluster per environment starting to catch up."""
        self.rounds += 1
        for cluster in self.clusters:
            if cluster.applying is not None:
                cluster.applied, cluster.applying = cluster.applying, None
        if self.rounds % RELEASE_EVERY == 0:
            self.heads["stage"] = self.heads["dev"]
            self.heads["dev"] = (self._sha(), self._sha())
        for environment, head in self.heads.items():
            behind = [
                cluster
                for cluster in self.clusters
                if cluster.environment == environment and cluster.applied != head
            ]
            if behind:
                behind[0].applying = head

    def objects(self, cluster: SimulatedCluster) -> list[dict[str, Any]]:
        """What the cluster's reconcilers run: the platform's root, then each target's."""
        reconciler = cluster.reconciler
        attempted = cluster.applying or cluster.applied
        ready = None if cluster.applying is not None else True
        reason = "Progressing" if ready is None else "ReconciliationSucceeded"
        followed = [
            (ROOT if reconciler == "flux" else ARGO_ROOT, PLATFORM_URL, cluster.cluster_type, 0),
            *((f"{WORKLOAD}-{target}", APP_URL, target, 1) for target in TARGETS),
        ]
        return [
            record
            for name, url, path, repository in followed
            for record in records(
                reconciler,
                name,
                url=spelled(url, reconciler),
                branch=cluster.environment,
                path=folder(reconciler, path),
                applied=cluster.applied[repository],
                attempted=attempted[repository],
                ready=ready,
                reason=reason,
                message=None,
            )
        ]

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
