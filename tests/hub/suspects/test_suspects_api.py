"""GET /api/v1/suspects over HTTP: a read token, and bad questions answered with what is wrong."""

import httpx

from tests.support import bearer

SUSPECTS = "/api/v1/suspects"


async def test_bad_questions_are_refused_naming_what_is_wrong(
    client: httpx.AsyncClient, read_token: str
) -> None:
    async def refused(status: int, **params: str) -> dict[str, object]:
        response = await client.get(SUSPECTS, params=params, headers=bearer(read_token))
        assert response.status_code == status, response.text
        body: dict[str, object] = response.json()
        return body

    assert (await client.get(SUSPECTS, params={"environment": "dev"})).status_code == 401
    backwards = await refused(
        422, environment="dev", since="2026-11-30T12:00:00Z", until="2026-11-30T11:00:00Z"
    )
    assert backwards["detail"] == (
        "since: must be before until (2026-11-30T11:00:00+00:00), got 2026-11-30T12:00:00+00:00"
    )
    nothing = await refused(422, environment="dev", window="0")
    assert nothing["detail"] == "window: must be positive, got 0s"
    for params, field in [
        ({"environment": "dev", "min_regressions": "0"}, "min_regressions"),
        ({}, "environment"),
    ]:
        body = await refused(422, **params)
        assert body["error"] == "invalid_input"
        assert [problem["field"] for problem in body["problems"]] == [field]  # type: ignore[attr-defined]
    unknown = await refused(404, environment="nowhere")
    assert unknown["error"] == "unknown_environment"
    assert "nowhere" in str(unknown["detail"])
