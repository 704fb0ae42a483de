"""Liveness and readiness endpoints of the agent, for the kubelet's probes, and its metrics.

HTTP/1.1 on asyncio's own server, on the agent's event loop, so an answered probe shows the
loop is not stuck. `/healthz` and `/readyz` answer 200 or 503 with a JSON reason, `/metrics`
Prometheus' text, anything else 404; one request per connection, no framework.
"""

import asyncio
from collections.abc import Callable

import orjson
import structlog
from prometheus_client import CONTENT_TYPE_LATEST

__all__ = ["Check", "HealthServer", "Metrics"]

log = structlog.get_logger("agent.health")

Check = Callable[[], tuple[bool, dict[str, object]]]
Metrics = Callable[[], bytes]

_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
_READ_TIMEOUT = 5.0
_MAX_HEADER_LINES = 100


class HealthServer:
    def __init__(
        self, host: str, port: int, *, live: Check, ready: Check, metrics: Metrics
    ) -> None:
        self._host = host
        self._port = port
        self._routes: dict[str, Check] = {"/healthz": live, "/livez": live, "/readyz": ready}
        self._metrics = metrics
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The port listened on (the one the OS chose, when asked for port 0)."""
        if self._server is None or not self._server.sockets:
            return self._port
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)
        log.info("health endpoints listening", host=self._host, port=self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), _READ_TIMEOUT)
            for _ in range(_MAX_HEADER_LINES):
                line = await asyncio.wait_for(reader.readline(), _READ_TIMEOUT)
                if line in (b"\r\n", b"\n", b""):
                    break
            status, content_type, body = self._answer(request)
            head = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
                f"Content-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def _answer(self, request: bytes) -> tuple[int, str, bytes]:
        """Status, content type and body."""
        parts = request.decode("latin-1").split()
        if len(parts) < 2:
            return _json(404, {"error": "not_found"})
        method, target = parts[0], parts[1].split("?", 1)[0]
        check = self._routes.get(target)
        if check is None and target != "/metrics":
            return _json(404, {"error": "not_found", "detail": f"no endpoint {target}"})
        if method != "GET":
            return _json(405, {"error": "method_not_allowed"})
        if check is None:
            return 200, CONTENT_TYPE_LATEST, self._metrics()
        ok, detail = check()
        return _json(200 if ok else 503, {"ok": ok, **detail})


def _json(status: int, document: dict[str, object]) -> tuple[int, str, bytes]:
    return status, "application/json", orjson.dumps(document) + b"\n"
