"""The headers every answer of the hub carries: a browser runs nothing but what the hub serves,
frames nothing, sniffs no other type, and tells no other site which page linked to it.

The pages have no script or inline style, so their policy allows only the hub's own files.
Swagger UI and ReDoc start from inline script and style, so they get a policy of their own.
"""

from collections.abc import Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGES_POLICY = "default-src 'self'; frame-ancestors 'none'"
DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; frame-ancestors 'none'"
)

_COMMON = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
_PAGES = [*_COMMON, (b"content-security-policy", PAGES_POLICY.encode())]
_DOCS = [*_COMMON, (b"content-security-policy", DOCS_POLICY.encode())]


class SecurityHeaders:
    """Adds the headers to every HTTP answer; `docs_paths` get the documentation's policy."""

    def __init__(self, app: ASGIApp, docs_paths: Collection[str]) -> None:
        self.app = app
        self.docs_paths = frozenset(docs_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = _DOCS if scope["path"] in self.docs_paths else _PAGES

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *added]
            await send(message)

        await self.app(scope, receive, send_with_headers)
