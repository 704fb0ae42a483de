"""The client's operations and models against the hub's OpenAPI document: every operation a
script would want is there, with the query parameters the hub takes, a body of the fields it
reads, and an answer model of exactly the document the hub answers.

The client keeps models of its own (the server's schemas stay the server's); this is what keeps
the two in step, as the agent's report contract test does for reports."""

from typing import Any

import pytest
from pydantic import TypeAdapter

from hub.client.operations import OPERATIONS, REPORT, Operation

# Operations the client leaves out, and why.
NOT_ASKED = {
    ("GET", "/healthz"): "the process is up: for orchestrators",
    ("GET", "/readyz"): "the database answers: for orchestrators",
    ("GET", "/api/v1/dora/deployments.csv"): "the same rows: DoraDeploymentPage.to_dataframe()",
}
# What a JSON Schema says of a value beside its shape (an answer carries every field).
PROSE = {"title", "description", "examples", "default"}


def shape(schema: Any, definitions: dict[str, Any]) -> Any:
    """A JSON Schema with references resolved and its prose left out: what a value may be.
    `additionalProperties: true` (the client keeps fields it does not know) is left out too."""
    if isinstance(schema, list):
        return [shape(item, definitions) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return shape(definitions[schema["$ref"].rsplit("/", 1)[-1]], definitions)
    return {
        key: shape(value, definitions)
        for key, value in schema.items()
        if key not in PROSE
        and key != "$defs"
        and not (key == "additionalProperties" and value is True)
    }


def hub_operation(document: dict[str, Any], operation: Operation[Any]) -> dict[str, Any]:
    found: dict[str, Any] = document["paths"][operation.path][operation.method.lower()]
    return found


def answered(document: dict[str, Any], operation: Operation[Any]) -> Any:
    """The schema of what the hub answers on success; None when it answers no content."""
    responses = hub_operation(document, operation)["responses"]
    [success] = [code for code in responses if code.startswith("2")]
    content = responses[success].get("content")
    if content is None:
        return None
    return shape(content["application/json"]["schema"], document["components"]["schemas"])


def ids(operation: Operation[Any]) -> str:
    return f"{operation.method} {operation.path}"


def test_the_client_asks_every_operation_a_script_would_want(
    openapi_document: dict[str, Any],
) -> None:
    asked = {(operation.method, operation.path) for operation in OPERATIONS}
    offered = {
        (method.upper(), path)
        for path, methods in openapi_document["paths"].items()
        for method in methods
        if path.startswith("/api/") or path in ("/healthz", "/readyz")
    }

    assert asked <= offered, asked - offered
    assert offered - asked == set(NOT_ASKED)


@pytest.mark.parametrize("operation", OPERATIONS, ids=ids)
def test_an_operation_sends_the_query_parameters_the_hub_takes(
    openapi_document: dict[str, Any], operation: Operation[Any]
) -> None:
    parameters = hub_operation(openapi_document, operation).get("parameters", [])
    taken = {parameter["name"] for parameter in parameters if parameter["in"] == "query"}

    assert set(operation.query) == taken
    assert len(operation.query) == len(taken)


@pytest.mark.parametrize("operation", OPERATIONS, ids=ids)
def test_an_answer_model_reads_the_document_the_hub_answers(
    openapi_document: dict[str, Any], operation: Operation[Any]
) -> None:
    expected = answered(openapi_document, operation)
    if operation.answer is None:
        assert expected is None
        return
    schema = TypeAdapter(operation.answer).json_schema(mode="serialization")

    assert shape(schema, schema.get("$defs", {})) == expected


@pytest.mark.parametrize("operation", [o for o in OPERATIONS if o.body is not None], ids=ids)
def test_a_body_holds_the_fields_the_hub_reads(
    openapi_document: dict[str, Any], operation: Operation[Any]
) -> None:
    assert operation.body is not None
    content = hub_operation(openapi_document, operation)["requestBody"]["content"]
    hub = shape(content["application/json"]["schema"], openapi_document["components"]["schemas"])
    client = operation.body.model_json_schema()

    assert list(client["properties"]) == list(hub["properties"])
    assert set(client.get("required", ())) == set(hub.get("required", ()))


def test_only_the_report_is_sent_as_the_document_it_is(openapi_document: dict[str, Any]) -> None:
    """The report is the agent's contract (agent/report.py, with a contract test of its own)."""
    sent_as_is = [
        operation
        for operation in OPERATIONS
        if operation.body is None and "requestBody" in hub_operation(openapi_document, operation)
    ]

    assert sent_as_is == [REPORT]
