"""The demo's git server (hub/demo/gitserver.py), as a hub's git sees it: every repository
under its root fetched over git's smart HTTP protocol, the work trees' too; a push taken by
the writable ones alone."""

import subprocess
from pathlib import Path

import httpx

from hub.demo.gitserver import GitServer
from hub.demo.repos import WorkRepo


def git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_repositories_are_fetched_and_only_the_writable_take_a_push(tmp_path: Path) -> None:
    root = tmp_path / "served"
    control_plane = WorkRepo(root / "control-plane", "main")
    head = control_plane.commit("Environments", {"dev.yaml": "kind: Environment\n"})
    git("init", "--quiet", "--bare", "--initial-branch=dev", str(root / "platform-gitops"))

    with GitServer(root, "127.0.0.1", 0, writable={"platform-gitops"}) as server:
        served = f"http://127.0.0.1:{server.port}"
        fetched = git("clone", "--quiet", f"{served}/control-plane", str(tmp_path / "cp"))
        platform = tmp_path / "platform"
        git("clone", "--quiet", f"{served}/platform-gitops", str(platform))
        (platform / "dev.yaml").write_text("scheduled\n")
        git("add", ".", cwd=platform)
        git("-c", "user.name=s", "-c", "user.email=s@x", "commit", "-qm", "Scheduled", cwd=platform)
        pushed = git("push", "--quiet", "origin", "HEAD:dev", cwd=platform)
        refused = git("push", "--quiet", "origin", "HEAD:main", cwd=tmp_path / "cp")
        missing = git("ls-remote", f"{served}/nothing")
        # Through the writable one's name to another's: refused before git sees the path.
        aliased = httpx.post(
            f"{served}/platform-gitops/%2e%2e/control-plane/git-receive-pack", timeout=10
        )

    assert fetched.returncode == 0, fetched.stderr
    assert git("rev-parse", "HEAD", cwd=tmp_path / "cp").stdout.strip() == head
    assert pushed.returncode == 0, pushed.stderr
    assert git("log", "--format=%s", "dev", cwd=root / "platform-gitops").stdout == "Scheduled\n"
    assert refused.returncode != 0
    assert "403" in refused.stderr
    assert missing.returncode != 0
    assert aliased.status_code == 404
