"""The reference fleet's repositories as real git repositories, for the scheduler in the hub.

The control plane is a clone whose `origin` is the hosted URL its own files name (as a Kalypso
user's clone would be), written as `fleetmark demo` writes it (`main`, then `dev` and `stage`,
each with a BaseRepo pinning the `main` commit it is promoted to), but for the application's
source, a local repository. The
application's source repository holds the Workload; the platform GitOps repository starts
empty, bare, as a hosted one would be.
"""

import subprocess
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from hub.demo.story import write_control_plane
from tests.hub.harvest.gitrepo import WorkRepo
from tests.scheduler_core import scenario

Files = Mapping[str, str | None]


def _git(*args: str, cwd: Path | None = None) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


class ControlPlane:
    """The control-plane clone; commits go to the branch they name."""

    def __init__(self, path: Path, app_src_url: str) -> None:
        self.repo = WorkRepo(path, "main")
        self.repo.git("remote", "add", "origin", scenario.CONTROL_PLANE)
        self.app_src_url = app_src_url
        self.main = write_control_plane(self.repo, replace(scenario.URLS, app_src=app_src_url))

    @property
    def path(self) -> Path:
        return self.repo.path

    def commit(self, branch: str, files: Files, message: str = "Change") -> str:
        """Write (None: delete) files on `branch`; the application's URL points at the clone."""
        if self.repo.git("branch", "--show-current") != branch:
            self.repo.checkout(branch)
        return self.repo.commit(
            message,
            {
                name: None if text is None else text.replace(scenario.APP_SRC, self.app_src_url)
                for name, text in files.items()
            },
        )

    def promote(self, environment: str, main: str) -> str:
        """Pin `environment` to commit `main` of the `main` branch (its BaseRepo)."""
        return self.commit(environment, {"base-repo.yaml": scenario.base_repo(main)}, "Promote")


class Platform:
    """The platform GitOps repository, bare, and what its branches hold."""

    def __init__(self, path: Path) -> None:
        self.path = path
        _git("init", "--quiet", "--bare", "--initial-branch=dev", str(path))

    def git(self, *args: str) -> str:
        return _git(*args, cwd=self.path).strip()

    def branches(self) -> dict[str, str]:
        output = self.git(
            "for-each-ref", "--format=%(refname:lstrip=2) %(objectname)", "refs/heads"
        )
        return dict(line.split(" ", 1) for line in output.splitlines() if line)

    def head(self, branch: str) -> str | None:
        return self.branches().get(branch)

    def files(self, ref: str) -> dict[str, str]:
        names = self.git("ls-tree", "-r", "--name-only", ref).splitlines()
        return {name: _git("show", f"{ref}:{name}", cwd=self.path) for name in names}

    def changed(self, old: str, new: str) -> list[str]:
        return self.git("diff", "--name-only", old, new).splitlines()

    def commits(self, branch: str) -> list[str]:
        return self.git("rev-list", branch).splitlines()

    def push(self, work: Path, branch: str, files: Files, message: str = "Edit by hand") -> str:
        """A commit someone else pushes to `branch`, made in a clone at `work`."""
        _git("clone", "--quiet", "--branch", branch, str(self.path), str(work))
        for name, text in files.items():
            target = work / name
            if text is None:
                target.unlink()
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
        identity = ["-c", "user.name=Platform Engineer", "-c", "user.email=pe@contoso.example"]
        _git("add", "--all", cwd=work)
        _git(*identity, "commit", "--quiet", "-m", message, cwd=work)
        _git("push", "--quiet", "origin", f"HEAD:{branch}", cwd=work)
        return _git("rev-parse", "HEAD", cwd=work).strip()


def reference_fleet(root: Path) -> tuple[ControlPlane, Platform]:
    app_src = WorkRepo(root / "app-src", "main")
    app_src.commit("Workload", dict(scenario.APP_SRC_MAIN))
    return ControlPlane(root / "control-plane", app_src.url), Platform(root / "platform.git")
