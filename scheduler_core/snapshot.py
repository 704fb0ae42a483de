"""The control plane of one environment, as the loader hands it to scheduling and config.

A `ControlPlaneSnapshot` is immutable: frozen models in read-only mappings keyed and ordered by
name. `RepoRef` is how the core asks its caller for files; `SourceRevision` records the answer,
so a snapshot can say which commit of which repository every part came from.
"""

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from scheduler_core.resources import (
    BaseRepo,
    ClusterType,
    ConfigMap,
    ConfigSchema,
    Environment,
    GitOpsRepo,
    Resource,
    SchedulingPolicy,
    Template,
    Workload,
    WorkloadRegistration,
)

__all__ = [
    "ControlPlaneSnapshot",
    "Location",
    "RegisteredWorkload",
    "RepoRef",
    "SourceRevision",
]


@dataclass(frozen=True)
class RepoRef:
    """Files to read: `path` (a folder or one file) of `branch`, at `commit` when pinned."""

    repo: str
    branch: str
    path: str = "."
    commit: str | None = None

    @property
    def folder(self) -> str:
        """`path` normalised: no leading `./` or `/`, no trailing `/`; `.` for the root."""
        return posixpath.normpath(self.path.strip().lstrip("/") or ".")

    def holds(self, file: str) -> bool:
        """Whether `file` (a path from the repository root) lies within `path`."""
        folder = self.folder
        file = posixpath.normpath(file.lstrip("/"))
        return folder == "." or file == folder or file.startswith(folder + "/")

    def __str__(self) -> str:
        at = f"@{self.commit}" if self.commit else ""
        within = "" if self.folder == "." else f" ({self.folder})"
        return f"{self.repo}#{self.branch}{at}{within}"


@dataclass(frozen=True)
class SourceRevision:
    """What was read for a `RepoRef`: the commit the caller resolved it to, when it said."""

    ref: RepoRef
    commit: str | None = None

    def __str__(self) -> str:
        commit = self.commit or self.ref.commit
        return f"{self.ref.repo}#{self.ref.branch}" + (f"@{commit}" if commit else "")


@dataclass(frozen=True)
class Location:
    """Where a document was found: the source, the file, the document's number and line."""

    source: str
    file: str
    document: int
    line: int

    def __str__(self) -> str:
        return f"{self.source}: {self.file}, document {self.document} (line {self.line})"


@dataclass(frozen=True)
class RegisteredWorkload:
    """A Workload together with the registration that brought it in, and so its workspace."""

    workload: Workload
    registration: str
    workspace: str

    @property
    def name(self) -> str:
        return self.workload.name


@dataclass(frozen=True)
class ControlPlaneSnapshot:
    """Everything the scheduler reads for one environment, each kind by name."""

    environment: Environment
    cluster_types: Mapping[str, ClusterType]
    templates: Mapping[str, Template]
    scheduling_policies: Mapping[str, SchedulingPolicy]
    config_maps: Mapping[str, ConfigMap]
    config_schemas: Mapping[str, ConfigSchema]
    workload_registrations: Mapping[str, WorkloadRegistration]
    workloads: Mapping[str, RegisteredWorkload]
    gitops_repos: Mapping[str, GitOpsRepo]
    base_repo: BaseRepo | None
    # The environment's branch, the base (`main`) it is promoted to, and each registration's.
    branch: SourceRevision
    base: SourceRevision
    workload_sources: Mapping[str, SourceRevision]
    locations: Mapping[tuple[str, str], Location]

    @property
    def name(self) -> str:
        return self.environment.name

    def location(self, resource: Resource) -> Location:
        """The file and document `resource` was loaded from."""
        return self.locations[(resource.KIND, resource.name)]
