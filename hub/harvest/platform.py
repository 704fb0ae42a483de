"""Platform GitOps repo content (Kalypso layout): what one assignment folder says, and the
control-plane commit a platform commit promotes (docs/harvesting.md).

Functions here take file contents and return values; reading git is hub/harvest/content.py's.
"""

import re
from dataclasses import dataclass, field

from hub.harvest.documents import (
    ContentError,
    Document,
    canonical_json,
    decode_text,
    load_documents,
    sha256_hex,
    text_field,
)
from hub.harvest.documents import field as document_field

NAMESPACE_FILE = "namespace.yaml"
CONFIG_FILE = "platform-config.yaml"
RECONCILER_FILE = "reconciler.yaml"
ASSIGNMENT_FILES = (NAMESPACE_FILE, CONFIG_FILE, RECONCILER_FILE)
PROMOTED_COMMIT_PATH = (".github", "tracking", "Promoted_Commit_Id")
_COMMIT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
# Argo CD's way of saying "the repository's default branch".
_DEFAULT_REVISIONS = {"", "HEAD"}
_HEADS = "refs/heads/"
# An Argo CD targetRevision that names a fixed revision rather than a branch: a commit, a tag
# ref, or a version tag (`v1.4.2`, `1.4.2-rc.1`); branches are rarely named like versions.
_ARGO_PINNED = re.compile(
    r"^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64}|refs/tags/.+|v?\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.-]+)?)$"
)


@dataclass(frozen=True, slots=True)
class AppSource:
    """Where a reconciler takes its manifests from. `branch` None: the default branch.

    `pinned`: the fixed revision it follows instead of the branch head, spelled as agents
    report a source ref (agent/sources): a commit sha, `refs/tags/<tag>`, `semver:<range>`, a
    ref name, or an Argo CD targetRevision that names a commit or a version tag.
    """

    url: str
    branch: str | None
    path: str
    pinned: str | None = None


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    # The `workload` label of Kalypso's namespace template: whose assignment this is.
    workload: str | None = None


@dataclass(frozen=True, slots=True)
class Reconciler:
    # "flux", "argocd", or None for other template output.
    kind: str | None
    # Every git source it points at; the first is the assignment's.
    sources: tuple[AppSource, ...] = ()


@dataclass(frozen=True, slots=True)
class AssignmentState:
    """What the platform repo says about one assignment at one commit (None: unreadable)."""

    namespace: str | None
    workload: str | None
    config: dict[str, str] = field(hash=False)
    config_hash: str | None
    reconciler_kind: str | None
    app: AppSource | None
    sources: tuple[AppSource, ...] = ()


def normalise_path(path: str | None) -> str:
    """`./functional-test/` and `functional-test` are one folder; "" is the repository root."""
    parts = [part for part in (path or "").split("/") if part not in {"", "."}]
    return "/".join(parts)


def parse_namespace(data: bytes, path: str) -> Namespace:
    for document in load_documents(data, path):
        if document.get("kind") == "Namespace":
            name = text_field(document, "metadata", "name")
            if not name:
                raise ContentError(path, "the Namespace has no metadata.name")
            return Namespace(name, text_field(document, "metadata", "labels", "workload"))
    raise ContentError(path, "no Namespace document")


def parse_config(data: bytes, path: str) -> dict[str, str]:
    """The `data` of every ConfigMap-like document, later documents overriding earlier ones."""
    config: dict[str, str] = {}
    for index, document in enumerate(load_documents(data, path), start=1):
        values = document.get("data")
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ContentError(path, f"document {index}: data must be a mapping")
        config |= {str(key): "" if value is None else str(value) for key, value in values.items()}
    return config


def config_hash(config: dict[str, str]) -> str:
    """sha256 of the config as canonical JSON: equal configs hash alike however written."""
    return sha256_hex(canonical_json(config))


def _flux_ref(repository: Document) -> tuple[str | None, str | None]:
    """(branch, pinned revision) of a GitRepository's `spec.ref`, the pinned revision in
    Flux's order of precedence; a `name` under refs/heads/ follows that branch."""
    branch = text_field(repository, "spec", "ref", "branch")
    name = text_field(repository, "spec", "ref", "name")
    if name and name.startswith(_HEADS):
        branch, name = name.removeprefix(_HEADS), None
    if commit := text_field(repository, "spec", "ref", "commit"):
        return branch, commit
    if name:
        return branch, name
    if semver := text_field(repository, "spec", "ref", "semver"):
        return branch, f"semver:{semver}"
    if tag := text_field(repository, "spec", "ref", "tag"):
        return branch, f"refs/tags/{tag}"
    return branch, None


def _api_group(document: Document) -> str:
    return str(document.get("apiVersion", "")).split("/", 1)[0]


def _flux_sources(documents: list[Document]) -> list[AppSource]:
    repositories = {
        text_field(document, "metadata", "name"): document
        for document in documents
        if document.get("kind") == "GitRepository"
        and _api_group(document) == "source.toolkit.fluxcd.io"
    }
    sources = []
    for document in documents:
        if document.get("kind") != "Kustomization" or not _api_group(document).startswith(
            "kustomize.toolkit.fluxcd.io"
        ):
            continue
        reference = document_field(document, "spec", "sourceRef") or {}
        if not isinstance(reference, dict) or reference.get("kind", "GitRepository") != (
            "GitRepository"
        ):
            continue
        repository = repositories.get(str(reference.get("name")))
        url = None if repository is None else text_field(repository, "spec", "url")
        if repository is None or not url:
            continue
        branch, pinned = _flux_ref(repository)
        sources.append(
            AppSource(
                url=url,
                branch=branch,
                path=normalise_path(text_field(document, "spec", "path")),
                pinned=pinned,
            )
        )
    return sources


def _argo_sources(documents: list[Document]) -> list[AppSource]:
    sources = []
    for document in documents:
        if document.get("kind") != "Application" or _api_group(document) != "argoproj.io":
            continue
        spec = document.get("spec") or {}
        candidates = spec.get("sources") or [spec.get("source")]
        for source in candidates:
            # A Helm chart source (`chart:`) or a values-only source has no manifests path.
            if not isinstance(source, dict) or source.get("chart") or source.get("path") is None:
                continue
            url = text_field(source, "repoURL")
            if not url:
                continue
            revision = text_field(source, "targetRevision") or ""
            pinned = _ARGO_PINNED.match(revision) is not None
            sources.append(
                AppSource(
                    url=url,
                    branch=None if pinned or revision in _DEFAULT_REVISIONS else revision,
                    path=normalise_path(text_field(source, "path")),
                    pinned=revision if pinned else None,
                )
            )
    return sources


def parse_reconciler(data: bytes, path: str) -> Reconciler:
    documents = load_documents(data, path)
    groups = {_api_group(document) for document in documents}
    if any(group.endswith(".toolkit.fluxcd.io") for group in groups):
        return Reconciler("flux", tuple(_flux_sources(documents)))
    if "argoproj.io" in groups:
        return Reconciler("argocd", tuple(_argo_sources(documents)))
    return Reconciler(None)


def parse_promoted_commit(data: bytes, path: str) -> str:
    text = decode_text(data, path).strip().lower()
    if not _COMMIT_ID.match(text):
        raise ContentError(path, "expected a commit id (40 or 64 hex digits)")
    return text
