"""Control-plane files in, one immutable snapshot per environment out.

The first step of the scheduler core: `load_control_plane` reads a Kalypso control plane as
Kalypso's controllers do (docs/scheduling.md, "What a schedule does"), every read through the
caller's `Fetch`; a bad document becomes a `LoadError` and the rest still loads.
"""

import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, cast

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from scheduler_core.resources import (
    KINDS,
    PLATFORM_CONFIG_LABEL,
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
from scheduler_core.snapshot import (
    ControlPlaneSnapshot,
    Location,
    RegisteredWorkload,
    RepoRef,
    SourceRevision,
)
from scheduler_core.yamltext import YamlDocument, load_yaml, problem_of, split_documents

__all__ = [
    "Fetch",
    "FetchError",
    "Fetched",
    "LoadError",
    "LoadResult",
    "Loaded",
    "ParsedFiles",
    "load_control_plane",
    "parse_files",
]

_YAML_SUFFIXES = (".yaml", ".yml")
R = TypeVar("R", bound=Resource)


class FetchError(Exception):
    """Raised by a `Fetch` when it cannot read a ref; the message says why."""


@dataclass(frozen=True)
class Fetched:
    """The files of a ref (repository-relative path -> content) and the commit they are at."""

    files: Mapping[str, bytes]
    commit: str | None = None


class Fetch(Protocol):
    """The caller's reader: the files of `ref` (at least those under `ref.path`)."""

    def __call__(self, ref: RepoRef, /) -> Fetched: ...


@dataclass(frozen=True)
class LoadError:
    """A document, or a repository, that could not be loaded, and why."""

    source: str
    message: str
    file: str | None = None
    document: int | None = None
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = [self.source]
        if self.file is not None:
            where.append(self.file)
        if self.document is not None:
            where.append(f"document {self.document}")
        if self.line is not None:
            where.append(f"line {self.line}")
        what = f"{self.field}: {self.message}" if self.field else self.message
        return f"{', '.join(where)}: {what}"


@dataclass(frozen=True)
class Loaded:
    """A valid resource and where it came from."""

    resource: Resource
    location: Location


@dataclass(frozen=True)
class ParsedFiles:
    """The Kalypso resources of one read, in file and document order, and its load errors."""

    revision: SourceRevision
    resources: tuple[Loaded, ...]
    errors: tuple[LoadError, ...]

    def of_kind(self, kind: type[R]) -> Iterator[tuple[R, Location]]:
        for loaded in self.resources:
            if isinstance(loaded.resource, kind):
                yield loaded.resource, loaded.location


@dataclass(frozen=True)
class LoadResult:
    snapshots: Mapping[str, ControlPlaneSnapshot]
    errors: tuple[LoadError, ...]


def parse_files(files: Mapping[str, bytes], ref: RepoRef, commit: str | None = None) -> ParsedFiles:
    """The Kalypso resources in the YAML files under `ref.path`, in path order."""
    revision = SourceRevision(ref=ref, commit=commit)
    source = str(revision)
    resources: list[Loaded] = []
    errors: list[LoadError] = []
    for path in sorted(files):
        file = posixpath.normpath(path.lstrip("/"))
        if not file.endswith(_YAML_SUFFIXES) or not ref.holds(file):
            continue
        try:
            text = files[path].decode("utf-8-sig")
        except UnicodeDecodeError as error:
            errors.append(LoadError(source, f"not UTF-8 text: {error}", file=file))
            continue
        for document in split_documents(text):
            _parse_document(document, source, file, resources, errors)
    return ParsedFiles(revision=revision, resources=tuple(resources), errors=tuple(errors))


def _parse_document(
    document: YamlDocument,
    source: str,
    file: str,
    resources: list[Loaded],
    errors: list[LoadError],
) -> None:
    location = Location(source=source, file=file, document=document.number, line=document.line)
    try:
        data = load_yaml(document.text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = document.line + mark.line if mark is not None else document.line
        message = f"not valid YAML: {problem_of(error)}"
        errors.append(LoadError(source, message, file, document.number, line))
        return
    kind = _kind_of(data)
    if kind is None:
        return
    try:
        resource = kind.model_validate(data)
    except ValidationError as error:
        errors.extend(
            LoadError(
                source,
                _message(detail),
                file,
                document.number,
                _line_of(document, detail["loc"]),
                _field(detail["loc"]),
            )
            for detail in error.errors(include_url=False)
        )
        return
    resources.append(Loaded(resource=resource, location=location))


def _kind_of(data: Any) -> type[Resource] | None:
    if not isinstance(data, dict):
        return None
    api_version, kind_name = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind_name, str):
        return None
    kind = KINDS.get((api_version, kind_name))
    if kind is ConfigMap:
        metadata = data.get("metadata")
        labels = metadata.get("labels") if isinstance(metadata, dict) else None
        # A boolean `true` is taken in too, so that its owner hears it must be the string "true".
        if not isinstance(labels, dict) or str(labels.get(PLATFORM_CONFIG_LABEL)).lower() != "true":
            return None
    return kind


def _message(detail: ErrorDetails) -> str:
    context = detail.get("ctx", {})
    if detail["type"] == "value_error" and "error" in context:
        return str(context["error"])
    return detail["msg"]


def _field(loc: tuple[int | str, ...]) -> str | None:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or None


def _line_of(document: YamlDocument, loc: tuple[int | str, ...]) -> int:
    """The file line of the deepest node of `loc` present in the document."""
    node = yaml.compose(document.text, Loader=yaml.SafeLoader)
    line = node.start_mark.line if node is not None else 0
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            node = next((value for key, value in node.value if key.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            node = node.value[part] if part < len(node.value) else None
        else:
            node = None
        if node is None:
            break
        line = node.start_mark.line
    return document.line + line


def load_control_plane(main: RepoRef, fetch: Fetch) -> LoadResult:
    """Every environment that `main`'s Environments declare, each as a snapshot."""
    reader = _Reader(fetch)
    base_head = reader.read(main)
    if base_head is None:
        return LoadResult(snapshots=MappingProxyType({}), errors=reader.all_errors())
    environments = _Index(reader)
    environments.add_all(base_head, (Environment,))
    snapshots: dict[str, ControlPlaneSnapshot] = {}
    for name, (environment, location) in sorted(environments.of_kind(Environment).items()):
        spec = environment.spec.control_plane
        ref = RepoRef(repo=spec.repo, branch=spec.branch, path=spec.path)
        branch = reader.read(ref, location, "spec.controlPlane")
        if branch is None:
            continue
        base = _base_of(branch, base_head, reader)
        if base is not None:
            snapshots[name] = _assemble(environment, branch, base, reader)
    return LoadResult(snapshots=MappingProxyType(snapshots), errors=reader.all_errors())


def _base_of(branch: ParsedFiles, base_head: ParsedFiles, reader: "_Reader") -> ParsedFiles | None:
    pin = next(branch.of_kind(BaseRepo), None)
    if pin is None:
        return base_head
    base_repo, location = pin
    spec = base_repo.spec
    ref = RepoRef(repo=spec.repo, branch=spec.branch, path=spec.path, commit=spec.commit)
    return reader.read(ref, location, "spec")


# What the base and an environment branch give a snapshot. Environments are read from `main`
# only, a BaseRepo from the environment's branch only (it pins the base), and Workloads from
# the repositories their registrations name.
_BASE_KINDS: tuple[type[Resource], ...] = (
    ClusterType,
    Template,
    WorkloadRegistration,
    SchedulingPolicy,
    ConfigSchema,
    ConfigMap,
    GitOpsRepo,
)
_BRANCH_KINDS: tuple[type[Resource], ...] = (*_BASE_KINDS, BaseRepo)


def _assemble(
    environment: Environment, branch: ParsedFiles, base: ParsedFiles, reader: "_Reader"
) -> ControlPlaneSnapshot:
    index = _Index(reader)
    # The base first: a name repeated on the environment branch is reported there.
    for part, kinds in ((base, _BASE_KINDS), (branch, _BRANCH_KINDS)):
        index.add_all(part, kinds)
        for workload, location in part.of_kind(Workload):
            reader.error_at(
                location,
                "kind",
                f"Workload {workload.name!r} is in the control plane; workloads are read from "
                "the repository a WorkloadRegistration names",
            )
    workloads: dict[str, RegisteredWorkload] = {}
    workload_sources: dict[str, SourceRevision] = {}
    for name, (registration, location) in index.of_kind(WorkloadRegistration).items():
        spec = registration.spec.workload
        ref = RepoRef(repo=spec.repo, branch=spec.branch, path=spec.path)
        source = reader.read(ref, location, "spec.workload")
        if source is None:
            continue
        workload_sources[name] = source.revision
        if next(source.of_kind(Workload), None) is None:
            reader.error_at(location, "spec.workload", f"no Workload document found in {ref}")
        for added in index.add_all(source, (Workload,), refused=_BRANCH_KINDS):
            workload = cast(Workload, added)
            workloads[workload.name] = RegisteredWorkload(
                workload=workload, registration=name, workspace=registration.spec.workspace
            )
    base_repo = next(iter(index.of_kind(BaseRepo).values()), None)
    return ControlPlaneSnapshot(
        environment=environment,
        cluster_types=index.named(ClusterType),
        templates=index.named(Template),
        scheduling_policies=index.named(SchedulingPolicy),
        config_maps=index.named(ConfigMap),
        config_schemas=index.named(ConfigSchema),
        workload_registrations=index.named(WorkloadRegistration),
        workloads=_frozen(workloads),
        gitops_repos=index.named(GitOpsRepo),
        base_repo=base_repo[0] if base_repo else None,
        branch=branch.revision,
        base=base.revision,
        workload_sources=_frozen(workload_sources),
        locations=MappingProxyType(dict(sorted(index.locations.items()))),
    )


_V = TypeVar("_V")


def _frozen(items: Mapping[str, _V]) -> Mapping[str, _V]:
    return MappingProxyType(dict(sorted(items.items())))


@dataclass
class _Reader:
    """Fetches and parses each ref once, and gathers every error once."""

    fetch: Fetch
    parsed: dict[RepoRef, ParsedFiles | None] = field(default_factory=dict)
    errors: dict[LoadError, None] = field(default_factory=dict)

    def read(
        self, ref: RepoRef, referrer: Location | None = None, referrer_field: str | None = None
    ) -> ParsedFiles | None:
        if ref not in self.parsed:
            try:
                fetched = self.fetch(ref)
            except FetchError as error:
                message = f"could not read {ref}: {error}"
                if referrer is None:
                    self.errors[LoadError(str(ref), message)] = None
                else:
                    self.error_at(referrer, referrer_field, message)
                self.parsed[ref] = None
            else:
                parsed = parse_files(fetched.files, ref, fetched.commit)
                self.errors.update(dict.fromkeys(parsed.errors))
                self.parsed[ref] = parsed
        return self.parsed[ref]

    def error_at(self, location: Location, field: str | None, message: str) -> None:
        error = LoadError(
            location.source, message, location.file, location.document, location.line, field
        )
        self.errors[error] = None

    def all_errors(self) -> tuple[LoadError, ...]:
        return tuple(self.errors)


class _Index:
    """Resources by kind and name; a second resource of the same kind and name is an error."""

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader
        self.resources: dict[type[Resource], dict[str, tuple[Resource, Location]]] = {}
        self.locations: dict[tuple[str, str], Location] = {}

    def add_all(
        self,
        part: ParsedFiles,
        kinds: tuple[type[Resource], ...],
        refused: tuple[type[Resource], ...] = (),
    ) -> list[Resource]:
        added = []
        for loaded in part.resources:
            resource, location = loaded.resource, loaded.location
            if isinstance(resource, refused):
                self.reader.error_at(
                    location,
                    "kind",
                    f"{resource.KIND} {resource.name!r} is in a workload repository, "
                    "which is read for Workload documents only",
                )
            elif isinstance(resource, kinds) and self._add(resource, location):
                added.append(resource)
        return added

    def _add(self, resource: Resource, location: Location) -> bool:
        of_kind = self.resources.setdefault(type(resource), {})
        if isinstance(resource, BaseRepo) and of_kind:
            _, first = next(iter(of_kind.values()))
            self.reader.error_at(
                location, "kind", f"an environment has one BaseRepo; the first is at {first}"
            )
            return False
        if resource.name in of_kind:
            _, first = of_kind[resource.name]
            self.reader.error_at(
                location,
                "metadata.name",
                f"{resource.KIND} {resource.name!r} is defined twice; the first is at {first}",
            )
            return False
        of_kind[resource.name] = (resource, location)
        self.locations[(resource.KIND, resource.name)] = location
        return True

    def of_kind(self, kind: type[R]) -> dict[str, tuple[R, Location]]:
        found = self.resources.get(kind, {})
        return {name: (cast(R, found[name][0]), found[name][1]) for name in sorted(found)}

    def named(self, kind: type[R]) -> Mapping[str, R]:
        return MappingProxyType({name: entry[0] for name, entry in self.of_kind(kind).items()})
