"""A small local HTTP server that speaks the parts of the Kubernetes API the agent uses.

Discovery (`GET /apis/<group>/<version>`, 404 for what is not served), list (JSON lists with
`metadata.resourceVersion`, paged by `limit`/`continue`), watch (`?watch=1&resourceVersion=`,
chunked newline-delimited ADDED/MODIFIED/DELETED/BOOKMARK/ERROR events), and Leases (get,
create, replace with resourceVersion checks). Tests and the agent benchmark drive it: change
objects, expire resource versions (410 Gone), drop watch connections, fail requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from agent.sources import WATCHED_KINDS

LEASES = ("coordination.k8s.io", "v1", "leases", "Lease")
POLL = 0.01  # seconds between looks while a test waits for real I/O


async def until(condition: Callable[[], object], bound: float = 5.0) -> None:
    """Wait, in short polls, for `condition` to hold; fail after `bound` seconds."""
    for _ in range(round(bound / POLL)):
        if condition():
            return
        await asyncio.sleep(POLL)
    raise AssertionError(f"not so within {bound} s: {condition}")


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str


def served(*plurals: str) -> list[Resource]:
    """The watched kinds named by plural, each in its newest version."""
    return [
        Resource(kind.group, kind.versions[0], kind.plural, kind.kind)
        for kind in WATCHED_KINDS
        if kind.plural in plurals
    ]


@dataclass
class Event:
    rv: int
    type: str
    plural: str
    namespace: str
    body: bytes  # the JSON line, newline included


@dataclass
class _Failure:
    prefix: str
    status: int
    times: int


@dataclass
class _State:
    objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    leases: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    rv: int = 1000
    compacted: int = 0  # watches from a resourceVersion below this get 410 Gone
    drops: int = 0  # bumped to cut every open watch connection
    expiries: int = 0  # bumped to end every open watch with an ERROR 410 event


class FakeApiServer:
    def __init__(self, resources: Iterable[Resource] = ()) -> None:
        self.resources = {resource.plural: resource for resource in resources}
        self._state = _State(objects={plural: {} for plural in self.resources})
        self._changed = threading.Condition()
        self._failures: list[_Failure] = []
        self.requests: list[str] = []
        self.open_watches = 0
        self.bookmarks_sent = 0
        self._stopping = False
        self._sockets: set[socket.socket] = set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # --- life cycle ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping = True
        with self._changed:
            self._changed.notify_all()
        self._server.shutdown()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- what tests do to the cluster ---------------------------------------------------

    def serve(self, resource: Resource) -> None:
        """Start serving a resource (a CRD installed while the agent runs)."""
        with self._changed:
            self.resources[resource.plural] = resource
            self._state.objects.setdefault(resource.plural, {})

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object; returns it as stored, with its resourceVersion."""
        stored = copy.deepcopy(obj)
        metadata = stored.setdefault("metadata", {})
        key = (metadata.get("namespace", ""), metadata["name"])
        with self._changed:
            state = self._state
            existed = key in state.objects[plural]
            state.rv += 1
            metadata["resourceVersion"] = str(state.rv)
            state.objects[plural][key] = stored
            self._record(plural, "MODIFIED" if existed else "ADDED", stored)
        return stored

    def delete(self, plural: str, namespace: str, name: str) -> None:
        with self._changed:
            state = self._state
            stored = state.objects[plural].pop((namespace, name))
            state.rv += 1
            stored["metadata"]["resourceVersion"] = str(state.rv)
            self._record(plural, "DELETED", stored)

    def put_silently(self, plural: str, obj: dict[str, Any]) -> None:
        """Change an object without a watch event (as if the event fell out of the window)."""
        stored = copy.deepcopy(obj)
        metadata = stored.setdefault("metadata", {})
        with self._changed:
            self._state.rv += 1
            metadata["resourceVersion"] = str(self._state.rv)
            self._state.objects[plural][(metadata.get("namespace", ""), metadata["name"])] = stored

    def expire(self) -> None:
        """Compact history: open watches end with an ERROR 410, old resourceVersions are Gone."""
        with self._changed:
            self._state.compacted = self._state.rv
            self._state.events.clear()
            self._state.expiries += 1
            self._changed.notify_all()

    def drop_watches(self) -> None:
        """Cut every open watch connection mid-stream, without ending the chunked body."""
        with self._changed:
            self._state.drops += 1
            self._changed.notify_all()

    def bookmark(self) -> None:
        with self._changed:
            self._state.rv += 1
            self._record("", "BOOKMARK", {"metadata": {"resourceVersion": str(self._state.rv)}})

    def fail(self, path_prefix: str, status: int, times: int = 1) -> None:
        """Answer the next `times` requests whose path starts with `path_prefix` with `status`."""
        with self._changed:
            self._failures.append(_Failure(path_prefix, status, times))

    @property
    def resource_version(self) -> str:
        return str(self._state.rv)

    def lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._changed:
            found = self._state.leases.get((namespace, name))
            return copy.deepcopy(found) if found else None

    def count(self, prefix: str, *, watch: bool | None = None) -> int:
        return sum(
            1
            for line in list(self.requests)
            if line.startswith(prefix) and (watch is None or ("watch=" in line) == watch)
        )

    def _record(self, plural: str, kind: str, obj: dict[str, Any]) -> None:
        line = json.dumps({"type": kind, "object": obj}, separators=(",", ":")) + "\n"
        namespace = obj["metadata"].get("namespace", "")
        self._state.events.append(Event(self._state.rv, kind, plural, namespace, line.encode()))
        self._changed.notify_all()

    # --- HTTP ---------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes; without this, Nagle's algorithm
                # and delayed ACKs add 40 ms to every answer.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._dispatch(self, "GET")

            def do_POST(self) -> None:
                server._dispatch(self, "POST")

            def do_PUT(self) -> None:
                server._dispatch(self, "PUT")

        return Handler

    def _dispatch(self, request: BaseHTTPRequestHandler, method: str) -> None:
        self.requests.append(f"{method} {request.path}")
        parts = urlsplit(request.path)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        body = b""
        if length := int(request.headers.get("Content-Length") or 0):
            body = request.rfile.read(length)
        with self._changed:
            for failure in self._failures:
                if parts.path.startswith(failure.prefix) and failure.times > 0:
                    failure.times -= 1
                    status = failure.status
                    break
            else:
                status = 0
        if status:
            self._status(request, status, "InternalError", "injected failure")
            return
        segments = [segment for segment in parts.path.split("/") if segment]
        if segments[:1] != ["apis"] or len(segments) < 3:
            self._status(request, 404, "NotFound", f"no route for {parts.path}")
            return
        group, version, rest = segments[1], segments[2], segments[3:]
        if (group, version) == LEASES[:2]:
            self._lease_route(request, method, rest, body)
            return
        if not rest:
            self._discovery(request, group, version)
            return
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource = self.resources.get(rest[0])
        if resource is None or (resource.group, resource.version) != (group, version):
            self._status(request, 404, "NotFound", "the server could not find the resource")
            return
        if query.get("watch") in ("1", "true", "True"):
            self._watch(request, resource, namespace, query)
        else:
            self._list(request, resource, namespace, query)

    def _discovery(self, request: BaseHTTPRequestHandler, group: str, version: str) -> None:
        resources = [
            {
                "name": r.plural,
                "namespaced": True,
                "kind": r.kind,
                "verbs": ["get", "list", "watch"],
            }
            for r in self.resources.values()
            if (r.group, r.version) == (group, version)
        ]
        if not resources:
            self._status(
                request, 404, "NotFound", "the server could not find the requested resource"
            )
            return
        self._json(
            request,
            200,
            {
                "kind": "APIResourceList",
                "groupVersion": f"{group}/{version}",
                "resources": resources,
            },
        )

    def _list(
        self,
        request: BaseHTTPRequestHandler,
        resource: Resource,
        namespace: str,
        query: dict[str, str],
    ) -> None:
        with self._changed:
            state = self._state
            snapshot_rv = state.rv
            offset = 0
            if token := query.get("continue"):
                token_rv, _, token_offset = token.partition(":")
                if int(token_rv) < state.compacted:
                    self._status(request, 410, "Expired", "the continue token has expired")
                    return
                snapshot_rv, offset = int(token_rv), int(token_offset)
            items = [
                obj
                for (ns, _), obj in sorted(state.objects[resource.plural].items())
                if not namespace or ns == namespace
            ]
            limit = int(query.get("limit") or 0) or len(items) or 1
            page = items[offset : offset + limit]
            metadata: dict[str, Any] = {"resourceVersion": str(snapshot_rv)}
            if offset + limit < len(items):
                metadata["continue"] = f"{snapshot_rv}:{offset + limit}"
            body = json.dumps(
                {
                    "apiVersion": f"{resource.group}/{resource.version}",
                    "kind": f"{resource.kind}List",
                    "metadata": metadata,
                    "items": page,
                },
                separators=(",", ":"),
            ).encode()
        self._send(request, 200, body)

    def _watch(
        self,
        request: BaseHTTPRequestHandler,
        resource: Resource,
        namespace: str,
        query: dict[str, str],
    ) -> None:
        since = int(query.get("resourceVersion") or 0)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1", "True")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Transfer-Encoding", "chunked")
        request.end_headers()
        sock = request.connection
        self._sockets.add(sock)
        self.open_watches += 1
        try:
            with self._changed:
                state = self._state
                drops, expiries = state.drops, state.expiries
                if since < state.compacted:
                    gone = True
                else:
                    gone = False
                    position = next(
                        (i for i, event in enumerate(state.events) if event.rv > since),
                        len(state.events),
                    )
            if gone:
                self._chunk(request, self._gone_line(since))
                self._chunk(request, b"")
                return
            while not self._stopping:
                with self._changed:
                    state = self._state
                    if state.drops != drops:
                        sock.shutdown(socket.SHUT_RDWR)
                        request.close_connection = True
                        return
                    if state.expiries != expiries:
                        lines = [self._gone_line(since)]
                        ended = True
                    else:
                        fresh = state.events[position:]
                        position = len(state.events)
                        lines = [
                            event.body
                            for event in fresh
                            if (
                                event.plural == resource.plural
                                and (not namespace or event.namespace == namespace)
                            )
                            or (event.type == "BOOKMARK" and bookmarks)
                        ]
                        ended = time.monotonic() >= deadline
                        if not lines and not ended:
                            self._changed.wait(0.05)
                            continue
                for line in lines:
                    self._chunk(request, line)
                    if line.startswith(b'{"type":"BOOKMARK"'):
                        self.bookmarks_sent += 1
                if ended:
                    self._chunk(request, b"")
                    return
        except OSError:
            request.close_connection = True
        finally:
            self.open_watches -= 1
            self._sockets.discard(sock)

    @staticmethod
    def _gone_line(since: int) -> bytes:
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": f"too old resource version: {since}",
            "reason": "Expired",
            "code": 410,
        }
        return (json.dumps({"type": "ERROR", "object": status}) + "\n").encode()

    @staticmethod
    def _chunk(request: BaseHTTPRequestHandler, data: bytes) -> None:
        request.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        request.wfile.flush()

    def _lease_route(
        self, request: BaseHTTPRequestHandler, method: str, rest: list[str], body: bytes
    ) -> None:
        if len(rest) < 3 or rest[0] != "namespaces" or rest[2] != "leases":
            self._status(request, 404, "NotFound", "no such lease route")
            return
        namespace = rest[1]
        name = rest[3] if len(rest) > 3 else None
        with self._changed:
            leases = self._state.leases
            if method == "GET" and name:
                found = leases.get((namespace, name))
                if found is None:
                    self._status(request, 404, "NotFound", f'leases "{name}" not found')
                    return
                self._json(request, 200, found)
                return
            lease = json.loads(body)
            metadata = lease.setdefault("metadata", {})
            key = (namespace, metadata.get("name") or name or "")
            if method == "POST" and not name:
                if key in leases:
                    self._status(request, 409, "AlreadyExists", f'leases "{key[1]}" already exists')
                    return
            elif method == "PUT" and name:
                current = leases.get(key)
                if current is None:
                    self._status(request, 404, "NotFound", f'leases "{name}" not found')
                    return
                if metadata.get("resourceVersion") != current["metadata"]["resourceVersion"]:
                    self._status(
                        request,
                        409,
                        "Conflict",
                        'Operation cannot be fulfilled on leases.coordination.k8s.io "'
                        f'{name}": the object has been modified',
                    )
                    return
            else:
                self._status(request, 405, "MethodNotAllowed", method)
                return
            self._state.rv += 1
            metadata["namespace"] = namespace
            metadata["resourceVersion"] = str(self._state.rv)
            leases[key] = lease
            self._json(request, 201 if method == "POST" else 200, lease)

    def _status(
        self, request: BaseHTTPRequestHandler, code: int, reason: str, message: str
    ) -> None:
        self._json(
            request,
            code,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": code,
            },
        )

    def _json(self, request: BaseHTTPRequestHandler, code: int, document: Any) -> None:
        self._send(request, code, json.dumps(document, separators=(",", ":")).encode())

    @staticmethod
    def _send(request: BaseHTTPRequestHandler, code: int, body: bytes) -> None:
        request.send_response(code)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)
