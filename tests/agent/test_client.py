"""HubClient: what it posts, how it retries, and which error each answer of the hub becomes."""

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from email.utils import format_datetime
from pathlib import Path

import certifi
import httpx
import pytest
from structlog.testing import capture_logs

from agent.client import (
    HubClient,
    HubUnavailable,
    NotAuthorised,
    Reply,
    ReportRejected,
    ReportTooLarge,
    Withheld,
)
from tests.agent.conftest import TOKEN, Sleeps, make_report, write_token
from tests.support import START, FakeClock

Handler = Callable[[httpx.Request], httpx.Response]
OK = {"accepted": 1, "changed": 1, "duplicate": False, "warnings": []}


def scripted(*answers: httpx.Response | Exception) -> tuple[Handler, list[httpx.Request]]:
    """A handler giving `answers` in turn (the last one from then on), and its requests."""
    requests: list[httpx.Request] = []
    queue: Iterator[httpx.Response | Exception] = iter(answers)
    last: list[httpx.Response | Exception] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        answer = next(queue, None)
        if answer is None:
            answer = last[0]
        last[:] = [answer]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return handler, requests


def client_for(
    handler: Handler,
    token_file: Path,
    sleeps: Sleeps,
    *,
    base_url: str = "http://hub.test",
    jitter: float = 1.0,
    **options: object,
) -> HubClient:
    return HubClient(
        base_url,
        token_file=token_file,
        transport=httpx.MockTransport(handler),
        sleep=sleeps,
        jitter=lambda: jitter,
        **options,  # type: ignore[arg-type]
    )


def rewrite_in_place(path: Path, token: str) -> None:
    """Same file, same size, same modification time: only a forced re-read sees the change."""
    status = os.stat(path)
    path.write_text(token + "\n")
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def refused() -> httpx.ConnectError:
    return httpx.ConnectError("connection refused")


async def test_posts_the_report_with_the_token_and_returns_the_reply(
    token_file: Path, sleeps: Sleeps
) -> None:
    reply = {"accepted": 1, "changed": 0, "duplicate": False, "warnings": ["w"], "new": 1}
    handler, requests = scripted(httpx.Response(200, json=reply))
    report = make_report(7)

    async with client_for(handler, token_file, sleeps, user_agent="fleetmark-agent/9") as client:
        result = await client.send(report)

    assert result == Reply(accepted=1, changed=0, duplicate=False, warnings=("w",))
    (request,) = requests
    assert request.method == "POST"
    assert str(request.url) == "http://hub.test/api/v1/reports"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["User-Agent"] == "fleetmark-agent/9"
    assert request.content == report.to_json()
    assert json.loads(request.content)["schema"] == "fleetmark.report/v1"
    assert sleeps.delays == []


async def test_a_base_url_with_a_path_keeps_it(token_file: Path, sleeps: Sleeps) -> None:
    handler, requests = scripted(httpx.Response(200, json=OK))
    async with client_for(
        handler, token_file, sleeps, base_url="https://ops.example/fleetmark"
    ) as client:
        await client.send(make_report(1))
        assert client.url == "https://ops.example/fleetmark/api/v1/reports"
    assert str(requests[0].url) == "https://ops.example/fleetmark/api/v1/reports"


@pytest.mark.parametrize(
    "failure",
    [
        refused(),
        httpx.ReadTimeout("timed out"),
        httpx.ReadError("connection reset"),
        httpx.RemoteProtocolError("server disconnected"),
    ],
    ids=["refused", "timeout", "reset", "protocol"],
)
async def test_connection_errors_are_retried_with_exponential_backoff(
    token_file: Path, sleeps: Sleeps, failure: Exception
) -> None:
    handler, requests = scripted(failure, failure, failure, httpx.Response(200, json=OK))
    async with client_for(
        handler, token_file, sleeps, attempts=5, backoff=0.5, max_backoff=8.0
    ) as client:
        reply = await client.send(make_report(1))

    assert reply.accepted == 1
    assert len(requests) == 4
    assert sleeps.delays == [0.5, 1.0, 2.0]
    # Every attempt posts the same report: the hub's idempotency makes that safe.
    assert len({request.content for request in requests}) == 1


async def test_backoff_is_capped_and_jittered(token_file: Path, sleeps: Sleeps) -> None:
    handler, _ = scripted(refused())
    async with client_for(
        handler, token_file, sleeps, attempts=6, backoff=1.0, max_backoff=4.0, jitter=0.0
    ) as client:
        with pytest.raises(HubUnavailable):
            await client.send(make_report(1))

    # Jitter 0 waits half of each step: 1, 2, 4, 4, 4 halved.
    assert sleeps.delays == [0.5, 1.0, 2.0, 2.0, 2.0]


