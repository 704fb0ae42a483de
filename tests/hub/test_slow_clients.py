"""Slow clients: a real uvicorn server on 127.0.0.1 with the hub's HTTP protocol, real sockets.

The deadlines are half a second here. A trickling client sends a byte every 50 ms until the
server closes on it, so it would otherwise go on for good; the tests wait for the outcome
(408 and a closed connection), never for a time.
"""

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from hub.http import DeadlineHttpToolsProtocol, request_timeouts
from tests.conftest import DatabaseServer

TIMEOUT = "0.5"
SLOW_APP_DELAY = 1.0  # longer than the deadlines: the server, not the client, is slow
TRICKLE_PAUSE = 0.05

Address = tuple[str, int]


async def count_body(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with the length of the request body; /slow first waits for a second."""
    if scope["path"] == "/slow":
        await asyncio.sleep(SLOW_APP_DELAY)
    size = 0
    more_body = True
    while more_body:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message["body"])
        more_body = message["more_body"]
    body = str(size).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def short_deadlines(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FLEETMARK_REQUEST_HEADER_TIMEOUT", TIMEOUT)
    monkeypatch.setenv("FLEETMARK_REQUEST_BODY_TIMEOUT", TIMEOUT)
    request_timeouts.cache_clear()
    yield
    request_timeouts.cache_clear()


@pytest.fixture
async def server(short_deadlines: None) -> AsyncIterator[Address]:
    listener = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(
        count_body, http=DeadlineHttpToolsProtocol, lifespan="off", log_config=None
    )
    served = uvicorn.Server(config)
    task = asyncio.create_task(served.serve(sockets=[listener]))
    yield listener.getsockname()
    served.should_exit = True
    await task
    listener.close()


@asynccontextmanager
async def connection(
    address: Address,
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection(*address)
    try:
        yield reader, writer
    finally:
        writer.close()


async def read_to_close(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    try:
        while chunk := await reader.read(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


async def trickle_until_closed(address: Address, start: bytes, drip: bytes) -> bytes:
    """Sends `start`, then `drip` a byte at a time; what the server answered before closing."""
    async with connection(address) as (reader, writer):
        writer.write(start)
        answer = asyncio.create_task(read_to_close(reader))
        for byte in drip:
            if answer.done():
                break
            writer.write(bytes([byte]))
            await asyncio.sleep(TRICKLE_PAUSE)
        return await asyncio.wait_for(answer, timeout=10)


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """The status line and body of one response with a content-length."""
    head = await reader.readuntil(b"\r\n\r\n")
    status, *fields = head.decode().split("\r\n")
    length = next(int(f.split(":")[1]) for f in fields if f.lower().startswith("content-length"))
    return status.encode(), await reader.readexactly(length)


def post(path: str, body: bytes) -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: hub\r\nContent-Length: %d\r\n\r\n%s" % (
        path.encode(),
        len(body),
        body,
    )


def assert_timed_out(answer: bytes, part: str) -> None:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"connection: close" in head
    assert json.loads(body) == {
        "error": "request_timeout",
        "detail": f"the request's {part} did not arrive within 0.5 seconds",
    }


async def test_trickled_headers_are_answered_408_and_closed(server: Address) -> None:
    answer = await trickle_until_closed(
        server, b"POST /upload HTTP/1.1\r\nHost: hub\r\n", b"X-Slow: " + b"a" * 1000
    )
    assert_timed_out(answer, "headers")


async def test_trickled_body_is_answered_408_and_closed(server: Address) -> None:
    answer = await trickle_until_closed(
        server, b"POST /upload HTTP/1.1\r\nHost: hub\r\nContent-Length: 1000\r\n\r\n", b"a" * 1000
    )
    assert_timed_out(answer, "body")


async def test_a_connection_that_sends_nothing_is_closed_unanswered(server: Address) -> None:
    async with connection(server) as (reader, _):
        assert await asyncio.wait_for(read_to_close(reader), timeout=10) == b""


async def test_a_normal_request_is_answered_while_another_client_trickles(
    server: Address,
) -> None:
    trickler = asyncio.create_task(
        trickle_until_closed(server, b"GET / HTTP/1.1\r\n", b"Host: " + b"a" * 1000)
    )
    async with connection(server) as (reader, writer):
        writer.write(post("/upload", b"x" * 100))
        assert await read_response(reader) == (b"HTTP/1.1 200 OK", b"100")
    assert_timed_out(await trickler, "headers")


async def test_a_kept_alive_connection_serves_requests_after_idling(server: Address) -> None:
    async with connection(server) as (reader, writer):
        writer.write(post("/upload", b"first"))
        assert await read_response(reader) == (b"HTTP/1.1 200 OK", b"5")
        # Idle for longer than the deadlines but within uvicorn's keep-alive of 5 seconds.
        await asyncio.sleep(2 * float(TIMEOUT))
        writer.write(post("/upload", b"second"))
        assert await read_response(reader) == (b"HTTP/1.1 200 OK", b"6")


async def test_a_pipelined_body_waiting_for_a_slow_answer_is_not_cut_off(
    server: Address,
) -> None:
    second = post("/upload", b"y" * 10)
    body_at = second.index(b"\r\n\r\n") + 4
    async with connection(server) as (reader, writer):
        writer.write(post("/slow", b"") + second[:body_at])
        await asyncio.sleep(TRICKLE_PAUSE)  # the server parses both heads and waits on /slow
        writer.write(second[body_at:])
        assert await read_response(reader) == (b"HTTP/1.1 200 OK", b"0")
        assert await read_response(reader) == (b"HTTP/1.1 200 OK", b"10")


async def test_a_large_body_the_app_reads_late_is_not_cut_off(server: Address) -> None:
    body = b"z" * (8 * 1024 * 1024)
    async with connection(server) as (reader, writer):
        writer.write(post("/slow", body))
        await writer.drain()
        assert await read_response(reader) == (b"HTTP/1.1 200 OK", str(len(body)).encode())


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port: int = probe.getsockname()[1]
        return port


async def test_fleetmark_serve_answers_trickled_headers_408(
    database_server: DatabaseServer, short_deadlines: None
) -> None:
    address = ("127.0.0.1", free_port())
    with database_server.migrated_database() as url:
        environment = os.environ | {
            "FLEETMARK_DATABASE_URL": url,
            "FLEETMARK_MODE": "development",
        }
        fleetmark = str(Path(sys.executable).parent / "fleetmark")
        command = [fleetmark, "serve", "--no-migrate", "--port", str(address[1])]
        hub = await asyncio.create_subprocess_exec(*command, env=environment)
        try:
            await wait_until_listening(address, hub)
            answer = await trickle_until_closed(
                address, b"GET /healthz HTTP/1.1\r\nHost: hub\r\n", b"X-Slow: " + b"a" * 1000
            )
            assert_timed_out(answer, "headers")
        finally:
            hub.send_signal(signal.SIGTERM)
            await asyncio.wait_for(hub.wait(), timeout=30)


async def wait_until_listening(address: Address, process: asyncio.subprocess.Process) -> None:
    while process.returncode is None:
        try:
            async with connection(address):
                return
        except ConnectionRefusedError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"fleetmark serve exited with {process.returncode}")
