"""A receiver of the hub's events for the demo: a small threaded HTTP server on loopback that
hands each request's body and X-Fleetmark-Signature to the demo, which checks and prints it.
"""

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from hub.demo.serving import Served

__all__ = ["EventReceiver", "Take"]

# Takes a request's body and signature header; whether the event is accepted.
Take = Callable[[bytes, str | None], bool]


class EventReceiver(Served):
    """Receives events on a free port of 127.0.0.1 until the `with` block ends."""

    def __init__(self, take: Take) -> None:
        handler = type("Handler", (_Handler,), {"take": staticmethod(take)})
        super().__init__(ThreadingHTTPServer(("127.0.0.1", 0), handler), name="fleetmark-events")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/events"


class _Handler(BaseHTTPRequestHandler):
    take: Take

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        accepted = self.take(body, self.headers.get("X-Fleetmark-Signature"))
        # 401 for a request whose signature does not hold: the hub tries it again later.
        self.send_response(204 if accepted else 401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """The demo prints the events, not each request."""
