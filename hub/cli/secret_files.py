"""Secrets read from files, never from a command line: API tokens (`--token-file`,
FLEETMARK_ADMIN_TOKEN_FILE) and what `dashboards push` gives Grafana.

A secret file holds the secret alone, on one line; whatever is wrong with it, its content is
never printed. A file the reading user owns that its group or others may read gets a warning.
A file another user owns (root, in a Kubernetes Secret volume or a compose secret) is that
user's to protect, as OpenSSH judges a private key.
"""

import os
import stat
from pathlib import Path

from rich.markup import escape

from hub.cli.output import errors, fail


def read_secret_file(path: Path, source: str) -> str:
    """The secret `path` holds, without surrounding white space. `source` names where the path
    came from (`--token-file`) in every failure and warning, with the file."""
    named = escape(f"{source} {path}")
    try:
        with path.open(encoding="utf-8") as file:
            status = os.fstat(file.fileno())
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise fail(f"{named}: cannot be read ({escape(reason)})") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise fail(f"{named}: is empty")
    if len(lines) > 1:
        raise fail(f"{named}: holds {len(lines)} lines; it must hold the secret alone, on one line")
    if status.st_uid == os.getuid() and status.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        errors.print(
            f"[bold yellow]warning:[/] {named}: its group or others may read it "
            f"(mode {stat.S_IMODE(status.st_mode):04o}); chmod 600 it",
            highlight=False,
            soft_wrap=True,
        )
    return lines[0]
