"""MkDocs hooks: the pages generated from the code at build time, so they cannot drift from it.

`<!-- generated: settings -->` becomes the table of HubSettings' fields (hub/settings.py) and
`<!-- generated: openapi -->` the hub's OpenAPI document as Markdown, and
`<!-- generated: events -->` the JSON Schema of each event type's `data` (hub/tasks.py).
"""

import json
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from hub.app import create_app
from hub.settings import HubSettings
from hub.tasks import EVENT_TYPES

SETTINGS = "<!-- generated: settings -->"
OPENAPI = "<!-- generated: openapi -->"
EVENTS = "<!-- generated: events -->"
JSON_SCHEMA = "https://json-schema.org/draft/2020-12/schema"
# create_app opens nothing until it starts; the document needs no database.
UNUSED_DATABASE = "postgresql://unused@127.0.0.1/unused"
METHODS = ("get", "put", "post", "patch", "delete")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if SETTINGS in markdown:
        markdown = markdown.replace(SETTINGS, settings_table())
    if OPENAPI in markdown:
        document = create_app(HubSettings(), UNUSED_DATABASE).openapi()
        markdown = markdown.replace(OPENAPI, openapi_markdown(document))
    if EVENTS in markdown:
        markdown = markdown.replace(EVENTS, events_markdown())
    return markdown


def event_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of an event type's `data`."""
    return {"$schema": JSON_SCHEMA, **model.model_json_schema()}


def events_markdown() -> str:
    """Per model of `data`, the event types that carry it and its JSON Schema."""
    types: dict[type[BaseModel], list[str]] = {}
    for name, model in EVENT_TYPES.items():
        types.setdefault(model, []).append(name)
    lines: list[str] = []
    for model, names in types.items():
        lines += [f"### {', '.join(f'`{name}`' for name in names)}", ""]
        if model.__doc__:
            lines += [cell(model.__doc__), ""]
        lines += ["```json", json.dumps(event_schema(model), indent=2), "```", ""]
    return "\n".join(lines)


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def settings_table() -> str:
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in HubSettings.model_fields.items():
        if field.description is None:
            raise ValueError(f"HubSettings.{name} has no description")
        if field.default_factory is not None:
            default = "see meaning"
        else:
            default = show_default(field.default)
        rows.append(f"| `FLEETMARK_{name.upper()}` | {default} | {cell(field.description)} |")
    return "\n".join(rows)


def show_default(value: Any) -> str:
    if value is None or value is PydanticUndefined:
        return "unset"
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
            if seconds >= size and seconds % size == 0:
                return f"`{seconds:g}` ({seconds / size:g} {unit})"
        return f"`{seconds:g}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def openapi_markdown(document: dict[str, Any]) -> str:
    lines: list[str] = [f"Version {document['info']['version']}.", ""]
    for path, operations in document["paths"].items():
        for method in METHODS:
            if method in operations:
                lines.extend(operation_markdown(method, path, operations[method]))
    lines.extend(["## Schemas", ""])
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        lines.extend(schema_markdown(name, schema))
    return "\n".join(lines)


def operation_markdown(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", ""]
    if summary := operation.get("summary"):
        lines.extend([f"**{summary}**", ""])
    if description := operation.get("description"):
        lines.extend([description.strip(), ""])
    if parameters := operation.get("parameters"):
        lines.extend(["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"])
        for parameter in parameters:
            lines.append(
                f"| `{parameter['name']}` | {parameter['in']} | "
                f"{type_of(parameter.get('schema', {}))} | "
                f"{'yes' if parameter.get('required') else 'no'} | "
                f"{cell(parameter.get('description', ''))} |"
            )
        lines.append("")
    if body := operation.get("requestBody"):
        for media, content in body.get("content", {}).items():
            lines.extend([f"Body ({media}): {type_of(content.get('schema', {}))}", ""])
    lines.extend(["| status | meaning | body |", "|---|---|---|"])
    for status, response in operation.get("responses", {}).items():
        schemas = [
            type_of(content["schema"])
            for content in response.get("content", {}).values()
            if "schema" in content
        ]
        lines.append(
            f"| {status} | {cell(response.get('description', ''))} | {', '.join(schemas)} |"
        )
    lines.append("")
    return lines


def schema_markdown(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if description := schema.get("description"):
        lines.extend([cell(description), ""])
    if "enum" in schema:
        lines.extend(["One of " + ", ".join(f"`{json.dumps(v)}`" for v in schema["enum"]), ""])
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines.extend(["| field | type | required | meaning |", "|---|---|---|---|"])
        for field, definition in properties.items():
            lines.append(
                f"| `{field}` | {type_of(definition)} | {'yes' if field in required else 'no'} "
                f"| {cell(definition.get('description', ''))} |"
            )
        lines.append("")
    return lines


def type_of(schema: dict[str, Any]) -> str:
    """A schema's type in a few words, its named schemas linked."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for combined in ("anyOf", "oneOf", "allOf"):
        if combined in schema:
            return " or ".join(type_of(part) for part in schema[combined])
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {type_of(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        values = schema["additionalProperties"]
        return f"map of {type_of(values) if isinstance(values, dict) else 'any'}"
    if kind is None:
        return "any"
    return str(kind) + (f" ({schema['format']})" if "format" in schema else "")
