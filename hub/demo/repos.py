"""Real git repositories written the way people and Kalypso's scheduler write them: a work tree,
commits on named branches, driven with the git command line (the harvester reads them later
through its own clone, as it reads any remote)."""

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["Files", "GitCommandError", "WorkRepo"]

# Write (str or bytes) or delete (None) a file, by path relative to the work tree.
Files = Mapping[str, str | bytes | None]

AUTHOR = ("Platform Bot", "bot@contoso.example")


class GitCommandError(RuntimeError):
    """A git command failed; the message names it and says what git said."""


class WorkRepo:
    """A repository with a work tree; commits go to the branch checked out."""

    def __init__(self, path: Path, branch: str = "dev") -> None:
        self.path = path
        path.mkdir(parents=True)
        self.git("init", "--quiet", f"--initial-branch={branch}")
        self.git("config", "user.name", AUTHOR[0])
        self.git("config", "user.email", AUTHOR[1])

    @property
    def url(self) -> str:
        return self.path.as_uri()

    def environment(self) -> Mapping[str, str]:
        """The environment each git command runs in."""
        return os.environ

    def git(self, *args: str) -> str:
        result = subprocess.run(  # noqa: S603 - git on a repository of our own
            ["git", *args],  # noqa: S607 - whichever git the user has
            cwd=self.path,
            env=dict(self.environment()),
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise GitCommandError(f"git {' '.join(args)} in {self.path}: {result.stderr.strip()}")
        return result.stdout.strip()

    def write(self, files: Files) -> None:
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

    def commit(self, message: str, files: Files | None = None) -> str:
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

    def orphan(self, branch: str) -> None:
        """Check out a new branch with no history and an empty work tree."""
        self.git("checkout", "--quiet", "--orphan", branch)
        self.git("rm", "-r", "--quiet", "--force", "--ignore-unmatch", ".")

    def commit_on(self, branch: str, message: str, files: Files) -> str:
        """A commit on `branch`, whichever branch was checked out; that one is again after."""
        current = self.git("branch", "--show-current")
        if current != branch:
            self.checkout(branch)
        try:
            return self.commit(message, files)
        finally:
            if current != branch:
                self.checkout(current)
