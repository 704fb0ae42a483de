"""The one module that speaks git (through GitPython): fetch, walk history, read trees and blobs.

Everything here is synchronous; the harvest service calls it from a worker thread. Secrets
reach git only through its environment (an `http.<url>.extraHeader` set by GIT_CONFIG_* for
tokens, GIT_SSH_COMMAND for keys), never on a command line or in a URL, and every message
that leaves this module is scrubbed of them.
"""

import base64
import functools
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import git
from git.objects.fun import tree_entries_from_data

# Tree entry modes (git stores them as octal numbers).
MODE_DIRECTORY = 0o040000
MODE_SYMLINK = 0o120000
MODE_SUBMODULE = 0o160000
_FIELD, _RECORD = "\x1f", "\x1e"
_LOG_FORMAT = f"--format={_RECORD}%H{_FIELD}%T{_FIELD}%P{_FIELD}%an{_FIELD}%ae{_FIELD}%cI{_FIELD}%B"
_TREE_CACHE_SIZE = 8192


class GitFailure(Exception):
    """A git operation failed; the message is safe to store and show (no secrets)."""


class BlobTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


@dataclass(frozen=True, slots=True)
class Credentials:
    """Resolved credentials for one remote. `token` is a secret and never printed."""

    username: str = "x-access-token"
    token: str | None = field(default=None, repr=False)
    ssh_key_file: Path | None = None
    known_hosts_file: Path | None = None

    def secrets(self) -> list[str]:
        if self.token is None:
            return []
        return [self.token, _basic_auth(self.username, self.token)]


def _basic_auth(username: str, token: str) -> str:
    return base64.b64encode(f"{username}:{token}".encode()).decode()


@dataclass(frozen=True, slots=True)
class CommitInfo:
    sha: str
    tree: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    committed_at: datetime
    message: str


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    sha: str
    mode: int

    @property
    def is_directory(self) -> bool:
        return self.mode == MODE_DIRECTORY


def _environment(url: str, credentials: Credentials, cache_dir: Path) -> dict[str, str]:
    environment = {
        # Never wait for a person to type a password.
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
    }
    if credentials.token is not None:
        environment |= {
            "GIT_CONFIG_COUNT": "1",
            # Scoped to the repository URL: a redirect elsewhere does not get the token.
            "GIT_CONFIG_KEY_0": f"http.{url}.extraHeader",
            "GIT_CONFIG_VALUE_0": "Authorization: Basic "
            + _basic_auth(credentials.username, credentials.token),
        }
    known_hosts = credentials.known_hosts_file or cache_dir / "known_hosts"
    ssh = [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        # A pinned known_hosts file must match; otherwise a host is trusted on first use.
        "StrictHostKeyChecking=" + ("yes" if credentials.known_hosts_file else "accept-new"),
    ]
    if credentials.ssh_key_file is not None:
        ssh += ["-i", str(credentials.ssh_key_file), "-o", "IdentitiesOnly=yes"]
    environment["GIT_SSH_COMMAND"] = shlex.join(ssh)
    return environment


def _failure(action: str, exc: Exception, secrets: list[str]) -> GitFailure:
    if isinstance(exc, git.GitCommandError):
        stderr = exc.stderr.strip().removeprefix("stderr:").strip().strip("'").strip()
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        detail = "; ".join(lines[-3:]) or f"exit status {exc.status}"
    else:
        detail = str(exc) or type(exc).__name__
    message = f"{action} failed: {detail}"
    for secret in secrets:
        message = message.replace(secret, "***")
    return GitFailure(message)


def _follow_remote_head(
    repo: git.Repo, url: str, environment: dict[str, str], timeout: float
) -> None:
    output = str(
        repo.git.ls_remote("--symref", url, "HEAD", env=environment, kill_after_timeout=timeout)
    )
    for line in output.splitlines():
        if line.startswith("ref: ") and line.endswith("\tHEAD"):
            repo.git.symbolic_ref("HEAD", line.removeprefix("ref: ").split("\t")[0])
            return


