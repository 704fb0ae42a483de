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

from hub import settings
from hub.cli.output import errors, fail


def read_secret_file(path: Path, source: str) -> str:
    """The secret `path` holds (hub.settings.read_secret_file's rules). `source` names where
    the path came from (`--token-file`) in every failure and warning, with the file."""
    try:
        secret = settings.read_secret_file(path, source)
        status = path.stat()
    except (OSError, ValueError) as exc:
        raise fail(escape(str(exc))) from None
    if status.st_uid == os.getuid() and status.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        errors.print(
            f"[bold yellow]warning:[/] {escape(f'{source} {path}')}: its group or others may "
            f"read it (mode {stat.S_IMODE(status.st_mode):04o}); chmod 600 it",
            highlight=False,
            soft_wrap=True,
        )
    return secret
