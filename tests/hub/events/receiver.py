"""A receiver of events on loopback: a real HTTP/1.1 server in a thread, keeping connections
alive, that records what it is sent and over which connection, and answers the statuses a test
lines up (200 once they run out). A request to a path ending `/held` is answered only once
a request `release_on` picks has arrived (or after `HOLD_SECONDS`); a held receiver answers
nothing."""

import json
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support import serving_in_thread

# How long a held request waits at most for its release.
HOLD_SECONDS = 10


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    # The client's address and port: one per connection.
    connection: tuple[str, int]

    @property
    def document(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.received: list[Received] = []
        self.statuses: list[int] = []
        self.subject: str | None = None
        # Headers sent with the statuses lined up (Retry-After).
        self.headers: dict[str, str] = {}
        # What releases the held requests when it arrives.
        self.release_on: Callable[[Received], bool] | None = None
        self.released = threading.Event()
        # The TLS server names clients asked for (SNI), when the receiver speaks https.
        self.server_names: list[str | None] = []
        # Held: each request is kept unanswered until the receiver stops.
        self.holding = False
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    @property
    def https_url(self) -> str:
        """The receiver by name, as a certificate names it."""
        return f"https://localhost:{self.port}/hook"

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def answer(
        self, *statuses: int, subject: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        """Answer these statuses, with `headers`, to the next requests (of the events about
        `subject`, if given), in order, then 200."""
        with self.lock:
            self.statuses = list(statuses)
            self.subject = subject
            self.headers = headers or {}

    def hold(self) -> None:
        """Answer nothing from now on: record each request, then keep it waiting until the
        receiver stops, as a receiver that hangs (or whose answers are lost) does."""
        with self.lock:
            self.holding = True

    def reset(self) -> None:
        with self.lock:
            self.received = []
            self.statuses = []
            self.subject = None
            self.headers = {}
            self.release_on = None
            self.released.clear()

    def _take(self, received: Received) -> tuple[int, dict[str, str]] | None:
        with self.lock:
            self.received.append(received)
            if self.holding:
                return None
            if self.release_on is not None and self.release_on(received):
                self.released.set()
            if self.subject is not None and received.document.get("subject") != self.subject:
                return 200, {}
            if not self.statuses:
                return 200, {}
            return self.statuses.pop(0), self.headers


@contextmanager
def receiving(tls: tuple[Path, Path] | None = None, port: int = 0) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 (on `port`, else a free one); with `tls` (a certificate and its
    key) it speaks https."""
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if self.path.endswith("/held"):
                receiver.released.wait(HOLD_SECONDS)
            received = Received(dict(self.headers.items()), body, self.client_address[:2])
            taken = receiver._take(received)
            if taken is None:
                receiver.stopping.wait()
                self.close_connection = True
                return
            status, headers = taken
            # A failure's answer names the path, as many servers' do.
            answer = b"ok" if status < 300 else f"no hook at {self.path}".encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    receiver = Receiver(server)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)

        def server_name(_: ssl.SSLObject, name: str | None, __: ssl.SSLContext) -> None:
            receiver.server_names.append(name)

        context.sni_callback = server_name
        server.socket = context.wrap_socket(server.socket, server_side=True)
    with serving_in_thread(server):
        try:
            yield receiver
        finally:
            receiver.stopping.set()
