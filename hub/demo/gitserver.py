"""The demo's repositories over git's smart HTTP protocol (`git http-backend` behind a small
threaded server), for a hub that cannot read them on its file system, such as compose's.
All are served for fetching; `writable` names those a client may push to (the platform GitOps
repository). Nothing is authenticated: it is a demo's, on compose's network.
"""

import os
import subprocess
from collections.abc import Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from hub.demo.serving import Served

__all__ = ["GitServer"]

# What git's HTTP client may send beyond the request body, passed on to http-backend.
_PASSED_HEADERS = {"Content-Type": "CONTENT_TYPE", "Content-Encoding": "HTTP_CONTENT_ENCODING"}


class GitServer(Served):
    """`git http-backend` on (host, port), until the `with` block ends."""

    def __init__(self, root: Path, host: str, port: int, *, writable: Collection[str]) -> None:
        handler = type(
            "Handler",
            (_Handler,),
            {"root": root.resolve(), "writable": frozenset(writable)},
        )
        super().__init__(ThreadingHTTPServer((host, port), handler), name="fleetmark-git")

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    root: Path
    writable: frozenset[str]
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._backend()

    def do_POST(self) -> None:
        self._backend()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: every fetch of every harvest would be a line."""

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # the trailer
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _repository(self, path: str) -> str | None:
        """The served repository `path` names: its first segment, a directory under the root;
        None for any other path (`..`, `.`, an empty segment, a repository not there)."""
        segments = path.strip("/").split("/")
        if any(segment in ("", ".", "..") for segment in segments):
            return None
        found = (self.root / segments[0]).resolve()
        return segments[0] if found.parent == self.root and found.is_dir() else None

    def _backend(self) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        body = self._body()
        repository = self._repository(path)
        if repository is None:
            self.send_error(404, "no such repository")
            return
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": parts.query,
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
        }
        for header, variable in _PASSED_HEADERS.items():
            if (value := self.headers.get(header)) is not None:
                environment[variable] = value
        if (protocol := self.headers.get("Git-Protocol")) is not None:
            environment["GIT_PROTOCOL"] = protocol
        # http-backend lets an authenticated user push: the writable repositories' clients are.
        if repository in self.writable:
            environment["REMOTE_USER"] = "fleetmark-demo"
        # git's own CGI program, on the demo's repositories.
        done = subprocess.run(
            ["git", "http-backend"],  # noqa: S607 - whichever git the user has
            input=body,
            env=environment,
            capture_output=True,
            check=False,
        )
        # A CGI answer: header lines (`Status: 404 Not Found` among them), a blank line, the body.
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        if done.returncode != 0 and not head:
            status, payload = 500, done.stderr
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
