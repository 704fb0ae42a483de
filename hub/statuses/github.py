"""GitHub's commit status API (`POST /repos/{owner}/{repo}/statuses/{sha}`): one request, and
what its answer means for the status — posted, to be tried again at a time GitHub names (its
rate limits) or after a backoff (its 5xx, a network failure), or refused (a token without
access, a repository not found), which waits an hour rather than spin.

The token goes to the configured API base URL and nowhere else: redirects are not followed."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import httpx

__all__ = ["Answer", "Outcome", "post_status"]

USER_AGENT = "fleetmark-statuses"
API_VERSION = "2022-11-28"
# GitHub's advice for a secondary rate limit that names no time: wait at least a minute.
RATE_LIMIT_WAIT = timedelta(minutes=1)
# Kept of an answer's body for the logs and the store.
_ERROR_CHARS = 300


class Outcome(StrEnum):
    POSTED = "posted"
    # GitHub's rate limit: tried again at `retry_at`, and no other status of the repository
    # before then.
    RATE_LIMITED = "rate_limited"
    # A 5xx or no answer: tried again after a backoff.
    UNAVAILABLE = "unavailable"
    # 401, 403, 404, 422, a redirect: the token, its access, the repository or the commit is
    # wrong; tried again an hour later.
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Answer:
    outcome: Outcome
    status_code: int | None
    error: str | None
    # Set for a rate limit: when GitHub says to try again.
    retry_at: datetime | None = None


def _rate_limited_until(response: httpx.Response, now: datetime) -> datetime | None:
    """When a 403 or 429 is GitHub's rate limit (primary or secondary), the time it says to
    try again; None when it is not one ("Rate limits for the REST API")."""
    headers = response.headers
    retry_after = headers.get("retry-after", "")
    if retry_after.isdigit():
        return now + timedelta(seconds=int(retry_after))
    reset = headers.get("x-ratelimit-reset", "")
    if headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
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
    return f"{response.status_code} {text.strip()[:_ERROR_CHARS]}".strip()


async def post_status(
    http: httpx.AsyncClient,
    *,
    api_url: str,
    owner: str,
    repository: str,
    sha: str,
    token: str,
    status: dict[str, Any],
    now: datetime,
) -> Answer:
    """Set `status` (state, description, target_url, context) on commit `sha`."""
    url = f"{api_url}/repos/{owner}/{repository}/statuses/{sha}"
    headers = {
        "Accept": "application/vnd.github+json",
        "Authorization": f"Bearer {token}",
        "User-Agent": USER_AGENT,
        "X-GitHub-Api-Version": API_VERSION,
    }
    try:
        response = await http.post(url, json=status, headers=headers)
    except httpx.HTTPError as exc:
        return Answer(Outcome.UNAVAILABLE, None, f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS])
    code = response.status_code
    if code == 201:
        return Answer(Outcome.POSTED, code, None)
    if code in (403, 429):
        until = _rate_limited_until(response, now)
        if until is not None:
            return Answer(Outcome.RATE_LIMITED, code, _message(response), until)
    if code >= 500:
        return Answer(Outcome.UNAVAILABLE, code, _message(response))
    if 300 <= code < 400:
        # A renamed repository answers 301: the token goes to api_url alone, never elsewhere.
        error = f"{code} redirected, not followed: configure the repository's current URL"
        return Answer(Outcome.REFUSED, code, error)
    return Answer(Outcome.REFUSED, code, _message(response))
