"""Application GitOps repo content: the workload version, images and digest of one folder, by
the rules of docs/harvesting.md.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from hub.harvest.documents import (
    ContentError,
    Document,
    canonical_json,
    load_documents,
    sha256_hex,
    text_field,
)
from hub.harvest.documents import field as document_field

YAML_SUFFIXES = (".yaml", ".yml")
KUSTOMIZATION_FILES = {"kustomization.yaml", "kustomization.yml", "Kustomization"}
VERSION_LABEL = "app.kubernetes.io/version"


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """A file of the folder: `data` is None when it was not read (too large, a link...)."""

    path: str
    blob: str
    data: bytes | None


@dataclass(frozen=True, slots=True)
class ManifestState:
    workload_version: str | None
    version_source: str | None
    images: tuple[str, ...]
    digest: str


def _is_yaml(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(YAML_SUFFIXES) or name in KUSTOMIZATION_FILES


def _containers(value: Any, key: str = "containers") -> Iterator[dict[str, Any]]:
    """Container specs anywhere in a document, in document order (any workload kind or CRD)."""
    if isinstance(value, dict):
        for name, item in value.items():
            if name == key and isinstance(item, list):
                yield from (container for container in item if isinstance(container, dict))
            else:
                yield from _containers(item, key)
    elif isinstance(value, list):
        for item in value:
            yield from _containers(item, key)


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """(name, tag, digest) of `registry:5000/team/app:1.2.3@sha256:...`."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
        return name, tag, digest or None
    return name, None, digest or None


def _override(image: str, overrides: dict[str, dict[str, Any]]) -> str:
    """kustomize's rule: a new digest replaces tag and digest, a new tag replaces both too."""
    name, tag, digest = split_image(image)
    rule = overrides.get(name)
    if rule is None:
        return image
    if rule.get("digest"):
        tag, digest = None, str(rule["digest"])
    elif rule.get("newTag") is not None:
        tag, digest = str(rule["newTag"]), None
    return _join_image(str(rule.get("newName") or name), tag, digest)


def _join_image(name: str, tag: str | None, digest: str | None) -> str:
    return name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def _image_overrides(documents: Sequence[tuple[str, Document]]) -> dict[str, dict[str, Any]]:
    overrides: dict[str, dict[str, Any]] = {}
    for path, document in documents:
        if path.rsplit("/", 1)[-1] not in KUSTOMIZATION_FILES:
            continue
        for rule in document.get("images") or []:
            if isinstance(rule, dict) and rule.get("name"):
                overrides[str(rule["name"])] = rule
    return overrides


def summarise(
    files: Sequence[ManifestFile], folder: str
) -> tuple[ManifestState, list[ContentError]]:
    """The state of a folder from its files (repository paths under `folder`, any order)."""
    prefix = f"{folder}/" if folder else ""
    problems: list[ContentError] = []
    documents: list[tuple[str, Document]] = []
    digest_parts: list[bytes] = []
    for file in sorted(files, key=lambda item: item.path):
        content: bytes
        if file.data is None:
            content = f"blob:{file.blob}".encode()
        elif _is_yaml(file.path):
            try:
                parsed = load_documents(file.data, file.path)
            except ContentError as exc:
                problems.append(exc)
                content = file.data
            else:
                documents.extend((file.path, document) for document in parsed)
                content = canonical_json(parsed)
        else:
            content = file.data
        # Paths relative to the folder: the same manifests elsewhere have the same digest.
        relative = file.path.removeprefix(prefix)
        digest_parts.append(relative.encode() + b"\0" + content + b"\0")

    overrides = _image_overrides(documents)
    workloads = [
        document
        for path, document in documents
        if path.rsplit("/", 1)[-1] not in KUSTOMIZATION_FILES
    ]
    images: list[str] = []
    for document in workloads:
        for key in ("containers", "initContainers"):
            images.extend(
                _override(str(container["image"]), overrides)
                for container in _containers(document, key)
                if container.get("image")
            )
    matched = {split_image(image)[0] for image in images}
    for name, rule in overrides.items():
        image = _override(name, overrides)
        if split_image(image)[0] not in matched and (rule.get("newTag") or rule.get("digest")):
            images.append(image)

    version, source = _version(workloads, overrides)
    state = ManifestState(
        workload_version=version,
        version_source=source,
        images=tuple(sorted(set(images))),
        digest="sha256:" + sha256_hex(b"".join(digest_parts)),
    )
    return state, problems


def _version(
    workloads: list[Document], overrides: dict[str, dict[str, Any]]
) -> tuple[str | None, str | None]:
    for document in workloads:
        if document.get("kind") == "DeploymentDescriptor":
            version = text_field(document, "spec", "workloadVersion", "version")
            if version:
                return version, "descriptor"
    for document in workloads:
        labels = document_field(document, "metadata", "labels")
        if isinstance(labels, dict) and labels.get(VERSION_LABEL):
            return str(labels[VERSION_LABEL]), "label"
    for document in workloads:
        for container in _containers(document):
            if container.get("image"):
                tag = split_image(_override(str(container["image"]), overrides))[1]
                return (tag, "image") if tag else (None, None)
    return None, None