async def test_the_gate_is_asked_before_every_attempt_with_the_timeout(
    token_file: Path, sleeps: Sleeps
) -> None:
    handler, requests = scripted(httpx.Response(503, text="busy"), httpx.Response(200, json=OK))
    asked: list[float] = []

    def gate(seconds: float) -> bool:
        asked.append(seconds)
        return len(asked) == 1  # open for the first attempt, closed for the retry

    async with client_for(handler, token_file, sleeps, timeout=4.0, attempts=3) as client:
        with pytest.raises(Withheld):
            await client.send(make_report(1), gate=gate)

    assert asked == [4.0, 4.0]
    assert len(requests) == 1  # the retry never left


async def test_an_answer_slower_than_the_timeout_is_unavailable(
    token_file: Path, sleeps: Sleeps
) -> None:
    async def never_answers(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    client = HubClient(
        "http://hub.test",
        token_file=token_file,
        transport=httpx.MockTransport(never_answers),
        sleep=sleeps,
        timeout=0.05,
        attempts=1,
    )
    async with client, asyncio.timeout(5):
        with pytest.raises(HubUnavailable, match="no answer"):
            await client.send(make_report(1))


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408])
async def test_server_errors_are_retried_then_reported_unavailable(
    token_file: Path, sleeps: Sleeps, status: int
) -> None:
    handler, requests = scripted(httpx.Response(status, text="upstream trouble"))
    async with client_for(handler, token_file, sleeps, attempts=3) as client:
        with pytest.raises(HubUnavailable) as raised:
            await client.send(make_report(1))

    assert len(requests) == 3
    assert len(sleeps.delays) == 2
    assert raised.value.status == status
    assert "upstream trouble" in str(raised.value)


async def test_unreachable_hub_names_the_url(token_file: Path, sleeps: Sleeps) -> None:
    handler, _ = scripted(refused())
    with capture_logs() as logs:
        async with client_for(handler, token_file, sleeps, attempts=2) as client:
            with pytest.raises(HubUnavailable, match=r"http://hub\.test/api/v1/reports"):
                await client.send(make_report(3))

    (retry,) = [entry for entry in logs if entry["event"] == "hub unavailable; retrying"]
    assert retry["sequence"] == 3
    assert retry["attempt"] == 1


async def test_retry_after_in_seconds_is_honoured(token_file: Path, sleeps: Sleeps) -> None:
    handler, _ = scripted(
        httpx.Response(429, headers={"Retry-After": "3"}), httpx.Response(200, json=OK)
    )
    async with client_for(handler, token_file, sleeps, backoff=0.5, max_backoff=8.0) as client:
        await client.send(make_report(1))

    assert sleeps.delays == [3.0]


async def test_retry_after_as_a_date_is_read_against_the_clock(
    token_file: Path, sleeps: Sleeps
) -> None:
    clock = FakeClock(START)
    when = format_datetime(START + timedelta(seconds=4), usegmt=True)
    handler, _ = scripted(
        httpx.Response(503, headers={"Retry-After": when}), httpx.Response(200, json=OK)
    )
    async with client_for(handler, token_file, sleeps, clock=clock) as client:
        await client.send(make_report(1))

    assert sleeps.delays == [4.0]


async def test_a_long_retry_after_is_passed_on_instead_of_slept(
    token_file: Path, sleeps: Sleeps
) -> None:
    handler, requests = scripted(httpx.Response(429, headers={"Retry-After": "120"}))
    async with client_for(handler, token_file, sleeps, attempts=5, max_backoff=8.0) as client:
        with pytest.raises(HubUnavailable) as raised:
            await client.send(make_report(1))

    assert len(requests) == 1
    assert sleeps.delays == []
    assert raised.value.retry_after == 120.0
    assert raised.value.status == 429


async def test_an_unreadable_retry_after_falls_back_to_backoff(
    token_file: Path, sleeps: Sleeps
) -> None:
    handler, _ = scripted(
        httpx.Response(503, headers={"Retry-After": "soon"}), httpx.Response(200, json=OK)
    )
    async with client_for(handler, token_file, sleeps, backoff=0.5) as client:
        await client.send(make_report(1))

    assert sleeps.delays == [0.5]


