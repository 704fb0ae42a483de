"""Secrets kept in files: an API token (`token_file`, `--token-file`) and, on the hub, its
FLEETMARK_*_FILE settings. A secret file holds the secret alone, on one line; whatever is wrong
with it, the error names the file and never shows what it holds."""

import os
import stat
from pathlib import Path

__all__ = ["others_may_read", "read_secret_file"]


def read_secret_file(path: Path, setting: str) -> str:
    """The one line a secret file holds, without surrounding white space. Errors (ValueError)
    name the setting and the file, never what it holds: a file of several lines may be
    something else entirely (a key, a config file)."""
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    except UnicodeDecodeError:
        raise ValueError(f"{setting} {path}: is not UTF-8 text") from None
    except OSError as exc:
        raise ValueError(f"{setting} {path}: cannot be read ({exc.strerror or exc})") from None
    lines = [line for line in lines if line]
    if not lines:
        raise ValueError(f"{setting} {path}: is empty")
    if len(lines) > 1:
        raise ValueError(
            f"{setting} {path}: holds {len(lines)} lines; it must hold the secret alone, "
            "on one line"
        )
    return lines[0]


def others_may_read(path: Path) -> int | None:
    """The file's mode when the reading user owns it and its group or others may read it;
    None otherwise. A file another user owns (root, in a Kubernetes Secret volume) is that
    user's to protect, as OpenSSH judges a private key."""
    status = path.stat()
    if status.st_uid == os.getuid() and status.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        return stat.S_IMODE(status.st_mode)
    return None
