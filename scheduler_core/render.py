"""Rendering: the Templates of an assignment's cluster type, over its context, into files.

Follows `scheduler_core.plan`: `AssignmentRenderer.render` runs the Templates a
`PlannedAssignment`'s ClusterType names with the Go template engine, bounded in cost, time and
output. docs/contributing.md ("The template engine") gives the files, checks and limits.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

try:  # libyaml's parser, when PyYAML was built with it (its wheels are)
    from yaml import CBaseLoader as _BaseLoader
except ImportError:  # pragma: no cover
    from yaml import BaseLoader as _BaseLoader  # type: ignore[assignment]

from scheduler_core.config import ConfigError
from scheduler_core.gotemplate import Limits, Meter, TemplateError
from scheduler_core.gotemplate import Template as GoTemplate
from scheduler_core.gotemplate.functions import CallContext, Function, Param, default_functions
from scheduler_core.plan import PlannedAssignment
from scheduler_core.resources import ClusterTypeSpec, Template
from scheduler_core.scheduling import Assignment, SchedulingError
from scheduler_core.snapshot import ControlPlaneSnapshot
from scheduler_core.yamltext import problem_of, split_documents

__all__ = [
    "CONFIG_FILE",
    "MAX_ASSIGNMENT_OUTPUT",
    "NAMESPACE_FILE",
    "RECONCILER_FILE",
    "AssignmentRenderer",
    "ErrorKind",
    "RenderError",
    "Rendered",
    "TimeLimit",
]

RECONCILER_FILE = "reconciler.yaml"
NAMESPACE_FILE = "namespace.yaml"
CONFIG_FILE = "platform-config.yaml"

# Characters all templates of one assignment may render together; a file larger than a MiB is
# not harvested anyway.
MAX_ASSIGNMENT_OUTPUT = 1 << 20

# Which ClusterType field names the Template of each file.
_FILES: tuple[tuple[str, str, Callable[[ClusterTypeSpec], str | None]], ...] = (
    (RECONCILER_FILE, "reconciler", lambda spec: spec.reconciler),
    (NAMESPACE_FILE, "namespaceService", lambda spec: spec.namespace_service),
    (CONFIG_FILE, "configType", lambda spec: spec.config_type),
)

_STANDARD_TAG = "tag:yaml.org,2002:"
_STRING = _STANDARD_TAG + "str"
_NULL = _STANDARD_TAG + "null"
# Distinct document texts remembered as checked. Assignments come cluster type by cluster
# type, so a text recurring on every cluster type (a source named after its deployment
# target) is checked once per target as long as a cluster type's texts fit.
_CHECKED_TEXTS = 1 << 14

ErrorKind = Literal["scheduling", "config", "template", "manifest"]


@dataclass(frozen=True, slots=True)
class RenderError:
    """Why an assignment (or a deployment target) has no new output; `message` says it all.

    `kind`: `scheduling` (the pair cannot be assigned, or the target is in conflict),
    `config` (a schema violation), `template` (a Template missing, not parsing or failing)
    or `manifest` (a rendered document that is not a Kubernetes object in valid YAML).
    `line` counts in the template's text for a `template` error and in what it rendered
    for a `manifest` error.
    """

    environment: str
    kind: ErrorKind
    message: str
    cluster_type: str | None = None
    deployment_target: str | None = None
    template: str | None = None
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        return self.message

    @classmethod
    def of_scheduling(cls, error: SchedulingError) -> "RenderError":
        return cls(
            environment=error.environment,
            kind="scheduling",
            message=str(error),
            cluster_type=error.cluster_type,
            deployment_target=error.deployment_target,
        )

    @classmethod
    def of_config(cls, error: ConfigError) -> "RenderError":
        return cls(
            environment=error.environment,
            kind="config",
            message=str(error),
            cluster_type=error.cluster_type,
            deployment_target=error.deployment_target,
        )


@dataclass(frozen=True, slots=True)
class TimeLimit:
    """How long one assignment's render may take: `seconds` by `clock`, a monotonic clock in
    seconds that the caller hands in (the hub's is `time.monotonic`)."""

    seconds: float
    clock: Callable[[], float]


@dataclass(frozen=True, slots=True)
class Rendered:
    """An assignment's new files (name -> content), or None and why not."""

    files: Mapping[str, bytes] | None
    errors: tuple[RenderError, ...]


@dataclass(frozen=True, slots=True)
class _Problem:
    message: str
    line: int | None


# What `_check_document` says of a document that is a Kubernetes object.
_OBJECT = _Problem("", None)


@dataclass(frozen=True, slots=True)
class _Manifests:
    """A Template parsed: one Go template per `manifests` entry, or the entry that failed."""

    template: Template
    location: str
    parsed: tuple[GoTemplate, ...]
    failure: tuple[int, TemplateError] | None


class AssignmentRenderer:
    """Renders the assignments of one snapshot, sharing parsed Templates and checked texts.

    `now` is the clock Go's `now` and `date` read, the same for every assignment;
    `time_limit`, when given, how long each assignment's render may take.
    """

    def __init__(
        self,
        snapshot: ControlPlaneSnapshot,
        now: datetime,
        *,
        time_limit: TimeLimit | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._now = now
        self._time_limit = time_limit
        # The meter of the assignment being rendered, and what it rendered so far.
        self._meter = Meter(_BUDGET)
        self._output = 0
        self._templates: dict[str, _Manifests] = {}
        self._check = lru_cache(maxsize=_CHECKED_TEXTS)(_check_document)
        # Assignments built from the same ConfigMaps share one read-only config object
        # (`ComposedConfig.data`), so `toYaml` of it is made once. The objects are held here,
        # which keeps their ids from being reused by anything else.
        self._configs: dict[int, Mapping[str, Any]] = {}
        # The YAML of each, and the cost units writing it took.
        self._config_yaml: dict[int, tuple[str, int]] = {}
        self._functions = {
            "toYaml": Function("toYaml", self._to_yaml, (Param.ANY,), needs_context=True)
        }

    def render(self, planned: PlannedAssignment) -> Rendered:
        assignment = planned.assignment
        context = planned.template_context()
        self._configs.setdefault(id(planned.config.data), planned.config.data)
        limit = self._time_limit
        self._meter = Meter(
            _BUDGET,
            clock=None if limit is None else limit.clock,
            timeout=None if limit is None else limit.seconds,
        )
        self._output = 0
        errors = [RenderError.of_config(error) for error in planned.errors]
        files: dict[str, bytes] = {}
        spec = assignment.cluster_type.spec
        for file, field, template_of in _FILES:
            name = template_of(spec)
            if name is None:
                continue
            documents = self._render_file(assignment, file, field, name, context, errors)
            if self._stopped:
                break
            if documents:
                files[file] = _join(documents).encode()
        if errors:
            return Rendered(files=None, errors=tuple(errors))
        return Rendered(files=files, errors=())

    def _render_file(
        self,
        assignment: Assignment,
        file: str,
        field: str,
        name: str,
        context: Mapping[str, Any],
        errors: list[RenderError],
    ) -> list[str]:
        def error(kind: ErrorKind, what: str, line: int | None = None) -> None:
            errors.append(
                RenderError(
                    environment=assignment.environment,
                    kind=kind,
                    message=f"{_subject(assignment)}: {file}: {what}",
                    cluster_type=assignment.cluster_type.name,
                    deployment_target=assignment.deployment_target.name,
                    template=name,
                    file=file,
                    line=line,
                )
            )

        manifests = self._manifests(name)
        if manifests is None:
            error(
                "template",
                f"ClusterType {assignment.cluster_type.name} spec.{field} names Template "
                f"{name!r}, which the control plane does not define",
            )
            return []
        if manifests.failure is not None:
            index, failure = manifests.failure
            error("template", f"{_where(manifests, index)} does not parse: {failure}", failure.line)
            return []
        documents: list[str] = []
        for index, template in enumerate(manifests.parsed):
            try:
                text = template.render(context, now=self._now, meter=self._meter)
            except TemplateError as failure:
                error("template", f"{_where(manifests, index)} fails: {failure}", failure.line)
                if self._stopped:  # its budget or time is spent: the rest would fail alike
                    break
                continue
            self._output += len(text)
            if self._output > MAX_ASSIGNMENT_OUTPUT:
                error(
                    "template",
                    f"{_where(manifests, index)} fails: the assignment's files would hold more "
                    f"than {MAX_ASSIGNMENT_OUTPUT} characters, the limit of one assignment",
                )
                break
            for line, document in _documents(text):
                checked = self._check(document)
                if checked is None:
                    continue
                if checked.message:
                    at = line + (checked.line or 0)
                    rendered_line = text.splitlines()[at - 1] if checked.line is not None else ""
                    shown = f": {rendered_line.strip()!r}" if rendered_line.strip() else ""
                    error(
                        "manifest",
                        f"{_where(manifests, index)} renders a document that is not a "
                        f"Kubernetes object in valid YAML, at line {at} of its output"
                        f"{shown}: {checked.message}",
                        at,
                    )
                    continue
                documents.append(document)
        return documents

    @property
    def _stopped(self) -> bool:
        """Whether the assignment being rendered cannot render any more."""
        return self._meter.exhausted is not None or self._output > MAX_ASSIGNMENT_OUTPUT

    def _manifests(self, name: str) -> _Manifests | None:
        if name not in self._templates:
            template = self._snapshot.templates.get(name)
            if template is None:
                return None
            parsed: list[GoTemplate] = []
            failure: tuple[int, TemplateError] | None = None
            for index, text in enumerate(template.spec.manifests):
                try:
                    parsed.append(
                        GoTemplate.parse(
                            f"{name}/manifests[{index}]", text, functions=self._functions
                        )
                    )
                except TemplateError as error:
                    failure = (index, error)
                    break
            self._templates[name] = _Manifests(
                template=template,
                location=self._snapshot.location(template).file,
                parsed=tuple(parsed),
                failure=failure,
            )
        return self._templates[name]

    def _to_yaml(self, context: CallContext, value: object) -> str:
        key = id(value)
        if self._configs.get(key) is not value:
            return _to_yaml(context, value)
        cached = self._config_yaml.get(key)
        if cached is None:
            before = context.meter.spent
            text = _to_yaml(context, value)
            cached = self._config_yaml[key] = (text, context.meter.spent - before)
        else:
            # What the encoding costs, made or not: whether an assignment stays within its
            # budget does not depend on the order assignments are rendered in.
            context.meter.charge(cached[1])
        return cached[0]


# Each assignment's budget: the engine's, for all its templates together.
_BUDGET = Limits().max_cost
# The engine's own `toYaml`, so that caching it changes nothing; it charges the meter of the
# render that calls it.
_ENGINE_TO_YAML = default_functions()["toYaml"]


def _to_yaml(context: CallContext, value: object) -> str:
    text = _ENGINE_TO_YAML.impl(context, value)
    assert isinstance(text, str)
    return text


def _subject(assignment: Assignment) -> str:
    return (
        f"{assignment.environment}, cluster type {assignment.cluster_type.name}, "
        f"deployment target {assignment.deployment_target.name}"
    )


def _where(manifests: _Manifests, index: int) -> str:
    return f"Template {manifests.template.name} ({manifests.location}) manifests[{index}]"


def _documents(text: str) -> list[tuple[int, str]]:
    """The non-blank documents of a rendered text, each with the line it starts on."""
    if "---" not in text:
        chunks = [(1, text)]
    else:
        chunks = [(document.line, document.text) for document in split_documents(text)]
    return [(line, chunk) for line, chunk in chunks if chunk.strip()]


def _join(documents: list[str]) -> str:
    text = ""
    for document in documents:
        if text and not document.startswith("---"):
            text += "---\n"
        text += document.rstrip("\n") + "\n"
    return text


class _ShapeLoader(_BaseLoader):
    """Composes a document's nodes without resolving what each plain scalar is (a number, a
    boolean...): resolving is most of the cost of composing, and the shape is all that the
    check needs. The few scalars whose type matters are resolved on their own."""

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            return _PLAIN if implicit[0] else _STRING
        return self.DEFAULT_SEQUENCE_TAG if kind is SequenceNode else self.DEFAULT_MAPPING_TAG


# The tag `_ShapeLoader` leaves on a plain scalar it did not resolve.
_PLAIN = "tag:fleetmark.invalid,2026:plain"
_RESOLVER = Resolver()


def _scalar_tag(node: ScalarNode) -> str:
    """The tag a YAML reader gives `node` (composed by `_ShapeLoader`)."""
    if node.tag == _PLAIN:
        # The PyYAML stubs leave Resolver.resolve untyped; it returns the tag as a string.
        return str(_RESOLVER.resolve(ScalarNode, node.value, (True, False)))  # type: ignore[no-untyped-call]
    return str(node.tag)


def _check_document(text: str) -> _Problem | None:
    """None for a document holding nothing (or only comments), `_OBJECT` for a Kubernetes
    object, and a `_Problem` (with its 0-based line) for anything else."""
    try:
        node = yaml.compose(text, Loader=_ShapeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        return _Problem(problem_of(error), mark.line if mark is not None else None)
    if node is None or (isinstance(node, ScalarNode) and _scalar_tag(node) == _NULL):
        return None
    if not isinstance(node, MappingNode):
        kind = "list" if isinstance(node, SequenceNode) else "scalar"
        return _Problem(f"a Kubernetes object is a mapping, not a {kind}", node.start_mark.line)
    fields = {key.value: value for key, value in node.value if isinstance(key, ScalarNode)}
    for field in ("apiVersion", "kind"):
        value = fields.get(field)
        if not isinstance(value, ScalarNode) or _scalar_tag(value) != _STRING:
            return _Problem(f"{field} must be a string", node.start_mark.line)
    return _node_problem(node, text) or _OBJECT


def _node_problem(root: Node, text: str) -> _Problem | None:
    """A key twice in one mapping, or a tag no YAML reader knows, anywhere in the document."""
    # Without a '!' the text has no explicit tag, and without a '&' no anchor and so no
    # alias: most documents are plain trees, walked without that bookkeeping.
    tagged = "!" in text
    seen: set[int] | None = set() if "&" in text else None
    pending = [root]
    while pending:
        node = pending.pop()
        if seen is not None:
            if id(node) in seen:
                continue
            seen.add(id(node))
        if tagged and node.tag != _PLAIN and not node.tag.startswith(_STANDARD_TAG):
            return _Problem(f"tag {node.tag!r} is not a standard YAML tag", node.start_mark.line)
        if type(node) is MappingNode:
            keys: set[str] = set()
            for key, value in node.value:
                if type(key) is ScalarNode:
                    if key.value in keys:
                        return _Problem(f"key {key.value!r} appears twice", key.start_mark.line)
                    keys.add(key.value)
                if tagged or type(key) is not ScalarNode:
                    pending.append(key)
                if tagged or type(value) is not ScalarNode:
                    pending.append(value)
        elif type(node) is SequenceNode:
            pending.extend(node.value)
    return None
