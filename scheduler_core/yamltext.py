"""YAML text as the scheduler core reads it: control-plane files and platform-config values.

PyYAML's safe loader, minus timestamps (a date stays its text, since values end up in JSON
Schema validation and canonical JSON), refusing duplicate keys as the API server does. A file
is split into documents before parsing, so one broken document costs only itself.
"""

import re
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

__all__ = ["YamlDocument", "load_yaml", "problem_of", "split_documents"]

# A document starts at a `---` line; inside a block scalar such a line would be indented.
_DOCUMENT_START = re.compile(r"---(?:[ \t]|$)")


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable) and key in seen:
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


# Drop the timestamp resolver (copying the class-level table, not editing SafeLoader's).
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str) -> Any:
    """One YAML document, parsed; raises `yaml.YAMLError` when it is not valid YAML."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader


def problem_of(error: yaml.YAMLError) -> str:
    """What PyYAML found wrong, without its "in <unicode string>, line ..." marks."""
    problem = getattr(error, "problem", None)
    context = getattr(error, "context", None)
    return " ".join(part for part in (context, problem) if part) or str(error)


@dataclass(frozen=True)
class YamlDocument:
    """One document of a file: its 1-based number, the file line it starts on, and its text."""

    number: int
    line: int
    text: str


def split_documents(text: str) -> Iterator[YamlDocument]:
    """The documents of a multi-document file, each still as text.

    Numbering counts `---`-separated documents as a reader of the file would; text before the
    first `---` that holds only comments or blank lines is not a document.
    """
    starts = [0]
    lines = text.splitlines(keepends=True)
    starts.extend(index for index, line in enumerate(lines) if _DOCUMENT_START.match(line))
    number = 0
    for position, start in enumerate(starts):
        end = starts[position + 1] if position + 1 < len(starts) else len(lines)
        if start == end and position == 0:
            continue
        chunk = "".join(lines[start:end])
        if position == 0 and not _has_content(chunk):
            continue
        number += 1
        yield YamlDocument(number=number, line=start + 1, text=chunk)


def _has_content(chunk: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in chunk.splitlines())
