"""The reconciler resources the agent watches, and the mapper that turns each into a record.

The watch loop lists and watches every kind below whose API group the cluster serves, in the
first of its `versions` served (newest first), so every object is reported once. Hosts
without Kubernetes report through `agent.sources.generic` instead.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from agent.report import ObjectRecord, Reconciler
from agent.sources import argocd, flux

__all__ = ["WATCHED_KINDS", "Mapper", "WatchedKind"]

Mapper = Callable[[Mapping[str, object], datetime], ObjectRecord]


@dataclass(frozen=True, slots=True)
class WatchedKind:
    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    reconciler: Reconciler
    mapper: Mapper


WATCHED_KINDS: tuple[WatchedKind, ...] = (
    WatchedKind(
        group="kustomize.toolkit.fluxcd.io",
        versions=("v1", "v1beta2"),
        plural="kustomizations",
        kind="Kustomization",
        reconciler="flux",
        mapper=flux.kustomization,
    ),
    WatchedKind(
        group="helm.toolkit.fluxcd.io",
        versions=("v2", "v2beta2", "v2beta1"),
        plural="helmreleases",
        kind="HelmRelease",
        reconciler="flux",
        mapper=flux.helm_release,
    ),
    WatchedKind(
        group="source.toolkit.fluxcd.io",
        versions=("v1", "v1beta2"),
        plural="gitrepositories",
        kind="GitRepository",
        reconciler="flux",
        mapper=flux.git_repository,
    ),
    WatchedKind(
        group="source.toolkit.fluxcd.io",
        versions=("v1", "v1beta2"),
        plural="ocirepositories",
        kind="OCIRepository",
        reconciler="flux",
        mapper=flux.oci_repository,
    ),
    WatchedKind(
        group="argoproj.io",
        versions=("v1alpha1",),
        plural="applications",
        kind="Application",
        reconciler="argocd",
        mapper=argocd.application,
    ),
)
