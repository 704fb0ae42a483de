"""A small Grafana for `fleetmark dashboards push`: the HTTP API calls the command makes, served on
a real port, answering with the status codes and bodies of Grafana's HTTP API documentation.

- `GET /api/health` (Health API): `{"commit", "database", "version"}`, without a token.
- `GET /api/search?type=dash-folder&query=Q` (Folder/Dashboard Search API): the folders whose
  title holds Q (any case); a folder inside another one carries its parent's `folderUid`.
- `POST /api/folders` (Folder API): the folder; 400 without a title; 409 when a folder of that
  uid, or of that title at the same level, exists.
- `GET /api/datasources/uid/:uid`, `POST /api/datasources` (Data source API): 404 `Data source
  not found`; the created data source with its secrets listed in `secureJsonFields`, never
  answered back; 409 when one of that name or uid exists.
- `POST /api/dashboards/db` (Dashboard API): `{"id", "uid", "url", "status", "version",
  "slug"}`, the version counted up on every save; 400 without a title, with a uid over 40
  characters or with an unknown folder;
  412 `{"message", "status"}`: `version-mismatch` when `overwrite` is false and the version sent
  is not the stored one, `name-exists` when the folder holds another dashboard of that title.

Every call but the health check needs `Authorization: Bearer <token>` of a service account
(401 otherwise), whose basic role gates what it may do as Grafana's RBAC tables say: Editors
create folders and dashboards, only Admins data sources (403 `Access denied`). What Grafana
answers when it is in trouble (5xx) or when another writer got in first (412) is queued with
`answer_next`.
"""

import itertools
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support import serving_in_thread

ADMIN_TOKEN = "glsa_admin"
EDITOR_TOKEN = "glsa_editor"
VIEWER_TOKEN = "glsa_viewer"
_RANKS = {"Viewer": 0, "Editor": 1, "Admin": 2}

Answer = tuple[int, Any]


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


