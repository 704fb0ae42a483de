"""Bad parameters and bodies: 422 naming the field, never a 500; and every error body is what
/openapi.json declares for that operation and status."""

import re
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from hub.client.params import MAX_OFFSET, MAX_PAGE
from tests.conftest import RegisterCluster
from tests.support import bearer

Request = tuple[str, str, str, dict[str, Any] | str | None]


def declared_schema(
    document: dict[str, Any], method: str, path: str, status: int
) -> Draft202012Validator:
    """A validator for the body the OpenAPI document declares for the operation and status."""
    response = document["paths"][path][method.lower()]["responses"][str(status)]
    schema = response["content"]["application/json"]["schema"]
    return Draft202012Validator(schema | {"components": document["components"]})


def assert_declared(
    document: dict[str, Any], method: str, template: str, response: httpx.Response
) -> None:
    validator = declared_schema(document, method, template, response.status_code)
    errors = [error.message for error in validator.iter_errors(response.json())]
    assert errors == [], response.json()


async def send(
    client: httpx.AsyncClient, method: str, url: str, body: dict[str, Any] | str | None, token: str
) -> httpx.Response:
    headers = bearer(token)
    if isinstance(body, str):  # raw JSON, for escapes json= would not write
        headers["Content-Type"] = "application/json"
        return await client.request(method, url, content=body, headers=headers)
    return await client.request(method, url, json=body, headers=headers)


