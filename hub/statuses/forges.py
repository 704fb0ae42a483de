"""The commit status APIs of GitHub (`POST /repos/{owner}/{repo}/statuses/{sha}`) and GitLab
(`POST /projects/{id}/statuses/{sha}`): one request, and what its answer means for the status —
posted, to be tried again at a time the forge names (its rate limits) or after a backoff (a
5xx, a network failure), or refused (a token without access, a repository not found), which
waits an hour rather than spin.

The token goes to the configured API base URL and nowhere else: redirects are not followed."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Literal
from urllib.parse import quote

import httpx

from hub import outbound

__all__ = ["Answer", "Outcome", "StatusBody", "post_status"]

API_VERSION = "2022-11-28"
# GitLab's name of a status GitHub calls failure.
_GITLAB_STATES = {"failure": "failed"}
# GitHub's advice for a secondary rate limit that names no time: wait at least a minute.
RATE_LIMIT_WAIT = timedelta(minutes=1)


class Outcome(StrEnum):
    POSTED = "posted"
    # The forge's rate limit: tried again at `retry_at`, and no other status of the
    # repository before then.
    RATE_LIMITED = "rate_limited"
    # A 5xx or no answer: tried again after a backoff.
    UNAVAILABLE = "unavailable"
    # 401, 403, 404, 422, a redirect: the token, its access, the repository or the commit is
    # wrong; tried again an hour later.
    REFUSED = "refused"


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusBody:
    state: str  # pending, success or failure
    description: str
    target_url: str
    context: str


@dataclass(frozen=True, slots=True)
class Answer(outbound.Answer):
    """The forge's answer and what it means for the status; `retry_at` is set for a rate
    limit."""

    outcome: Outcome = field(kw_only=True)


def _rate_limited_until(response: httpx.Response, now: datetime) -> datetime | None:
    """When a 403 or 429 is a rate limit (GitHub's primary or secondary, GitLab's), the time
    the forge says to try again; None when it is not one."""
    headers = response.headers
    named = outbound.retry_after(response, now)
    if named is not None:
        return named
    reset = headers.get("x-ratelimit-reset") or headers.get("ratelimit-reset") or ""
    remaining = headers.get("x-ratelimit-remaining") or headers.get("ratelimit-remaining")
    if remaining == "0" and reset.isdigit():
        return max(datetime.fromtimestamp(int(reset), UTC), now)
    if response.status_code == 429 or "rate limit" in response.text.lower():
        return now + RATE_LIMIT_WAIT
    return None


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    text = message if isinstance(message, str) else response.text
    return f"{response.status_code} {text.strip()[: outbound.ERROR_CHARS]}".strip()


def _request(
    forge: Literal["github", "gitlab"],
    api_url: str,
    project: str,
    sha: str,
    token: str,
    status: StatusBody,
) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL, headers and body that set `status` on the forge."""
    if forge == "github":
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": API_VERSION,
        }
        body = {
            "state": status.state,
            "description": status.description,
            "target_url": status.target_url,
            "context": status.context,
        }
        return f"{api_url}/repos/{project}/statuses/{sha}", headers, body
    body = {
        "state": _GITLAB_STATES.get(status.state, status.state),
        "description": status.description,
        "target_url": status.target_url,
        "name": status.context,
    }
    url = f"{api_url}/projects/{quote(project, safe='')}/statuses/{sha}"
    return url, {"PRIVATE-TOKEN": token}, body


async def post_status(
    http: httpx.AsyncClient,
    *,
    forge: Literal["github", "gitlab"],
    api_url: str,
    project: str,
    sha: str,
    token: str,
    status: StatusBody,
    now: datetime,
) -> Answer:
    """Set `status` on commit `sha` of `project` (OWNER/REPO, or a GitLab project's path)."""
    url, headers, body = _request(forge, api_url, project, sha, token, status)
    try:
        response = await http.post(
            url, json=body, headers=headers | {"User-Agent": outbound.USER_AGENT}
        )
    except httpx.HTTPError as exc:
        return Answer(None, outbound.failure(exc), outcome=Outcome.UNAVAILABLE)
    code = response.status_code
    if code == 201:
        return Answer(code, None, outcome=Outcome.POSTED)
    if code in (403, 429):
        until = _rate_limited_until(response, now)
        if until is not None:
            return Answer(code, _message(response), until, outcome=Outcome.RATE_LIMITED)
    if code >= 500:
        return Answer(code, _message(response), outcome=Outcome.UNAVAILABLE)
    if 300 <= code < 400:
        # A renamed repository answers 301: the token goes to api_url alone, never elsewhere.
        error = f"{code} redirected, not followed: configure the repository's current URL"
        return Answer(code, error, outcome=Outcome.REFUSED)
    return Answer(code, _message(response), outcome=Outcome.REFUSED)
