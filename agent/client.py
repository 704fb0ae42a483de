"""The agent's HTTP client for the hub: one report per call to `POST /api/v1/reports`.

`HubClient.send` posts a `Report` and returns the hub's `Reply`, or raises a `HubError` whose
subclass tells the caller (`agent.delivery.Reporter`) what to do with the report. The bearer
token is read from a file (a mounted Secret) and again whenever it changes.
"""

import asyncio
import os
import random
import ssl
import stat
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx
import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from agent.report import DEFAULT_MAX_REPORT_BYTES, Report

__all__ = [
    "MAX_REPORT_BYTES_HEADER",
    "REPORTS_PATH",
    "HubClient",
    "HubError",
    "HubUnavailable",
    "NotAuthorised",
    "Reply",
    "ReportRejected",
    "ReportTooLarge",
    "Withheld",
]

REPORTS_PATH = "/api/v1/reports"
MAX_REPORT_BYTES_HEADER = "X-Fleetmark-Max-Report-Bytes"
# Statuses worth trying again: the hub (or a proxy in front of it) is overloaded or restarting.
_RETRIED = frozenset({408, 429, 500, 502, 503, 504})
# The ingest route never answers these: the base URL does not lead to a fleetmark hub. Keeping
# the reports until the configuration is fixed beats discarding every one of them as rejected.
_NOT_A_HUB = frozenset({404, 405})
_MAX_DETAIL_CHARS = 500

log = structlog.get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], datetime]
# Asked before each attempt with the seconds it may take: may it start now?
Gate = Callable[[float], bool]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Reply(BaseModel):
    """The hub's answer to an accepted (or already seen) report."""

    # Unknown fields are ignored: a newer hub may say more than this agent knows.
    model_config = ConfigDict(extra="ignore", frozen=True)

    accepted: int
    changed: int
    duplicate: bool
    warnings: tuple[str, ...] = ()


class HubError(Exception):
    """The report was not delivered; the subclass says whether to keep it."""


class HubUnavailable(HubError):
    """The hub could not take the report now; keep it and try again later.

    Connection errors, timeouts, 408, 429, 5xx, an answer that is not the hub's, and 404/405,
    which the report route never gives (the URL leads elsewhere). The call has already retried;
    a `Retry-After` longer than one call should wait comes back as `retry_after`, not slept.
    """

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        # Seconds the hub asked to be left alone for (Retry-After), when it said so.
        self.retry_after = retry_after


class _Refused(HubError):
    def __init__(self, status: int | None, error: str | None, detail: str) -> None:
        what = f"{status} {error}" if error else f"{status}"
        super().__init__(f"{what}: {detail}" if status is not None else detail)
        self.status = status
        self.error = error
        self.detail = detail


class NotAuthorised(_Refused):
    """The hub refused the token (401) or this cluster's use of it (403), or there is no
    token to send (`status` None). Keep the report: a fixed token makes it deliverable."""


class ReportRejected(_Refused):
    """The hub will never accept this report (a 4xx such as 413 or 422)."""


class ReportTooLarge(ReportRejected):
    """The hub refused the report's size (413): split, its records would be taken."""


class Withheld(HubError):
    """The gate did not let the report go: it was not sent. Keep it."""


class _TokenFile:
    """The bearer token, read again when its file changes (a Secret's atomic update does).

    The file holds the token alone, on one line; its content is never logged, whatever is wrong
    with it. A file the agent's user owns that its group or others may read is warned about
    once per version (one owned by root, as a Kubernetes Secret volume's files are, is root's
    to protect, as OpenSSH judges a private key)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._token: str | None = None
        self._version: tuple[int, int, int, int] | None = None

    def current(self) -> str:
        try:
            with self.path.open(encoding="utf-8") as file:
                status = os.fstat(file.fileno())
                version = (status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size)
                if self._token is not None and version == self._version:
                    return self._token
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise NotAuthorised(
                None, None, f"cannot read the cluster token from {self.path}: {reason}"
            ) from exc
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            raise NotAuthorised(None, None, f"the cluster token file {self.path} is empty")
        if len(lines) > 1:
            raise NotAuthorised(
                None,
                None,
                f"the cluster token file {self.path} holds {len(lines)} lines; it must hold "
                "the token alone, on one line",
            )
        token = lines[0]
        if status.st_uid == os.getuid() and status.st_mode & (stat.S_IRGRP | stat.S_IROTH):
            log.warning(
                "the cluster token file may be read by its group or others; chmod 600 it",
                token_file=str(self.path),
                mode=f"{stat.S_IMODE(status.st_mode):04o}",
            )
        if self._token is not None and token != self._token:
            log.info("cluster token changed; using the new one", token_file=str(self.path))
        self._token, self._version = token, version
        return token

    def forget(self) -> None:
        """Read the file again next time, even if it looks unchanged (mtime granularity)."""
        self._version = None


class _Token:
    def __init__(self, token: str) -> None:
        self._token = token

    def current(self) -> str:
        return self._token

    def forget(self) -> None:
        pass


def _retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds from a Retry-After header (delay-seconds or an HTTP-date), None if absent/odd."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def _refusal(response: httpx.Response) -> tuple[str | None, str]:
    """The hub's `{"error", "detail"}`, or the start of whatever else answered."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        error = body.get("error")
        return (error if isinstance(error, str) else None), body["detail"]
    text = response.text.strip()[:_MAX_DETAIL_CHARS]
    return None, text or response.reason_phrase


