"""GitHub's and GitLab's REST APIs on loopback, as far as commit statuses go: a real HTTP
server in a thread that answers `POST /repos/{owner}/{repo}/statuses/{sha}` (GitHub) and
`POST /api/v4/projects/{id}/statuses/{sha}` (GitLab) 201 with the status in the forge's
documented shape, or the answers a test lines up (rate limits with their headers, 5xx, 401, a
redirect), and records every request."""

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support import serving_in_thread


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)


class Forge:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.requests: list[Request] = []
        self.replies: list[Reply] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, *replies: Reply) -> None:
        """Answer these to the next requests, in order, then 201."""
        with self.lock:
            self.replies = list(replies)

    def take(self) -> list[Request]:
        """The requests since the last call."""
        with self.lock:
            taken, self.requests = self.requests, []
        return taken

    def _reply(self, request: Request) -> Reply:
        with self.lock:
            self.requests.append(request)
            if self.replies:
                return self.replies.pop(0)
        parts = request.path.strip("/").split("/")
        status_id = len(self.requests)
        if parts[:3] == ["api", "v4", "projects"] and len(parts) == 6 and parts[4] == "statuses":
            return Reply(
                201,
                body={
                    "id": status_id,
                    "sha": parts[5],
                    "ref": None,
                    "status": request.body["state"],
                    "name": request.body.get("name", "default"),
                    "target_url": request.body.get("target_url"),
                    "description": request.body.get("description"),
                    "created_at": "2026-11-22T12:00:00.000Z",
                    "started_at": None,
                    "finished_at": None,
                    "allow_failure": False,
                    "author": {"id": 1, "username": "fleetmark-bot", "state": "active"},
                },
            )
        if len(parts) != 5 or parts[0] != "repos" or parts[3] != "statuses":
            return Reply(404, body={"message": "Not Found"})
        return Reply(
            201,
            body={
                "url": f"{self.url}{request.path}",
                "id": status_id,
                "node_id": f"SC_{status_id}",
                "state": request.body["state"],
                "description": request.body.get("description"),
                "target_url": request.body.get("target_url"),
                "context": request.body.get("context", "default"),
                "created_at": "2026-11-22T12:00:00Z",
                "updated_at": "2026-11-22T12:00:00Z",
                "creator": {"login": "fleetmark-bot", "id": 1, "type": "Bot"},
            },
        )


@contextmanager
def serving() -> Iterator[Forge]:
    forge: Forge

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            reply = forge._reply(Request(self.path, dict(self.headers.items()), body))
            content = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    forge = Forge(server)
    with serving_in_thread(server):
        yield forge
