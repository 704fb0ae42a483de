"""A receiver of events on loopback: a real HTTP server in a thread that records what it is
sent and answers the statuses a test lines up (200 once they run out), or, held, nothing."""

import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def document(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.received: list[Received] = []
        self.statuses: list[int] = []
        self.subject: str | None = None
        # The TLS server names clients asked for (SNI), when the receiver speaks https.
        self.server_names: list[str | None] = []
        self.lock = threading.Lock()
        # Held: each request is kept unanswered until the receiver stops.
        self.holding = False
        self.stopping = threading.Event()

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

    def answer(self, *statuses: int, subject: str | None = None) -> None:
        """Answer these statuses to the next requests (of the events about `subject`, if
        given), in order, then 200."""
        with self.lock:
            self.statuses = list(statuses)
            self.subject = subject

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

    def _take(self, received: Received) -> int | None:
        with self.lock:
            self.received.append(received)
            if self.holding:
                return None
            if self.subject is not None and received.document.get("subject") != self.subject:
                return 200
            return self.statuses.pop(0) if self.statuses else 200


@contextmanager
def receiving(tls: tuple[Path, Path] | None = None, port: int = 0) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 (on `port`, else a free one); with `tls` (a certificate and its
    key) it speaks https."""
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            status = receiver._take(Received(dict(self.headers.items()), body))
            if status is None:
                receiver.stopping.wait()
                self.close_connection = True
                return
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()