class HubClient:
    """Posts reports to one hub. Use as an async context manager, or call `aclose()`.

    Give exactly one of `token_file` (re-read when it changes) and `token`. `ca_file` is a
    PEM bundle to verify the hub's certificate with; `transport`, when given, replaces the
    whole connection layer, TLS included (so it cannot come with `ca_file`). `attempts`
    bounds the tries per `send`;
    waits between them grow from `backoff` seconds, doubling, up to `max_backoff`, each
    jittered to between half and all of that, and at least any `Retry-After`. The transport,
    the sleep, the clock and the jitter source are injectable; nothing here sleeps for real
    unless given `asyncio.sleep`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token_file: Path | None = None,
        token: str | None = None,
        ca_file: Path | None = None,
        max_report_bytes: int = DEFAULT_MAX_REPORT_BYTES,
        timeout: float = 5.0,
        attempts: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        user_agent: str = "fleetmark-agent",
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = utc_now,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if (token_file is None) == (token is None):
            raise ValueError("give exactly one of token_file and token")
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        if transport is not None and ca_file is not None:
            raise ValueError("ca_file has no effect on a given transport; configure its TLS")
        self._token: _TokenFile | _Token = (
            _TokenFile(token_file) if token_file is not None else _Token(token or "")
        )
        if transport is None:
            verify: ssl.SSLContext | bool = (
                ssl.create_default_context(cafile=str(ca_file)) if ca_file is not None else True
            )
            transport = httpx.AsyncHTTPTransport(verify=verify)
        self._http = httpx.AsyncClient(
            base_url=base_url,
            transport=transport,
            timeout=timeout,
            headers={"User-Agent": user_agent, "Content-Type": "application/json"},
        )
        self._max_report_bytes = max_report_bytes
        self._timeout = timeout
        self._attempts = attempts
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._sleep = sleep
        self._clock = clock
        self._jitter = jitter

    @property
    def url(self) -> str:
        # The base URL ends in "/" (httpx sees to that); a relative join keeps any path prefix.
        return str(self._http.base_url.join(REPORTS_PATH.lstrip("/")))

    @property
    def max_report_bytes(self) -> int:
        """The largest report body the hub takes: as it last stated in a reply's header (2xx
        or 413), the configured default until it has, or half the body of a 413 that did not
        say (a proxy's limit)."""
        return self._max_report_bytes

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, report: Report, *, gate: Gate | None = None) -> Reply:
        """Deliver one report, retrying what is worth retrying.

        Each attempt starts only if `gate(timeout)` says so; else `Withheld` is raised.
        `timeout` bounds an attempt as a whole, from connecting to the answer's last byte, so
        the gate knows when it will be over. Retrying after a read timeout is correct because
        the hub is idempotent on (cluster, boot id, sequence): a lost reply costs a duplicate.
        """
        body = report.to_json()
        attempt = 0
        while True:
            attempt += 1
            if gate is not None and not gate(self._timeout):
                raise Withheld(f"report {report.sequence} withheld: this agent may not send now")
            failure = await self._attempt(body)
            if isinstance(failure, Reply):
                return failure
            if attempt >= self._attempts:
                raise failure
            delay = self._delay(attempt, failure)
            if delay is None:
                raise failure
            log.warning(
                "hub unavailable; retrying",
                url=self.url,
                sequence=report.sequence,
                attempt=attempt,
                delay=round(delay, 3),
                error=str(failure),
            )
            await self._sleep(delay)

    async def _attempt(self, body: bytes) -> Reply | HubUnavailable:
        token = self._token.current()
        try:
            async with asyncio.timeout(self._timeout):
                response = await self._http.post(
                    REPORTS_PATH, content=body, headers={"Authorization": f"Bearer {token}"}
                )
        except TimeoutError:
            return HubUnavailable(f"no answer from the hub at {self.url} in {self._timeout}s")
        except httpx.TransportError as exc:
            return HubUnavailable(
                f"cannot reach the hub at {self.url}: {type(exc).__name__}: {exc}"
            )
        status = response.status_code
        stated = response.headers.get(MAX_REPORT_BYTES_HEADER, "")
        if stated.isdigit() and int(stated) > 0:
            self._max_report_bytes = int(stated)
        elif status == 413:
            self._max_report_bytes = min(self._max_report_bytes, len(body) // 2)
        if 200 <= status < 300:
            try:
                return Reply.model_validate_json(response.content)
            except ValidationError:
                return HubUnavailable(
                    f"the answer from {self.url} ({status}) is not a fleetmark reply",
                    status=status,
                )
        if status in _RETRIED:
            _, detail = _refusal(response)
            return HubUnavailable(
                f"the hub answered {status}: {detail}",
                status=status,
                retry_after=_retry_after(response.headers.get("Retry-After"), self._clock()),
            )
        if status in (401, 403):
            if status == 401:
                self._token.forget()
            raise NotAuthorised(status, *_refusal(response))
        if status in _NOT_A_HUB:
            # Not retried within this call: the answer will not change until someone fixes
            # the URL, but the report is kept for when they do.
            raise HubUnavailable(
                f"{self.url} answered {status}: is the hub URL right?", status=status
            )
        if status == 413:
            raise ReportTooLarge(status, *_refusal(response))
        if 400 <= status < 500:
            raise ReportRejected(status, *_refusal(response))
        location = response.headers.get("Location")
        where = f" (to {location})" if location else ""
        raise HubUnavailable(f"the hub answered {status}{where}", status=status)

    def _delay(self, attempt: int, failure: HubUnavailable) -> float | None:
        """Seconds to wait before the next attempt, or None to give up and say when instead."""
        if failure.retry_after is not None and failure.retry_after > self._max_backoff:
            return None
        ceiling = min(self._max_backoff, self._backoff * 2.0 ** (attempt - 1))
        delay = ceiling * (0.5 + 0.5 * self._jitter())
        return max(delay, failure.retry_after or 0.0)
