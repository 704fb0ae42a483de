"""The HTTP protocol uvicorn serves the hub with: its own, with deadlines for slow clients.

uvicorn's only timer is for idle keep-alive, and any byte stops it, so a client trickling a
request would hold a connection forever. Here headers and body have deadlines, answered 408
(docs/configuration.md), stopped while the server itself is not reading.
"""

import asyncio
import functools
import json
from asyncio import TimerHandle
from collections.abc import Callable
from typing import Literal

import structlog
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from hub.settings import HubSettings

__all__ = ["DeadlineHttpToolsProtocol"]

log = structlog.get_logger("fleetmark.http")


@functools.cache
def request_timeouts() -> tuple[float, float]:
    """Seconds for a request's headers and for its body, read once per worker process."""
    settings = HubSettings()
    return settings.request_header_timeout, settings.request_body_timeout


# What the client is late with: a first request on a new connection, or a request's headers or
# body. Only a request that has begun is answered 408.
Awaited = Literal["request", "headers", "body"]


class DeadlineHttpToolsProtocol(HttpToolsProtocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, object],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.header_timeout, self.body_timeout = request_timeouts()
        self.awaited: Awaited | None = None
        self.deadline: TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = ReadingFlowControl(transport, self._start_deadline, self._stop_deadline)
        self._await("request")

    def connection_lost(self, exc: Exception | None) -> None:
        self._await(None)
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._await("headers")

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._await("body")

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._await(None)

    def _await(self, awaited: Awaited | None) -> None:
        self.awaited = awaited
        self._stop_deadline()
        if not self.flow.read_paused:
            self._start_deadline()

    def _start_deadline(self) -> None:
        if self.awaited is not None:
            timeout = self.body_timeout if self.awaited == "body" else self.header_timeout
            self.deadline = self.loop.call_later(timeout, self._expire, self.awaited, timeout)

    def _stop_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _expire(self, awaited: Awaited, timeout: float) -> None:
        self.deadline = None
        log.warning("request timed out", awaited=awaited, timeout=timeout, client=self.client)
        if awaited != "request" and self._nothing_being_answered(awaited):
            self._send_408(f"the request's {awaited} did not arrive within {timeout:g} seconds")
        self.transport.close()

    def _nothing_being_answered(self, awaited: Awaited) -> bool:
        """Whether a 408 can be written without cutting into a response on the connection."""
        if awaited == "headers":  # self.cycle is the request before, if any
            return self.cycle is None or self.cycle.response_complete
        return not self.pipeline and not self.cycle.response_started

    def _send_408(self, detail: str) -> None:
        body = json.dumps({"error": "request_timeout", "detail": detail}).encode()
        headers = [
            *self.server_state.default_headers,
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        head = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
        self.transport.write(STATUS_LINE[408] + head + b"\r\n" + body)


class ReadingFlowControl(FlowControl):
    """uvicorn's flow control, telling the protocol when the server stops and resumes reading."""

    def __init__(
        self,
        transport: asyncio.Transport,
        on_resume: Callable[[], None],
        on_pause: Callable[[], None],
    ) -> None:
        super().__init__(transport)
        self.on_resume = on_resume
        self.on_pause = on_pause

    def pause_reading(self) -> None:
        if not self.read_paused:
            super().pause_reading()
            self.on_pause()

    def resume_reading(self) -> None:
        if self.read_paused:
            super().resume_reading()
            self.on_resume()
