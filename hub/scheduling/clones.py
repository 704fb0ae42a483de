"""Where the scheduler meets git: the control plane and workload repositories read through the
loader's `Fetch`, and the platform GitOps branch it renders against and commits to.

Synchronous (GitPython), in a worker thread. Each repository is fetched once per run into a
cache folder apart from the harvester's clones, whose locks two fetches would contend for.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from hub.git.local import Credentials, GitFailure, LocalRepository, remote_urls
from hub.git.urls import (
    InvalidRepositoryUrl,
    discovery_refusal,
    has_credentials,
    normalise_repository_url,
    redact_url,
)
from scheduler_core.loader import Fetched, FetchError
from scheduler_core.output import owned
from scheduler_core.snapshot import RepoRef

# What the loader reads (it classifies YAML documents only); the rest of a workload's source
# repository, binaries included, is never read.
_YAML_SUFFIXES = (".yaml", ".yml")
PROMOTED_COMMIT_FILE = ".github/tracking/Promoted_Commit_Id"


class Clones:
    """The clones of one run, each fetched on first use, by normalised URL."""

    def __init__(self, cache_dir: Path, *, timeout: float, max_file_bytes: int) -> None:
        self._cache_dir = cache_dir
        self._timeout = timeout
        self.max_file_bytes = max_file_bytes
        self._clones: dict[str, LocalRepository] = {}

    def get(self, location: str) -> LocalRepository:
        """The clone of `location` (a URL or an absolute path), fetched now if not yet this run.
        GitFailure or InvalidRepositoryUrl when it cannot be."""
        url = normalise_repository_url(location)
        if url not in self._clones:
            self._clones[url] = LocalRepository.sync(
                location,
                self._cache_dir / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.git",
                Credentials(),
                display_url=redact_url(location),
                timeout=self._timeout,
            )
        return self._clones[url]

    def push(self, local: LocalRepository, location: str, commit: str, branch: str) -> None:
        local.push(
            location,
            commit,
            branch,
            Credentials(),
            display_url=redact_url(location),
            timeout=self._timeout,
        )

    def close(self) -> None:
        for clone in self._clones.values():
            clone.close()
        self._clones.clear()


class ControlPlaneFetch:
    """The loader's `Fetch`: YAML files of a branch (or of a pinned commit) of a repository.

    Other repositories than the control plane are named by its content, so they are held to
    the rules of repositories discovered in content (`discovery_refusal`): local ones only
    for a local control plane, and only where `allowed` (None: anywhere) says. A ref to the
    given control plane, in any spelling of its URL or of a remote of its clone, is read from
    what was given, so a clone's branches are what gets scheduled."""

    def __init__(self, clones: Clones, control_plane: str, allowed: list[str] | None) -> None:
        self._clones = clones
        self._control_plane = control_plane
        self._allowed = allowed
        spellings = [control_plane]
        if control_plane.startswith(("/", "file://")):
            spellings += remote_urls(Path(urlsplit(control_plane).path))
        self._aliases = set()
        for spelling in spellings:
            try:
                self._aliases.add(normalise_repository_url(spelling))
            except InvalidRepositoryUrl:
                continue

    def __call__(self, ref: RepoRef, /) -> Fetched:
        if has_credentials(ref.repo):
            raise FetchError(
                "a repository URL must not carry credentials (a user name or password)"
            )
        try:
            given = normalise_repository_url(ref.repo) in self._aliases
            refusal = (
                None if given else discovery_refusal(ref.repo, self._control_plane, self._allowed)
            )
            if refusal is not None:
                raise FetchError(refusal)
            local = self._clones.get(self._control_plane if given else ref.repo)
        except (GitFailure, InvalidRepositoryUrl) as exc:
            raise FetchError(str(exc)) from None
        if ref.commit is not None:
            commit = local.commit_of(ref.commit)
            missing = f"no commit {ref.commit} in the repository"
        else:
            commit = local.commit_of(f"refs/heads/{ref.branch}")
            missing = f"the repository has no branch {ref.branch!r}"
        if commit is None:
            raise FetchError(missing)
        try:
            files = local.read_files(
                commit,
                ref.folder,
                lambda path: path.endswith(_YAML_SUFFIXES),
                self._clones.max_file_bytes,
            )
        except GitFailure as exc:
            raise FetchError(str(exc)) from None
        return Fetched(files=files, commit=commit)


@dataclass(frozen=True, slots=True)
class PlatformBranch:
    """An environment branch of the platform repository: its head (None: no such branch yet),
    that commit's tree, and the files the scheduler reads there: those it manages
    (`scheduler_core.output.owned`) and the promoted commit."""

    head: str | None
    tree: str | None
    files: Mapping[str, bytes]

    @property
    def promoted_commit(self) -> str | None:
        content = self.files.get(PROMOTED_COMMIT_FILE)
        return None if content is None else content.decode(errors="replace").strip()


def read_branch(local: LocalRepository, branch: str, max_file_bytes: int) -> PlatformBranch:
    head = local.commit_of(f"refs/heads/{branch}")
    if head is None:
        return PlatformBranch(head=None, tree=None, files={})
    files = local.read_files(
        head, ".", lambda path: owned(path) or path == PROMOTED_COMMIT_FILE, max_file_bytes
    )
    return PlatformBranch(head=head, tree=local.tree_of(head), files=files)
