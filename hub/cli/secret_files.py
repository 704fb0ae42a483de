"""Secrets read from files, never from a command line: API tokens (`--token-file`,
FLEETMARK_ADMIN_TOKEN_FILE) and what `dashboards push` gives Grafana.

The file's rules are hub.client.secret_files': the secret alone, on one line, its content never
printed. A file the reading user owns that its group or others may read gets a warning.
"""

from pathlib import Path

from rich.markup import escape

from hub.cli.output import errors, fail
from hub.client import secret_files


def read_secret_file(path: Path, source: str) -> str:
    """The secret `path` holds. `source` names where the path came from (`--token-file`) in
    every failure and warning, with the file."""
    try:
        secret = secret_files.read_secret_file(path, source)
        mode = secret_files.others_may_read(path)
    except (OSError, ValueError) as exc:
        raise fail(escape(str(exc))) from None
    if mode is not None:
        errors.print(
            f"[bold yellow]warning:[/] {escape(f'{source} {path}')}: its group or others may "
            f"read it (mode {mode:04o}); chmod 600 it",
            highlight=False,
            soft_wrap=True,
        )
    return secret