@pytest.mark.parametrize(
    ("status", "error"), [(401, "not_authenticated"), (403, "cluster_mismatch")]
)
async def test_token_refusals_are_not_authorised_and_not_retried(
    token_file: Path, sleeps: Sleeps, status: int, error: str
) -> None:
    body = {"error": error, "detail": "the cluster token is unknown or revoked"}
    handler, requests = scripted(httpx.Response(status, json=body))
    async with client_for(handler, token_file, sleeps, attempts=5) as client:
        with pytest.raises(NotAuthorised) as raised:
            await client.send(make_report(1))

    assert len(requests) == 1
    assert sleeps.delays == []
    assert (raised.value.status, raised.value.error) == (status, error)
    assert raised.value.detail == "the cluster token is unknown or revoked"


@pytest.mark.parametrize(
    ("status", "error", "detail"),
    [
        (422, "invalid_input", "objects.0.name: String should have at least 1 character"),
        (413, "payload_too_large", "the report is over the limit of 4194304 bytes"),
        (400, "bad_request", "malformed"),
    ],
)
async def test_other_client_errors_reject_the_report_with_the_hubs_reason(
    token_file: Path, sleeps: Sleeps, status: int, error: str, detail: str
) -> None:
    handler, requests = scripted(httpx.Response(status, json={"error": error, "detail": detail}))
    async with client_for(handler, token_file, sleeps, attempts=5) as client:
        with pytest.raises(ReportRejected) as raised:
            await client.send(make_report(1))

    assert len(requests) == 1
    assert (raised.value.status, raised.value.error, raised.value.detail) == (
        status,
        error,
        detail,
    )
    assert str(raised.value) == f"{status} {error}: {detail}"


async def test_a_rejection_that_is_not_json_keeps_its_text(
    token_file: Path, sleeps: Sleeps
) -> None:
    handler, _ = scripted(httpx.Response(413, text="<html>Request Entity Too Large</html>"))
    async with client_for(handler, token_file, sleeps) as client:
        with pytest.raises(ReportRejected) as raised:
            await client.send(make_report(1))

    assert raised.value.error is None
    assert raised.value.detail == "<html>Request Entity Too Large</html>"


@pytest.mark.parametrize("status", [404, 405])
async def test_a_url_without_the_reports_route_keeps_the_report(
    token_file: Path, sleeps: Sleeps, status: int
) -> None:
    # Not a rejection of the report: the URL is wrong, and every report would be refused.
    handler, requests = scripted(httpx.Response(status, text="Not Found"))
    async with client_for(handler, token_file, sleeps, attempts=5) as client:
        with pytest.raises(HubUnavailable, match="is the hub URL right"):
            await client.send(make_report(1))

    assert len(requests) == 1


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, text="<html>login</html>"),
        httpx.Response(200, json={"status": "ok"}),
        httpx.Response(302, headers={"Location": "https://sso.example/login"}),
    ],
    ids=["html", "other-json", "redirect"],
)
async def test_an_answer_that_is_not_the_hubs_keeps_the_report(
    token_file: Path, sleeps: Sleeps, answer: httpx.Response
) -> None:
    handler, _ = scripted(answer)
    async with client_for(handler, token_file, sleeps, attempts=2) as client:
        with pytest.raises(HubUnavailable):
            await client.send(make_report(1))


async def test_a_rotated_token_file_is_used_on_the_next_send(
    token_file: Path, sleeps: Sleeps
) -> None:
    handler, requests = scripted(httpx.Response(200, json=OK))
    async with client_for(handler, token_file, sleeps) as client:
        await client.send(make_report(1))
        write_token(token_file, "fm-rotated-token")
        await client.send(make_report(2))

    assert [request.headers["Authorization"] for request in requests] == [
        f"Bearer {TOKEN}",
        "Bearer fm-rotated-token",
    ]


async def test_after_a_401_the_token_file_is_read_again_even_if_it_looks_unchanged(
    token_file: Path, sleeps: Sleeps
) -> None:
    handler, requests = scripted(
        httpx.Response(401, json={"error": "not_authenticated", "detail": "revoked"}),
        httpx.Response(200, json=OK),
    )
    async with client_for(handler, token_file, sleeps) as client:
        with pytest.raises(NotAuthorised):
            await client.send(make_report(1))
        rewrite_in_place(token_file, TOKEN.replace("test", "next"))
        await client.send(make_report(1))

    assert requests[1].headers["Authorization"] == f"Bearer {TOKEN.replace('test', 'next')}"


@pytest.mark.parametrize("content", [None, "", "  \n"], ids=["missing", "empty", "blank"])
async def test_no_usable_token_is_not_authorised_without_a_request(
    tmp_path: Path, sleeps: Sleeps, content: str | None
) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    handler, requests = scripted(httpx.Response(200, json=OK))
    async with client_for(handler, token_file, sleeps) as client:
        with pytest.raises(NotAuthorised, match="token") as raised:
            await client.send(make_report(1))

    assert raised.value.status is None
    assert requests == []


