"""Credentials in URLs agents report (a token as the user name, a password) are neither stored
nor shown: ingest drops them with a warning, and every answer redacts what an earlier version
stored."""

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from tests.conftest import MakeAgent
from tests.hub.drifting import evaluate
from tests.support import FakeClock, bearer, kustomization

TOKEN = "ghp_R3p0rtedT0ken"
PLAIN = "https://github.com/contoso/platform-gitops.git"
SOURCE_URLS = """
SELECT source_url FROM object_state
UNION ALL SELECT source_url FROM status_transition
UNION ALL SELECT source_url FROM deployed_part
"""


def with_source(name: str, url: str, **fields: object) -> dict[str, object]:
    return kustomization(name, source={"url": url, "ref": "dev", "path": f"drone/{name}"}, **fields)


async def shown(client: httpx.AsyncClient, token: str, cluster: str) -> list[str]:
    """Every answer that carries the cluster's reported URLs: its API detail, drift, history
    and page."""
    headers = bearer(token)
    answers = [
        await client.get(f"/api/v1/clusters/{cluster}", headers=headers),
        await client.get(
            "/api/v1/drift", params={"cluster": cluster, "include_in_sync": "true"}, headers=headers
        ),
        await client.get("/api/v1/history", params={"cluster": cluster}, headers=headers),
        await client.get(f"/clusters/{cluster}"),
    ]
    assert [answer.status_code for answer in answers] == [200] * 4
    return [answer.text for answer in answers]


@pytest.mark.parametrize(
    "reported",
    [
        f"https://{TOKEN}@github.com/contoso/platform-gitops.git",
        f"https://x-access-token:{TOKEN}@github.com/contoso/platform-gitops.git",
    ],
)
async def test_a_reported_url_is_stored_and_shown_without_its_credentials(
    reported: str,
    make_agent: MakeAgent,
    client: httpx.AsyncClient,
    read_token: str,
    session: AsyncSession,
    clock: FakeClock,
) -> None:
    agent = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")

    reply = await agent.send_ok(
        [with_source("apps", reported), with_source("infra", reported), with_source("web", PLAIN)]
    )
    await evaluate(session, clock)
    answers = await shown(client, read_token, agent.cluster)

    assert reply["warnings"] == [
        "flux Kustomization flux-system/apps (and 1 more object): source.url held credentials "
        f"(a user name or password), dropped: stored as {PLAIN}"
    ]
    stored = set((await session.execute(text(SOURCE_URLS))).scalars())
    assert stored == {PLAIN}
    for answer in answers:
        assert PLAIN in answer
        assert TOKEN not in answer


async def test_an_ssh_user_is_kept(make_agent: MakeAgent, session: AsyncSession) -> None:
    agent = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")
    ssh = "ssh://git@github.com/contoso/platform-gitops.git"

    reply = await agent.send_ok([with_source("apps", ssh)])

    assert reply["warnings"] == []
    assert set((await session.execute(text(SOURCE_URLS))).scalars()) == {ssh}


async def test_credentials_stored_before_or_in_messages_are_never_shown(
    make_agent: MakeAgent,
    client: httpx.AsyncClient,
    read_token: str,
    session: AsyncSession,
    clock: FakeClock,
) -> None:
    """A URL an earlier version stored with its credentials, and one in a reconciler's
    message (kept as reported), are redacted in every answer."""
    agent = await make_agent("drone-dev-1", environment="dev", cluster_type="drone")
    failing = f"unable to clone 'https://{TOKEN}@github.com/contoso/app.git': 401"
    await agent.send_ok([with_source("apps", PLAIN, ready=False, message=failing)])
    for table in ("object_state", "status_transition", "deployed_part"):
        await session.execute(
            text(f"UPDATE {table} SET source_url = :url"),
            {"url": f"https://bot:{TOKEN}@github.com/contoso/platform-gitops.git"},
        )
    await session.commit()
    await evaluate(session, clock)

    answers = await shown(client, read_token, agent.cluster)

    for answer in answers:
        assert TOKEN not in answer
    assert "https://github.com/contoso/platform-gitops.git" in answers[0]
    assert "unable to clone &#39;https://github.com/contoso/app.git&#39;: 401" in answers[3]
