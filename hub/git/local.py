"""The one module that speaks git (through GitPython): fetch, walk history, read trees and blobs,
and for the scheduler: read a commit's files, write a commit from file changes, push it.

Synchronous; called from a worker thread. Secrets reach git only through its environment and
are scrubbed from every message; URLs pass `check_clone_url`, and `--end-of-options` leads.
"""

import base64
import functools
import os
import shlex
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

import git
from git.objects.fun import tree_entries_from_data

from hub.git.urls import InvalidRepositoryUrl, check_clone_url, redact_text

# Tree entry modes (git stores them as octal numbers).
MODE_DIRECTORY = 0o040000
MODE_FILE = 0o100644
_MODE_TYPE = 0o170000
_MODE_REGULAR = 0o100000
MODE_SYMLINK = 0o120000
MODE_SUBMODULE = 0o160000
_FIELD, _RECORD = "\x1f", "\x1e"
_LOG_FORMAT = f"--format={_RECORD}%H{_FIELD}%T{_FIELD}%P{_FIELD}%an{_FIELD}%ae{_FIELD}%cI{_FIELD}%B"
_TREE_CACHE_SIZE = 8192
# Where `write_commit` has git fast-import build a commit before anything points at it.
_SCRATCH_REF = "refs/fleetmark/scheduled"
# The transports of check_clone_url's grammar; a stricter GIT_ALLOW_PROTOCOL of the hub's own
# environment (`file` alone, in tests and fuzzing) is kept.
_ALLOWED_PROTOCOLS = "https:http:ssh:file"


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
class Signature:
    """Who a commit is by, and when."""

    name: str
    email: str
    when: datetime

    def raw(self) -> str:
        """As git fast-import reads it (`--date-format=raw`)."""
        offset = self.when.utcoffset() or timedelta(0)
        minutes = int(offset.total_seconds()) // 60
        sign = "-" if minutes < 0 else "+"
        zone = f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
        return f"{self.name} <{self.email}> {int(self.when.timestamp())} {zone}"


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
        "GIT_ALLOW_PROTOCOL": os.environ.get("GIT_ALLOW_PROTOCOL", _ALLOWED_PROTOCOLS),
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
        # git's advice ("hint: ...") says what a person at a terminal could do; the error
        # lines before it say what went wrong.
        lines = [
            line.strip()
            for line in stderr.splitlines()
            if line.strip() and not line.startswith("hint:")
        ]
        # From git's first fatal error when there is one (what follows is its generic
        # advice), else its last words.
        fatal = next((i for i, line in enumerate(lines) if line.startswith("fatal:")), None)
        shown = lines[-3:] if fatal is None else lines[fatal : fatal + 3]
        detail = "; ".join(shown) or f"exit status {exc.status}"
    else:
        detail = str(exc) or type(exc).__name__
    # git's messages name the URL as given, user name and all.
    message = redact_text(f"{action} failed: {detail}")
    for secret in secrets:
        message = message.replace(secret, "***")
    return GitFailure(message)


def remote_urls(path: Path) -> list[str]:
    """The URLs of the remotes of the repository at `path` (a working copy or a bare one);
    none when `path` is not a repository."""
    try:
        with git.Repo(path) as repo:
            return [url for remote in repo.remotes for url in remote.urls]
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitCommandError):
        return []


def _quoted(path: str) -> str:
    """A path as git fast-import reads it: C-style quoted, so any name is safe."""
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _follow_remote_head(
    repo: git.Repo, url: str, environment: dict[str, str], timeout: float
) -> None:
    output = str(
        repo.git.ls_remote(
            "--symref", "--end-of-options", url, "HEAD", env=environment, kill_after_timeout=timeout
        )
    )
    for line in output.splitlines():
        if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
            repo.git.symbolic_ref("HEAD", line.removeprefix("ref: ").split("\t")[0])
            return


