"""The demo's small HTTP servers: each answers from a thread of its own while its `with` block
lasts."""

import threading
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Self

__all__ = ["Served"]


class Served:
    """`server`, answering from a thread named `name` until the `with` block ends."""

    def __init__(self, server: ThreadingHTTPServer, name: str) -> None:
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, name=name)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.server.shutdown()
        self.thread.join()
        self.server.server_close()