@dataclass
class FakeGrafana:
    version: str = "11.3.0"
    tokens: dict[str, str] = field(
        default_factory=lambda: {
            ADMIN_TOKEN: "Admin",
            EDITOR_TOKEN: "Editor",
            VIEWER_TOKEN: "Viewer",
        }
    )
    folders: dict[str, dict[str, Any]] = field(default_factory=dict)
    datasources: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What Grafana keeps encrypted, by data source uid.
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    # By uid: the dashboard model as stored, its folder, version and version message.
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._queued: dict[tuple[str, str], list[Answer]] = {}

    def answer_next(self, method: str, path: str, status: int, body: Any) -> None:
        """The next authorised `method path` gets this answer instead of its own."""
        self._queued.setdefault((method, path), []).append((status, body))

    def calls(self, method: str, path: str) -> int:
        return self.requests.count((method, path))

    # --- the API ------------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: dict[str, list[str]], auth: str | None, body: Any
    ) -> Answer:
        with self._lock:
            self.requests.append((method, path))
            if (method, path) == ("GET", "/api/health"):
                return 200, {"commit": "5e1b1f2a", "database": "ok", "version": self.version}
            role = self.tokens.get((auth or "").removeprefix("Bearer "))
            if role is None:
                return 401, {"message": "Unauthorized"}
            queued = self._queued.get((method, path))
            if queued:
                return queued.pop(0)
            return self._route(method, path, query, role, body)

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], role: str, body: Any
    ) -> Answer:
        if (method, path) == ("GET", "/api/search"):
            return self._search(query)
        if (method, path) == ("POST", "/api/folders"):
            return self._allowed(role, "Editor", "folders:create") or self._create_folder(body)
        if method == "GET" and path.startswith("/api/datasources/uid/"):
            return self._datasource(path.removeprefix("/api/datasources/uid/"))
        if (method, path) == ("POST", "/api/datasources"):
            denied = self._allowed(role, "Admin", "datasources:create")
            return denied or self._create_datasource(body)
        if (method, path) == ("POST", "/api/dashboards/db"):
            return self._allowed(role, "Editor", "dashboards:create") or self._save_dashboard(body)
        return 404, {"message": "Not found"}

    @staticmethod
    def _allowed(role: str, needed: str, action: str) -> Answer | None:
        if _RANKS[role] >= _RANKS[needed]:
            return None
        return 403, {
            "accessErrorId": "ACE4217750331",
            "message": "You'll need additional permissions to perform this action. "
            f"Permissions needed: {action}",
            "title": "Access denied",
        }

    def _search(self, query: dict[str, list[str]]) -> Answer:
        wanted = query.get("query", [""])[0].lower()
        if query.get("type") != ["dash-folder"]:
            return 400, {"message": "only folder searches are served here"}
        hits = []
        for folder in self.folders.values():
            if wanted not in folder["title"].lower():
                continue
            hit = {
                "id": folder["id"],
                "uid": folder["uid"],
                "title": folder["title"],
                "url": folder["url"],
                "type": "dash-folder",
                "tags": [],
                "isStarred": False,
                "uri": f"db/{slug(folder['title'])}",
            }
            if folder.get("parentUid"):
                hit["folderUid"] = folder["parentUid"]
            hits.append(hit)
        return 200, hits

    def _create_folder(self, body: dict[str, Any]) -> Answer:
        title, parent = body.get("title"), body.get("parentUid")
        if not title:
            return 400, {"message": "folder title cannot be empty"}
        uid = body.get("uid") or f"f{next(self._ids):08d}"
        if uid in self.folders:
            return 409, {"message": "a folder with the same uid already exists"}
        if any(f["title"] == title and f.get("parentUid") == parent for f in self.folders.values()):
            return 409, {
                "message": "a folder or dashboard in the general folder with the same name "
                "already exists"
            }
        folder = {
            "id": next(self._ids),
            "uid": uid,
            "title": title,
            "url": f"/dashboards/f/{uid}/{slug(title)}",
            "hasAcl": False,
            "canSave": True,
            "canEdit": True,
            "canAdmin": True,
            "createdBy": "sa-fleetmark",
            "created": "2026-11-26T12:00:00Z",
            "updatedBy": "sa-fleetmark",
            "updated": "2026-11-26T12:00:00Z",
            "version": 1,
        }
        if parent:
            folder["parentUid"] = parent
        self.folders[uid] = folder
        return 200, folder

    def _datasource(self, uid: str) -> Answer:
        stored = self.datasources.get(uid)
        if stored is None:
            return 404, {"message": "Data source not found"}
        return 200, stored

    def _create_datasource(self, body: dict[str, Any]) -> Answer:
        name, kind = body.get("name"), body.get("type")
        if not name or not kind:
            return 400, {"message": "Required field is missing"}
        uid = body.get("uid") or f"d{next(self._ids):08d}"
        if any(d["name"] == name for d in self.datasources.values()):
            return 409, {"message": "data source with the same name already exists"}
        if uid in self.datasources:
            return 409, {"message": "data source with the same uid already exists"}
        secure = body.get("secureJsonData") or {}
        stored = {
            "id": next(self._ids),
            "uid": uid,
            "orgId": 1,
            "name": name,
            "type": kind,
            "typeLogoUrl": "",
            "access": body.get("access", "proxy"),
            "url": body.get("url", ""),
            "password": "",
            "user": body.get("user", ""),
            "database": "",
            "basicAuth": False,
            "basicAuthUser": "",
            "basicAuthPassword": "",
            "withCredentials": False,
            "isDefault": False,
            "jsonData": body.get("jsonData") or {},
            "secureJsonFields": dict.fromkeys(secure, True),
            "version": 1,
            "readOnly": False,
        }
        self.datasources[uid] = stored
        self.secrets[uid] = dict(secure)
        return 200, {
            "datasource": stored,
            "id": stored["id"],
            "message": "Datasource added",
            "name": name,
        }

    def _save_dashboard(self, body: dict[str, Any]) -> Answer:
        dashboard = body.get("dashboard")
        if not isinstance(dashboard, dict):
            return 400, {"message": "bad request data"}
        title = dashboard.get("title")
        if not title:
            return 400, {"message": "Dashboard title cannot be empty"}
        folder_uid = body.get("folderUid") or ""
        if folder_uid and folder_uid not in self.folders:
            return 400, {"message": "folder not found"}
        uid = dashboard.get("uid") or f"u{next(self._ids):08d}"
        if len(uid) > 40:
            return 400, {"message": "Dashboard UID too long"}
        existing = self.dashboards.get(uid)
        overwrite = bool(body.get("overwrite"))
        if existing and not overwrite and dashboard.get("version") != existing["version"]:
            return 412, {
                "message": "The dashboard has been changed by someone else",
                "status": "version-mismatch",
            }
        namesake = any(
            other_uid != uid and d["folderUid"] == folder_uid and d["dashboard"]["title"] == title
            for other_uid, d in self.dashboards.items()
        )
        if namesake and not overwrite:
            return 412, {
                "message": "A dashboard with the same name in the folder already exists",
                "status": "name-exists",
            }
        version = existing["version"] + 1 if existing else 1
        ident = existing["dashboard"]["id"] if existing else next(self._ids)
        self.dashboards[uid] = {
            "dashboard": {**dashboard, "id": ident, "uid": uid, "version": version},
            "folderUid": folder_uid,
            "version": version,
            "message": body.get("message", ""),
        }
        return 200, {
            "id": ident,
            "uid": uid,
            "url": f"/d/{uid}/{slug(title)}",
            "status": "success",
            "version": version,
            "slug": slug(title),
        }


@contextmanager
def serve(grafana: FakeGrafana) -> Iterator[str]:
    """The fake on a free port of 127.0.0.1, over real HTTP; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def _answer(self, method: str) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, answer = grafana.handle(
                method, url.path, parse_qs(url.query), self.headers.get("Authorization"), body
            )
            # A text answer is what a proxy in front of Grafana sends, as plain text.
            text = isinstance(answer, str)
            data = (answer if text else json.dumps(answer)).encode()
            self.send_response(status)
            self.send_header(
                "Content-Type", "text/plain" if text else "application/json; charset=UTF-8"
            )
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read the fake's state, not its log."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with serving_in_thread(server):
        yield f"http://127.0.0.1:{server.server_address[1]}"