def _make_private(folder: Path) -> None:
    """Create `folder` and each missing parent 0700: the clones hold what private repositories
    hold, and the hub's user alone reads them."""
    missing = [path for path in (folder, *folder.parents) if not path.exists()]
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)


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
        secrets = credentials.secrets()
        try:
            check_clone_url(url)
            environment = _environment(url, credentials, path.parent)
            if (path / "HEAD").exists():
                repo = git.Repo(path)
            else:
                _make_private(path)
                repo = git.Repo.init(path, bare=True)
            with repo:
                repo.git.fetch(
                    "--prune",
                    "--no-tags",
                    "--end-of-options",
                    url,
                    "+refs/heads/*:refs/heads/*",
                    env=environment,
                    kill_after_timeout=timeout,
                )
                if not repo.git.for_each_ref("--count=1", repo.git.symbolic_ref("HEAD")):
                    # A new clone: point HEAD at the remote's default branch, as git clone would.
                    _follow_remote_head(repo, url, environment, timeout)
        except (
            git.GitCommandError,
            git.InvalidGitRepositoryError,
            OSError,
            InvalidRepositoryUrl,
        ) as exc:
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
        arguments = ["--first-parent", "--parents", "--end-of-options", head]
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
        arguments = ["--topo-order", "--reverse", _LOG_FORMAT, "--end-of-options", head]
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
        return self._git("rev_parse", "--verify", "--end-of-options", f"{commit}^{{tree}}")

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

    def commit_of(self, revision: str) -> str | None:
        """The commit `revision` (a full ref name or a commit id) names, or None."""
        try:
            return str(
                self._repo.git.rev_parse(
                    "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"
                )
            )
        except git.GitCommandError:
            return None

    def read_files(
        self, commit: str, folder: str, wanted: Callable[[str], bool], max_bytes: int
    ) -> dict[str, bytes]:
        """The regular files under `folder` (or the one file it names; "." for all) at `commit`
        that `wanted` accepts, by path from the repository root. Symlinks and submodules are
        not read; a file larger than `max_bytes` is a GitFailure naming it."""
        tree, prefix = self.tree_of(commit), ""
        if folder != ".":
            for part in folder.split("/"):
                entry = self.entries(tree).get(part)
                if entry is None:
                    return {}
                if not entry.is_directory:
                    path = prefix + part
                    return {path: self._file(entry, path, max_bytes)} if wanted(path) else {}
                tree, prefix = entry.sha, f"{prefix}{part}/"
        return {
            path: self._file(entry, path, max_bytes)
            for path, entry in self._walk(tree, prefix)
            if wanted(path)
        }

    def _walk(self, tree: str, prefix: str) -> Iterator[tuple[str, Entry]]:
        for name, entry in self.entries(tree).items():
            if entry.is_directory:
                yield from self._walk(entry.sha, f"{prefix}{name}/")
            elif entry.mode & _MODE_TYPE == _MODE_REGULAR:
                yield prefix + name, entry

    def _file(self, entry: Entry, path: str, max_bytes: int) -> bytes:
        try:
            return self.read_blob(entry.sha, max_bytes)
        except BlobTooLarge as exc:
            raise GitFailure(
                f"{path} is {exc.size} bytes, larger than the {max_bytes} bytes read from git"
            ) from None

    def write_commit(
        self,
        parent: str | None,
        write: Mapping[str, bytes],
        delete: Iterable[str],
        *,
        message: str,
        author: Signature,
    ) -> str:
        """A new commit: the tree of `parent` (none: an empty one) with the files of `write`
        written and those of `delete` removed; everything else, file modes included, stays as
        it was. No branch moves: `push` publishes the commit."""
        with tempfile.TemporaryFile() as stream:
            self._fast_import_commands(stream, parent, write, delete, message, author)
            stream.seek(0)
            self._git("fast_import", "--quiet", "--date-format=raw", istream=stream)
        commit = self._git("rev_parse", _SCRATCH_REF)
        self._git("update_ref", "-d", _SCRATCH_REF)
        return commit

    @staticmethod
    def _fast_import_commands(
        stream: IO[bytes],
        parent: str | None,
        write: Mapping[str, bytes],
        delete: Iterable[str],
        message: str,
        author: Signature,
    ) -> None:
        encoded = message.encode()
        # `reset` first: the scratch ref left by an earlier run must not become a parent.
        header = (
            f"reset {_SCRATCH_REF}\ncommit {_SCRATCH_REF}\n"
            f"author {author.raw()}\ncommitter {author.raw()}\ndata {len(encoded)}\n"
        )
        stream.write(header.encode() + encoded + b"\n")
        if parent is not None:
            stream.write(f"from {parent}\n".encode())
        for path in delete:
            stream.write(f"D {_quoted(path)}\n".encode())
        for path, content in write.items():
            stream.write(f"M {MODE_FILE:o} inline {_quoted(path)}\ndata {len(content)}\n".encode())
            stream.write(content + b"\n")
        stream.write(b"\n")

    def push(
        self,
        url: str,
        commit: str,
        branch: str,
        credentials: Credentials,
        *,
        display_url: str,
        timeout: float,
    ) -> None:
        """Make `commit` the head of `branch` at `url`, and here. Never forced: a branch that
        moved since it was fetched refuses a commit that does not descend from its head."""
        try:
            check_clone_url(url)
            environment = _environment(url, credentials, Path(self._repo.git_dir).parent)
            self._repo.git.push(
                "--end-of-options",
                url,
                f"{commit}:refs/heads/{branch}",
                env=environment,
                kill_after_timeout=timeout,
            )
        except (git.GitCommandError, InvalidRepositoryUrl) as exc:
            raise _failure(
                f"pushing to {branch} of {display_url}", exc, credentials.secrets()
            ) from None
        self._git("update_ref", f"refs/heads/{branch}", commit)