async def test_a_token_file_of_more_than_one_line_is_refused_naming_it_never_logging_it(
    token_file: Path, sleeps: Sleeps
) -> None:
    write_token(token_file, f"{TOKEN}\n\nfmc_second-secret")
    handler, requests = scripted(httpx.Response(200, json=OK))
    async with client_for(handler, token_file, sleeps) as client:
        with capture_logs() as logs, pytest.raises(NotAuthorised) as raised:
            await client.send(make_report(1))

    assert raised.value.detail == (
        f"the cluster token file {token_file} holds 2 lines; it must hold the token alone, "
        "on one line"
    )
    assert requests == []
    assert "second-secret" not in repr(logs)
    assert TOKEN not in repr(logs)


async def test_a_token_file_others_may_read_is_warned_about_once_per_version(
    token_file: Path, sleeps: Sleeps
) -> None:
    handler, requests = scripted(httpx.Response(200, json=OK))
    async with client_for(handler, token_file, sleeps) as client:
        with capture_logs() as private:
            await client.send(make_report(1))
        write_token(token_file, "fm-rotated-token", mode=0o644)
        with capture_logs() as shared:
            await client.send(make_report(2))
            await client.send(make_report(3))

    assert [entry for entry in private if entry["log_level"] == "warning"] == []
    assert [entry for entry in shared if entry["log_level"] == "warning"] == [
        {
            "event": "the cluster token file may be read by its group or others; chmod 600 it",
            "token_file": str(token_file),
            "mode": "0644",
            "log_level": "warning",
        }
    ]
    assert len(requests) == 3


async def test_a_token_can_be_given_directly(sleeps: Sleeps) -> None:
    handler, requests = scripted(httpx.Response(200, json=OK))
    async with HubClient(
        "http://hub.test", token="fm-direct", transport=httpx.MockTransport(handler), sleep=sleeps
    ) as client:
        await client.send(make_report(1))

    assert requests[0].headers["Authorization"] == "Bearer fm-direct"


def test_exactly_one_token_source_is_required(token_file: Path) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        HubClient("http://hub.test")
    with pytest.raises(ValueError, match="exactly one"):
        HubClient("http://hub.test", token="x", token_file=token_file)


def test_a_ca_bundle_cannot_be_given_with_a_transport(token_file: Path) -> None:
    handler, _ = scripted(httpx.Response(200, json=OK))
    with pytest.raises(ValueError, match="ca_file"):
        HubClient(
            "https://hub.test",
            token_file=token_file,
            ca_file=Path(certifi.where()),
            transport=httpx.MockTransport(handler),
        )


async def test_a_ca_bundle_is_loaded_and_a_missing_one_fails_at_once(token_file: Path) -> None:
    async with HubClient(
        "https://hub.test", token_file=token_file, ca_file=Path(certifi.where())
    ) as client:
        assert client.url == "https://hub.test/api/v1/reports"
    with pytest.raises(FileNotFoundError):
        HubClient("https://hub.test", token_file=token_file, ca_file=token_file.parent / "none")


LIMIT = "X-Fleetmark-Max-Report-Bytes"


async def test_the_hubs_limit_is_learnt_from_its_replies(token_file: Path, sleeps: Sleeps) -> None:
    handler, _ = scripted(httpx.Response(200, json=OK, headers={LIMIT: "1048576"}))
    async with client_for(handler, token_file, sleeps, max_report_bytes=4096) as client:
        assert client.max_report_bytes == 4096  # the configured default, until the hub says
        await client.send(make_report(1))

        assert client.max_report_bytes == 1_048_576


async def test_a_413_is_too_large_and_gives_the_hubs_limit(
    token_file: Path, sleeps: Sleeps
) -> None:
    body = {"error": "payload_too_large", "detail": "the report is 9000 bytes; the limit is 2048"}
    handler, requests = scripted(httpx.Response(413, json=body, headers={LIMIT: "2048"}))
    async with client_for(handler, token_file, sleeps, attempts=3) as client:
        with pytest.raises(ReportTooLarge) as raised:
            await client.send(make_report(1))

        assert client.max_report_bytes == 2048
    assert len(requests) == 1
    assert raised.value.status == 413


async def test_a_413_that_names_no_limit_halves_the_body_it_refused(
    token_file: Path, sleeps: Sleeps
) -> None:
    handler, requests = scripted(httpx.Response(413, text="<html>Too Large</html>"))
    async with client_for(handler, token_file, sleeps) as client:
        with pytest.raises(ReportTooLarge):
            await client.send(make_report(1))

        assert client.max_report_bytes == len(requests[0].content) // 2
