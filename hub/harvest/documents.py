"""Reading YAML manifests out of git blobs, with errors that name the file, document and line."""

import hashlib
import json
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader  # type: ignore[assignment]

Document = dict[str, Any]
# Git's own test for binary content: a NUL byte in the first 8,000 bytes.
_BINARY_PROBE = 8000


class ContentError(Exception):
    """A file that cannot be used; the message names the file and, where known, the line."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


def decode_text(data: bytes, path: str) -> str:
    if b"\0" in data[:_BINARY_PROBE]:
        raise ContentError(path, "binary file, expected YAML text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContentError(path, f"not UTF-8 text (byte {exc.start})") from None


def load_documents(data: bytes, path: str) -> list[Document]:
    """The YAML documents of a file, empty ones skipped; each must be a mapping."""
    text = decode_text(data, path)
    try:
        loaded = list(yaml.load_all(text, Loader=SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ContentError(path, f"{where}invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ContentError(path, f"invalid YAML: {exc}") from None
    documents = []
    for index, document in enumerate(loaded, start=1):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ContentError(
                path, f"document {index} is a {type(document).__name__}, expected a mapping"
            )
        documents.append(document)
    return documents


def canonical_json(value: Any) -> bytes:
    """One byte form per value: sorted keys, no insignificant whitespace."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def field(document: Document, *path: str) -> Any:
    """document[path[0]][path[1]]..., or None where a step is missing or not a mapping."""
    value: Any = document
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def text_field(document: Document, *path: str) -> str | None:
    value = field(document, *path)
    return None if value is None else str(value)