# (method, path template, url, body): one per kind of parameter, and the requests.
BAD_INPUT: dict[str, tuple[str, str, str, dict[str, Any] | str | None, str, str, str]] = {
    "NUL in a path parameter": (
        "GET", "/api/v1/clusters/{name}", "/api/v1/clusters/%00", None,
        "path", "name", "unstorable_character",
    ),
    "NUL in a path parameter (promotable)": (
        "GET", "/api/v1/environments/{environment}/promotable",
        "/api/v1/environments/%00/promotable", None,
        "path", "environment", "unstorable_character",
    ),
    **{
        f"NUL in a query parameter ({path})": (
            "GET", path, f"{path}?environment=%00{extra}", None,
            "query", "environment", "unstorable_character",
        )
        for path, extra in [
            ("/api/v1/fleet", ""),
            ("/api/v1/drift", ""),
            ("/api/v1/drift/history", ""),
            ("/api/v1/history", ""),
            ("/api/v1/gates/promotion", "&commit=abcdef1"),
            ("/api/v1/assignments", ""),
            ("/api/v1/scheduling/errors", ""),
            ("/api/v1/clusters", ""),
            ("/api/v1/timeline", ""),
        ]
    },
    "NUL in a repeatable query parameter": (
        "GET", "/api/v1/diff", "/api/v1/diff?environment=dev&environment=%00", None,
        "query", "environment.1", "unstorable_character",
    ),
    "a text parameter longer than any name": (
        "GET", "/api/v1/fleet", f"/api/v1/fleet?cluster_type={'x' * 254}", None,
        "query", "cluster_type", "string_too_long",
    ),
    "an offset beyond BIGINT": (
        "GET", "/api/v1/fleet", "/api/v1/fleet?offset=9223372036854775808", None,
        "query", "offset", "less_than_equal",
    ),
    "a count beyond INTEGER": (
        "GET", "/api/v1/gates/promotion",
        "/api/v1/gates/promotion?environment=dev&commit=abcdef1&min_clusters=2147483648", None,
        "query", "min_clusters", "less_than_equal",
    ),
    "an id beyond the INTEGER key": (
        "DELETE", "/api/v1/repositories/{repository_id}", "/api/v1/repositories/13811312413",
        None, "path", "repository_id", "less_than_equal",
    ),
    "a time the date arithmetic cannot reach": (
        "GET", "/api/v1/dora", "/api/v1/dora?until=0001-01-02T00:00:00Z", None,
        "query", "until", "datetime_out_of_range",
    ),
    "a time given as a number": (
        "GET", "/api/v1/history", "/api/v1/history?since=0.5", None,
        "query", "since", "datetime_from_number",
    ),
    "a soak no duration can hold": (
        "GET", "/api/v1/gates/promotion",
        "/api/v1/gates/promotion?environment=dev&commit=abcdef1&soak=99999999999999999999", None,
        "query", "soak", "value_error",
    ),
    "NUL in a body string": (
        "POST", "/api/v1/clusters", "/api/v1/clusters",
        {"name": "drone-dev-2", "labels": {"region": "east\x00us"}},
        "body", "labels.region", "unstorable_character",
    ),
    "an unpaired surrogate in a body string": (
        "POST", "/api/v1/repositories", "/api/v1/repositories",
        '{"url": "https://github.com/contoso/app\\ud800", "role": "app"}',
        "body", "url", "unstorable_character",
    ),
    "NUL in a branch name": (
        "POST", "/api/v1/repositories", "/api/v1/repositories",
        {"url": "https://github.com/contoso/app", "role": "app", "branches": ["dev\x00"]},
        "body", "branches.0", "string_pattern_mismatch",
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("method", "template", "url", "body", "location", "field", "rule"),
    BAD_INPUT.values(),
    ids=BAD_INPUT.keys(),
)
async def test_bad_input_is_422_naming_the_field(
    client: httpx.AsyncClient,
    openapi_document: dict[str, Any],
    admin_token: str,
    method: str,
    template: str,
    url: str,
    body: dict[str, Any] | str | None,
    location: str,
    field: str,
    rule: str,
) -> None:
    response = await send(client, method, url, body, admin_token)

    assert response.status_code == 422
    problems = response.json()["problems"]
    assert [(p["location"], p["field"], p["rule"]) for p in problems] == [(location, field, rule)]
    shown = field if location == "body" else f"{location}.{field}"
    assert response.json()["detail"].startswith(f"{shown}: ")
    assert_declared(openapi_document, method, template, response)


async def test_a_report_refused_for_its_body_names_the_field(
    client: httpx.AsyncClient, openapi_document: dict[str, Any], register_cluster: RegisterCluster
) -> None:
    token = await register_cluster("drone-dev-1")

    response = await send(client, "POST", "/api/v1/reports", {"schema": "x"}, token)

    assert response.status_code == 422
    fields = {problem["field"] for problem in response.json()["problems"]}
    assert {"schema", "cluster", "agent", "sequence", "observed_at"} <= fields
    assert_declared(openapi_document, "POST", "/api/v1/reports", response)


async def test_an_empty_report_body_is_422(
    client: httpx.AsyncClient, openapi_document: dict[str, Any], register_cluster: RegisterCluster
) -> None:
    token = await register_cluster("drone-dev-1")

    response = await client.post("/api/v1/reports", headers=bearer(token))

    assert response.status_code == 422
    assert [p["rule"] for p in response.json()["problems"]] == ["json_invalid"]
    assert_declared(openapi_document, "POST", "/api/v1/reports", response)


# The pages that page (the API's paged operations are read from /openapi.json), and what the
# operations that need more than an offset are asked.
PAGED_PAGES = ["/", "/drift", "/diff", "/clusters/drone-dev-1", "/gate?environment=dev"]
REQUIRED_QUERIES = {
    "/api/v1/gates/promotion": "?environment=dev&commit=abcdef1",
    "/api/v1/gates/decision": "?environment=dev&commit=abcdef1",
    "/api/v1/diff": "?environment=dev&environment=stage",
}
# An offset near BIGINT's end: offset + limit overflowed in the queries (500).
NEAR_BIGINT_END = 9223372036854775758


def _paged_urls(document: dict[str, Any]) -> list[str]:
    """Every paged operation and page, with what it requires: environments dev and stage are
    those of the test's clusters."""
    urls = []
    for path, operations in document["paths"].items():
        parameters = operations.get("get", {}).get("parameters", [])
        if not any(parameter["name"] == "offset" for parameter in parameters):
            continue
        required = [p["name"] for p in parameters if p.get("required") and p["in"] == "query"]
        assert not required or path in REQUIRED_QUERIES, path
        urls.append(path.format(environment="dev") + REQUIRED_QUERIES.get(path, ""))
    assert len(urls) >= 10
    return urls + PAGED_PAGES


async def test_paging_is_bounded_and_never_a_5xx(
    client: httpx.AsyncClient,
    openapi_document: dict[str, Any],
    register_cluster: RegisterCluster,
    read_token: str,
) -> None:
    await register_cluster("drone-dev-1", environment="dev", cluster_type="drone")
    await register_cluster("drone-stage-1", environment="stage", cluster_type="drone")

    for url in _paged_urls(openapi_document):
        separator = "&" if "?" in url else "?"
        furthest = await client.get(
            f"{url}{separator}offset={MAX_OFFSET}&limit={MAX_PAGE}", headers=bearer(read_token)
        )
        beyond = await client.get(
            f"{url}{separator}offset={NEAR_BIGINT_END}", headers=bearer(read_token)
        )

        assert furthest.status_code < 500, (url, furthest.text[:500])
        assert beyond.status_code == 422, (url, beyond.text[:500])
        if url.startswith("/api/"):
            problems = [(p["field"], p["rule"]) for p in beyond.json()["problems"]]
            assert problems == [("offset", "less_than_equal")], url


async def test_soak_is_at_most_a_year(
    client: httpx.AsyncClient, openapi_document: dict[str, Any], read_token: str
) -> None:
    response = await client.get(
        "/api/v1/gates/promotion",
        params={"environment": "dev", "commit": "abcdef1", "soak": "P999999999D"},
        headers=bearer(read_token),
    )

    assert response.status_code == 422
    assert response.json()["detail"].startswith("soak: must be at most 365 days")
    assert_declared(openapi_document, "GET", "/api/v1/gates/promotion", response)


ERRORS: dict[str, tuple[str, str, str, dict[str, Any] | None, str | None, int, str]] = {
    "no token": ("GET", "/api/v1/fleet", "/api/v1/fleet", None, None, 401, "not_authenticated"),
    "read token on an admin operation": (
        "POST", "/api/v1/tokens", "/api/v1/tokens", {"name": "ci", "scope": "read"},
        "read", 403, "insufficient_scope",
    ),
    "unknown cluster": (
        "GET", "/api/v1/clusters/{name}", "/api/v1/clusters/nowhere", None,
        "read", 404, "unknown_cluster",
    ),
    "unknown environment": (
        "GET", "/api/v1/dora/deployments.csv", "/api/v1/dora/deployments.csv?environment=qa",
        None, "read", 404, "unknown_environment",
    ),
    "name taken": (
        "POST", "/api/v1/tokens", "/api/v1/tokens", {"name": "grafana", "scope": "read"},
        "admin", 409, "already_exists",
    ),
    "refused by the service": (
        "GET", "/api/v1/gates/promotion", "/api/v1/gates/promotion?environment=dev", None,
        "read", 422, "invalid_input",
    ),
    "no such cluster to revoke": (
        "DELETE", "/api/v1/clusters/{name}/token", "/api/v1/clusters/nowhere/token", None,
        "admin", 404, "unknown_cluster",
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("method", "template", "url", "body", "scope", "status", "error"),
    ERRORS.values(),
    ids=ERRORS.keys(),
)
async def test_error_bodies_are_what_the_document_declares(
    client: httpx.AsyncClient,
    openapi_document: dict[str, Any],
    admin_token: str,
    read_token: str,
    method: str,
    template: str,
    url: str,
    body: dict[str, Any] | None,
    scope: str | None,
    status: int,
    error: str,
) -> None:
    token = {"admin": admin_token, "read": read_token}.get(scope or "", "")
    headers = bearer(token) if token else {}

    response = await client.request(method, url, json=body, headers=headers)

    assert (response.status_code, response.json()["error"]) == (status, error)
    assert_declared(openapi_document, method, template, response)


async def test_the_framework_answers_in_the_same_shape(client: httpx.AsyncClient) -> None:
    unknown = await client.get("/api/v1/nowhere")
    wrong_method = await client.put("/api/v1/tokens")

    assert unknown.status_code == 404
    assert unknown.json() == {"error": "not_found", "detail": "Not Found"}
    assert wrong_method.status_code == 405
    assert wrong_method.json() == {"error": "method_not_allowed", "detail": "Method Not Allowed"}
    assert wrong_method.headers["allow"]


def test_every_operation_declares_its_errors(openapi_document: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in openapi_document["components"]["schemas"]
    for path, operations in openapi_document["paths"].items():
        for method, operation in operations.items():
            declared = set(operation["responses"])
            if operation.get("security"):
                assert {"401", "403", "503"} <= declared, f"{method} {path}"
            if operation.get("parameters") or "requestBody" in operation:
                assert "422" in declared, f"{method} {path}"


async def test_a_body_that_is_not_utf8_is_answered_as_declared(
    client: httpx.AsyncClient, openapi_document: dict[str, Any], admin_token: str
) -> None:
    headers = bearer(admin_token) | {"Content-Type": "application/json"}
    answered = {}
    for path, operations in openapi_document["paths"].items():
        for method, operation in operations.items():
            if "application/json" not in operation.get("requestBody", {}).get("content", {}):
                continue
            url = re.sub(r"\{[^}]+\}", "1", path)
            response = await client.request(method, url, content=b"\xff", headers=headers)

            assert str(response.status_code) in operation["responses"], f"{method} {path}"
            assert_declared(openapi_document, method, path, response)
            answered[f"{method.upper()} {path}"] = response.status_code
    assert answered["PUT /api/v1/clusters/{name}/placement"] == 400
    assert answered["POST /api/v1/tokens"] == 400
