"""The repositories file (`FLEETMARK_REPOSITORIES_FILE`): which GitOps repositories to harvest.

Parsed into `RepositoriesFile` (hub/harvest/schemas.py); its format is in docs/harvesting.md.
Errors name the file, the line and the field, never the value, so a secret pasted by mistake
does not end up in a log.
"""

from pathlib import Path

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from hub.errors import InvalidConfiguration
from hub.harvest.schemas import RepositoriesFile


def _line_of(node: yaml.Node | None, location: tuple[int | str, ...]) -> int | None:
    """The line (1-based) of the YAML node a validation error points at, as far as it exists."""
    line = None
    for step in location:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((value for key, value in node.value if key.value == step), None)
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value)
        ):
            node = node.value[step]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line


def _describe(error: ErrorDetails) -> str:
    location = tuple(part for part in error["loc"] if not str(part).startswith("function-"))
    return "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in location
    ).lstrip(".")


def parse_repositories(text: str, source: str) -> RepositoriesFile:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" line {mark.line + 1}:" if mark else ""
        raise InvalidConfiguration(f"{source}:{where} invalid YAML: {exc.problem}") from None
    try:
        return RepositoriesFile.model_validate(data if data is not None else {})
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            line = _line_of(node, tuple(error["loc"]))
            where = f" line {line}:" if line else ""
            field = _describe(error)
            problems.append(f"{source}:{where} {field + ': ' if field else ''}{error['msg']}")
        raise InvalidConfiguration("; ".join(problems)) from None


def load_repositories_file(path: Path) -> RepositoriesFile:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidConfiguration(
            f"{path}: cannot read the repositories file ({exc.strerror})"
        ) from None
    except UnicodeDecodeError:
        raise InvalidConfiguration(f"{path}: not UTF-8 text") from None
    return parse_repositories(text, str(path))
