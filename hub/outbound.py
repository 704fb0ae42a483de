"""What the hub's requests to other services share (events to their subscriptions, commit
statuses to GitHub and GitLab): the User-Agent they carry, what is kept of an answer, and when
the other side asks to be tried again."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx

import hub
from hub.git.urls import redact_text

__all__ = ["ERROR_CHARS", "USER_AGENT", "Answer", "failure", "retry_after"]

USER_AGENT = f"fleetmark/{hub.__version__}"
# Kept of an answer's body or of a failure, for the logs and the store.
ERROR_CHARS = 500


@dataclass(frozen=True, slots=True)
class Answer:
    """What came of one request: the status answered, or why there was none; and, when the
    other side named one (Retry-After, a rate limit's reset), the time to try again."""

    status_code: int | None
    error: str | None
    retry_at: datetime | None = None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def failure(exc: httpx.HTTPError) -> str:
    """Why a request got no answer, as kept: without the credentials of any URL in it."""
    return redact_text(f"{type(exc).__name__}: {exc}")[:ERROR_CHARS]


def retry_after(response: httpx.Response, now: datetime) -> datetime | None:
    """The time a Retry-After header names, in seconds or as an HTTP date (RFC 9110, 10.2.3),
    never before `now`; None without one that parses."""
    value = response.headers.get("retry-after", "").strip()
    if value.isdigit():
        return now + timedelta(seconds=int(value))
    try:
        named = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if named.tzinfo is None:
        return None
    return max(named, now)
