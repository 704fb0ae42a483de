"""Real git repositories for the harvester's tests, driven with the git command line."""

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

# Deterministic commit times: each commit one minute after the previous one.
EPOCH = 1_795_000_000


class WorkRepo:
    """A repository the harvester fetches from (its file:// URL) and the test writes to."""

    def __init__(self, path: Path, branch: str = "dev") -> None:
        self.path = path
        self.ticks = 0
        path.mkdir(parents=True)
        self.git("init", "--quiet", f"--initial-branch={branch}")
        self.git("config", "user.name", "Platform Bot")
        self.git("config", "user.email", "bot@contoso.example")

    @property
    def url(self) -> str:
        return self.path.as_uri()

    def git(self, *args: str) -> str:
        self.ticks += 1
        stamp = f"{EPOCH + 60 * self.ticks} +0000"
        environment = os.environ | {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        result = subprocess.run(
            ["git", *args], cwd=self.path, env=environment, capture_output=True, text=True
        )
        assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
        return result.stdout.strip()

    def write(self, files: Mapping[str, str | bytes | None]) -> None:
        """Write (str or bytes) or delete (None) files; paths are relative to the work tree."""
        for name, content in files.items():
            target = self.path / name
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)

    def commit(self, message: str, files: Mapping[str, str | bytes | None] | None = None) -> str:
        self.write(files or {})
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def head(self, ref: str = "HEAD") -> str:
        return self.git("rev-parse", ref)

    def checkout(self, branch: str, *, new: bool = False, start: str | None = None) -> None:
        if new:
            self.git("checkout", "--quiet", "-b", branch, *([start] if start else []))
        else:
            self.git("checkout", "--quiet", branch)

    def merge(self, branch: str, message: str) -> str:
        self.git("merge", "--quiet", "--no-ff", "-m", message, branch)
        return self.head()

    def reset(self, ref: str) -> None:
        """Move the current branch (a force-push, as the harvester sees it)."""
        self.git("reset", "--quiet", "--hard", ref)

    def symlink(self, name: str, target: str) -> None:
        link = self.path / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
