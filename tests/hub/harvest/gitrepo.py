"""Real git repositories for the harvester's tests, driven with the git command line."""

import base64
import os
import shutil
import subprocess
import threading
from collections.abc import Mapping
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from hub.demo import repos

# Deterministic commit times: each git command one minute after the previous one.
EPOCH = 1_795_000_000


class WorkRepo(repos.WorkRepo):
    """A repository the harvester fetches from (its file:// URL) and the test writes to, at
    made-up times; and what tests do to one beyond writing commits."""

    def __init__(self, path: Path, branch: str = "dev") -> None:
        self.ticks = 0
        super().__init__(path, branch)

    def environment(self) -> Mapping[str, str]:
        self.ticks += 1
        stamp = f"{EPOCH + 60 * self.ticks} +0000"
        return os.environ | {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}

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


class Pristine:
    """Repositories under one folder, built once and put back as built for each test that uses
    them: at the same path (a URL one repository's files give for another still leads to it),
    each next commit at the time it would have had."""

    def __init__(self, root: Path, *repos: WorkRepo) -> None:
        self.root = root
        self.repos = repos
        self.ticks = [repo.ticks for repo in repos]
        self.kept = root.with_name(f"{root.name}-pristine")
        shutil.copytree(root, self.kept, symlinks=True)

    def restore(self) -> None:
        shutil.rmtree(self.root)
        shutil.copytree(self.kept, self.root, symlinks=True)
        for repo, ticks in zip(self.repos, self.ticks, strict=True):
            repo.ticks = ticks


class GitServer:
    """Serves bare copies of repositories over git's plain HTTP protocol on loopback, behind
    Basic authentication: a remote, as the hub sees one."""

    def __init__(self, root: Path, token: str) -> None:
        expected = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
        self.root = root
        self.requests: list[str | None] = []
        requests = self.requests

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                requests.append(self.headers.get("Authorization"))
                if self.headers.get("Authorization") != expected:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.end_headers()
                    return
                super().do_GET()

            def log_message(self, format: str, *args: object) -> None:
                pass

        root.mkdir(parents=True, exist_ok=True)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/{name}"

    def publish(self, repo: WorkRepo) -> str:
        """Serve the repository as it is now (again, after new commits); its URL."""
        name = f"{repo.path.name}.git"
        bare = self.root / name
        if bare.exists():
            subprocess.run(
                ["git", "fetch", "--quiet", str(repo.path), "+refs/heads/*:refs/heads/*"],
                cwd=bare,
                check=True,
            )
        else:
            subprocess.run(
                ["git", "clone", "--quiet", "--bare", str(repo.path), str(bare)], check=True
            )
        subprocess.run(["git", "update-server-info"], cwd=bare, check=True)
        return self.url(name)
