"""/docs and /redoc work on a network without the internet: every asset comes from the hub."""

import re

import httpx
import pytest

# Where a page loads something from: src and href attributes, ReDoc's spec-url, Swagger UI's url.
REFERENCE = re.compile(r"""(?:\b(?:src|href|spec-url)=|\burl: )["']([^"']+)["']""")
CONTENT_TYPES = {
    ".js": ("text/javascript", "application/javascript"),
    ".css": ("text/css",),
    ".png": ("image/png",),
    ".json": ("application/json",),
}
# What each page must load to render: its script, and the OpenAPI document it shows.
NEEDED = {"/docs": ("swagger-ui-bundle.js", "/openapi.json"), "/redoc": ("redoc.standalone.js",)}


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_docs_load_their_assets_from_the_hub(client: httpx.AsyncClient, page: str) -> None:
    response = await client.get(page)
    references = REFERENCE.findall(response.text)

    assert response.status_code == 200
    assert "http://" not in response.text
    assert "https://" not in response.text
    assert all(reference.startswith("/") for reference in references), references
    assert not any(reference.startswith("//") for reference in references), references
    assert "/openapi.json" in references
    for needed in NEEDED[page]:
        assert any(reference.endswith(needed) for reference in references), references
    for reference in references:
        asset = await client.get(reference)
        suffix = reference[reference.rindex(".") :]
        assert asset.status_code == 200, reference
        assert asset.headers["content-type"].split(";")[0] in CONTENT_TYPES[suffix], reference
        assert len(asset.content) > 100, reference


async def test_swagger_ui_asks_no_online_validator(client: httpx.AsyncClient) -> None:
    response = await client.get("/docs")

    assert '"validatorUrl": null' in response.text