class LocalRepository:
    """A bare clone in the hub's git cache, and what the harvest reads from it."""

    def __init__(self, path: Path) -> None:
        self._repo = git.Repo(path)
        self._odb = self._repo.odb
        self.entries: Callable[[str], dict[str, Entry]] = functools.lru_cache(
            maxsize=_TREE_CACHE_SIZE
        )(self._entries)

    @classmethod
    def sync(
        cls,
        url: str,
        path: Path,
        credentials: Credentials,
        *,
        display_url: str,
        timeout: float,
    ) -> "LocalRepository":
        """Clone (first time) or fetch every branch of `url` into `path`, pruning deleted ones.

        Force-pushed branches are fetched as they are now; the objects they left behind stay
        until git's own garbage collection.
        """
        environment = _environment(url, credentials, path.parent)
        secrets = credentials.secrets()
        try:
            if (path / "HEAD").exists():
                repo = git.Repo(path)
            else:
                path.mkdir(parents=True, exist_ok=True)
                repo = git.Repo.init(path, bare=True)
            with repo:
                repo.git.fetch(
                    "--prune",
                    "--no-tags",
                    url,
                    "+refs/heads/*:refs/heads/*",
                    env=environment,
                    kill_after_timeout=timeout,
                )
                if not repo.git.for_each_ref("--count=1", repo.git.symbolic_ref("HEAD")):
                    # A new clone: point HEAD at the remote's default branch, as git clone would.
                    _follow_remote_head(repo, url, environment, timeout)
        except (git.GitCommandError, git.InvalidGitRepositoryError, OSError) as exc:
            raise _failure(f"fetching {display_url}", exc, secrets) from None
        return cls(path)

    def close(self) -> None:
        self._repo.close()

    def _git(self, command: str, *arguments: str, **options: object) -> str:
        try:
            return str(getattr(self._repo.git, command)(*arguments, **options))
        except git.GitCommandError as exc:
            raise _failure(f"git {command.replace('_', '-')}", exc, []) from None

    def __enter__(self) -> "LocalRepository":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def branch_heads(self) -> dict[str, str]:
        output = self._git(
            "for_each_ref", "--format=%(refname:lstrip=2) %(objectname)", "refs/heads"
        )
        return dict(line.split(" ", 1) for line in output.splitlines() if line)

    def default_branch(self) -> str | None:
        try:
            reference = self._repo.git.symbolic_ref("--quiet", "HEAD")
        except git.GitCommandError:
            return None
        return str(reference).removeprefix("refs/heads/") or None

    def first_parent_chain(self, head: str, exclude: str | None = None) -> list[tuple[str, str]]:
        """(commit, first parent or "") along the first-parent chain, newest first, stopping
        at commits reachable from `exclude`."""
        arguments = ["--first-parent", "--parents", head]
        if exclude is not None:
            arguments.append(f"^{exclude}")
        output = self._git("rev_list", *arguments)
        chain = []
        for line in output.splitlines():
            shas = line.split()
            chain.append((shas[0], shas[1] if len(shas) > 1 else ""))
        return chain

    def commits(self, head: str, exclude: str | None = None) -> list[CommitInfo]:
        """Every commit reachable from `head` and not from `exclude`, parents first."""
        arguments = ["--topo-order", "--reverse", _LOG_FORMAT, head]
        if exclude is not None:
            arguments.append(f"^{exclude}")
        output = self._git("log", *arguments, strip_newline_in_stdout=False)
        commits = []
        for record in output.split(_RECORD)[1:]:
            sha, tree, parents, name, email, date, message = record.split(_FIELD, 6)
            commits.append(
                CommitInfo(
                    sha=sha,
                    tree=tree,
                    parents=tuple(parents.split()),
                    author_name=name,
                    author_email=email,
                    committed_at=datetime.fromisoformat(date),
                    message=message.rstrip("\n"),
                )
            )
        return commits

    def tree_of(self, commit: str) -> str:
        return self._git("rev_parse", f"{commit}^{{tree}}")

    def _entries(self, tree: str) -> dict[str, Entry]:
        stream = self._odb.stream(bytes.fromhex(tree))
        return {
            name: Entry(name=name, sha=binsha.hex(), mode=mode)
            for binsha, mode, name in tree_entries_from_data(stream.read())
        }

    def read_blob(self, blob: str, max_bytes: int) -> bytes:
        """The blob's content; BlobTooLarge when it is over `max_bytes` (nothing is read)."""
        binsha = bytes.fromhex(blob)
        size = self._odb.info(binsha).size
        if size > max_bytes:
            raise BlobTooLarge(size)
        data: bytes = self._odb.stream(binsha).read()
        return data
