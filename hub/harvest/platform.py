"""Platform GitOps repo content (Kalypso layout): what one assignment folder says.

`<clusterType>/<deploymentTarget>/` holds `namespace.yaml` (the Namespace), `platform-config.yaml`
(the composed platform config, a ConfigMap in Kalypso's default template) and
`reconciler.yaml` (Flux GitRepository + Kustomization, an Argo CD Application, or any other
template output). `.github/tracking/Promoted_Commit_Id` names the control-plane commit a
platform commit promotes. Functions here take file contents and return values; reading git
is hub/harvest/content.py's job.
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


@dataclass(frozen=True, slots=True)
class AppSource:
    """Where a reconciler takes its manifests from. `branch` None: the default branch."""

    url: str
    branch: str | None
    path: str


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
    config: dict[str, str] = field(hash=False)
    config_hash: str | None
    reconciler_kind: str | None
    app: AppSource | None
    sources: tuple[AppSource, ...] = ()


def normalise_path(path: str | None) -> str:
    """`./functional-test/` and `functional-test` are one folder; "" is the repository root."""
    parts = [part for part in (path or "").split("/") if part not in {"", "."}]
    return "/".join(parts)


def parse_namespace(data: bytes, path: str) -> str:
    for document in load_documents(data, path):
        if document.get("kind") == "Namespace":
            name = text_field(document, "metadata", "name")
            if not name:
                raise ContentError(path, "the Namespace has no metadata.name")
            return name
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
        sources.append(
            AppSource(
                url=url,
                branch=text_field(repository, "spec", "ref", "branch"),
                path=normalise_path(text_field(document, "spec", "path")),
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
            sources.append(
                AppSource(
                    url=url,
                    branch=None if revision in _DEFAULT_REVISIONS else revision,
                    path=normalise_path(text_field(source, "path")),
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
