"""Reading a branch's content chain commit by chain commit, re-reading only changed folders.

Git names a folder by the hash of its content, so a folder whose tree id is unchanged since the
previous chain commit is not read again: a backfill of thousands of commits costs a few tree
reads per commit plus the folders it changed. An unusable file becomes a Problem for its path.
"""

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from hub.git.local import MODE_DIRECTORY, MODE_SUBMODULE, MODE_SYMLINK, BlobTooLarge, Entry
from hub.git.local import LocalRepository as GitRepository
from hub.harvest.documents import ContentError
from hub.harvest.manifests import ManifestFile, ManifestState, summarise
from hub.harvest.platform import (
    CONFIG_FILE,
    NAMESPACE_FILE,
    PROMOTED_COMMIT_PATH,
    RECONCILER_FILE,
    AssignmentState,
    config_hash,
    parse_config,
    parse_namespace,
    parse_promoted_commit,
    parse_reconciler,
)

K = TypeVar("K")
V = TypeVar("V")
V_co = TypeVar("V_co", covariant=True)
S = TypeVar("S")
T = TypeVar("T")
AssignmentKey = tuple[str, str]  # (cluster type, deployment target)


@dataclass(frozen=True, slots=True)
class Problem:
    commit: str | None
    path: str | None
    message: str


class FolderReader(Protocol[K, V_co, S]):
    """What the walk needs from a repository layout: its folders and how to read one."""

    def snapshot(self, tree: str, commit: str, problems: list[Problem]) -> S: ...

    def diff(self, previous: S, current: S) -> tuple[dict[K, str], set[K]]:
        """(folders added or changed, with their tree ids; folders removed)."""
        ...

    def flatten(self, snapshot: S) -> dict[K, str]: ...

    def read(self, key: K, folder: str, commit: str, problems: list[Problem]) -> V_co: ...


@dataclass(slots=True)
class Observations(Generic[K, V]):
    # Per chain commit, oldest first: the folders whose content may have changed (None: removed).
    steps: list[tuple[str, dict[K, V | None]]]
    problems: list[Problem]


def observe(
    reader: FolderReader[K, V, S],
    commits: Sequence[tuple[str, str]],
    start_tree: str | None,
    stored: Collection[K],
    empty: S,
) -> Observations[K, V]:
    """Read `commits` ((sha, tree), oldest first) after the chain commit with `start_tree`.

    `stored` are the folders that have an open revision in the store: a folder without one
    is read at the first commit even if its tree did not change (it was never read, e.g. a
    path discovered since), and an open revision whose folder is gone is closed there.
    """
    previous = reader.snapshot(start_tree, "", []) if start_tree is not None else empty
    result: Observations[K, V] = Observations(steps=[], problems=[])
    for index, (sha, tree) in enumerate(commits):
        current = reader.snapshot(tree, sha, result.problems)
        changed, removed = reader.diff(previous, current)
        if index == 0:
            folders = reader.flatten(current)
            changed |= {key: folder for key, folder in folders.items() if key not in stored}
            removed |= {key for key in stored if key not in folders}
        observed: dict[K, V | None] = {key: None for key in removed}
        for key, folder in changed.items():
            observed[key] = reader.read(key, folder, sha, result.problems)
        result.steps.append((sha, observed))
        previous = current
    return result


class _Files:
    """Blob reading shared by the layouts: size limit, links and submodules as problems."""

    def __init__(self, repo: GitRepository, max_bytes: int) -> None:
        self.repo = repo
        self.max_bytes = max_bytes

    def blob(self, entry: Entry, path: str, commit: str, problems: list[Problem]) -> bytes | None:
        if entry.mode == MODE_SYMLINK:
            problems.append(Problem(commit, path, f"{path}: symbolic link, not followed"))
        elif entry.mode == MODE_SUBMODULE:
            problems.append(Problem(commit, path, f"{path}: submodule, not followed"))
        elif entry.mode == MODE_DIRECTORY:
            problems.append(Problem(commit, path, f"{path}: a folder, expected a file"))
        else:
            try:
                return self.repo.read_blob(entry.sha, self.max_bytes)
            except BlobTooLarge as exc:
                problems.append(
                    Problem(
                        commit,
                        path,
                        f"{path}: {exc.size} bytes, over the {self.max_bytes}-byte limit",
                    )
                )
        return None

    def parse(
        self,
        entries: dict[str, Entry],
        folder_path: str,
        name: str,
        parser: Callable[[bytes, str], T],
        commit: str,
        problems: list[Problem],
    ) -> T | None:
        path = f"{folder_path}/{name}" if folder_path else name
        entry = entries.get(name)
        if entry is None:
            problems.append(Problem(commit, path, f"{path}: missing"))
            return None
        data = self.blob(entry, path, commit, problems)
        if data is None:
            return None
        try:
            return parser(data, path)
        except ContentError as exc:
            problems.append(Problem(commit, exc.path, str(exc)))
            return None


PlatformSnapshot = dict[str, tuple[str, dict[str, str]]]


class PlatformReader:
    """`<clusterType>/<deploymentTarget>/` folders; dot-folders (.github) are not cluster types."""

    def __init__(self, repo: GitRepository, max_bytes: int) -> None:
        self._files = _Files(repo, max_bytes)
        self._repo = repo
        # The last listing read per cluster type: an unchanged cluster type is not read again.
        self._listed: PlatformSnapshot = {}

    def _targets(self, cluster_type: Entry, commit: str, problems: list[Problem]) -> dict[str, str]:
        tree, targets = self._listed.get(cluster_type.name, ("", {}))
        if tree == cluster_type.sha:
            return targets
        targets = {}
        for entry in self._repo.entries(cluster_type.sha).values():
            path = f"{cluster_type.name}/{entry.name}"
            if entry.is_directory:
                targets[entry.name] = entry.sha
            elif entry.mode == MODE_SYMLINK:
                problems.append(Problem(commit, path, f"{path}: symbolic link, not followed"))
        self._listed[cluster_type.name] = (cluster_type.sha, targets)
        return targets

    def snapshot(self, tree: str, commit: str, problems: list[Problem]) -> PlatformSnapshot:
        return {
            entry.name: (entry.sha, self._targets(entry, commit, problems))
            for entry in self._repo.entries(tree).values()
            if entry.is_directory and not entry.name.startswith(".")
        }

    def diff(
        self, previous: PlatformSnapshot, current: PlatformSnapshot
    ) -> tuple[dict[AssignmentKey, str], set[AssignmentKey]]:
        changed: dict[AssignmentKey, str] = {}
        removed: set[AssignmentKey] = set()
        for cluster_type, (tree, targets) in current.items():
            before_tree, before = previous.get(cluster_type, ("", {}))
            if tree == before_tree:
                continue
            for target, folder in targets.items():
                if before.get(target) != folder:
                    changed[(cluster_type, target)] = folder
            removed.update((cluster_type, target) for target in before if target not in targets)
        for cluster_type, (_, before) in previous.items():
            if cluster_type not in current:
                removed.update((cluster_type, target) for target in before)
        return changed, removed

    def flatten(self, snapshot: PlatformSnapshot) -> dict[AssignmentKey, str]:
        return {
            (cluster_type, target): folder
            for cluster_type, (_, targets) in snapshot.items()
            for target, folder in targets.items()
        }

    def read(
        self, key: AssignmentKey, folder: str, commit: str, problems: list[Problem]
    ) -> AssignmentState:
        folder_path = "/".join(key)
        entries = self._repo.entries(folder)

        def parse(name: str, parser: Callable[[bytes, str], T]) -> T | None:
            return self._files.parse(entries, folder_path, name, parser, commit, problems)

        namespace = parse(NAMESPACE_FILE, parse_namespace)
        config = parse(CONFIG_FILE, parse_config)
        reconciler = parse(RECONCILER_FILE, parse_reconciler)
        sources = reconciler.sources if reconciler is not None else ()
        return AssignmentState(
            namespace=None if namespace is None else namespace.name,
            workload=None if namespace is None else namespace.workload,
            config=config or {},
            config_hash=None if config is None else config_hash(config),
            reconciler_kind=None if reconciler is None else reconciler.kind,
            app=sources[0] if sources else None,
            sources=sources,
        )

    def promoted_commit(self, tree: str, commit: str, problems: list[Problem]) -> str | None:
        """The control-plane commit in `.github/tracking/Promoted_Commit_Id`, if any."""
        entries = self._repo.entries(tree)
        *folders, name = PROMOTED_COMMIT_PATH
        for folder in folders:
            entry = entries.get(folder)
            if entry is None or not entry.is_directory:
                return None
            entries = self._repo.entries(entry.sha)
        if name not in entries:
            return None
        return self._files.parse(
            entries, "/".join(folders), name, parse_promoted_commit, commit, problems
        )


class ManifestReader:
    """Deployment-target folders of an application repo: every top-level folder, plus the
    deeper paths reconcilers point at."""

    def __init__(self, repo: GitRepository, max_bytes: int, paths: Collection[str] = ()) -> None:
        self._files = _Files(repo, max_bytes)
        self._repo = repo
        self._paths = sorted(set(paths))

    def _resolve(self, tree: str, path: str) -> str | None:
        for part in path.split("/") if path else ():
            entry = self._repo.entries(tree).get(part)
            if entry is None or not entry.is_directory:
                return None
            tree = entry.sha
        return tree

    def snapshot(self, tree: str, commit: str, problems: list[Problem]) -> dict[str, str]:
        folders = {
            entry.name: entry.sha
            for entry in self._repo.entries(tree).values()
            if entry.is_directory and not entry.name.startswith(".")
        }
        for path in self._paths:
            folder = self._resolve(tree, path)
            if folder is not None:
                folders[path] = folder
        return folders

    def diff(
        self, previous: dict[str, str], current: dict[str, str]
    ) -> tuple[dict[str, str], set[str]]:
        changed = {path: tree for path, tree in current.items() if previous.get(path) != tree}
        return changed, {path for path in previous if path not in current}

    def flatten(self, snapshot: dict[str, str]) -> dict[str, str]:
        return snapshot

    def _files_under(
        self, tree: str, path: str, commit: str, problems: list[Problem]
    ) -> list[ManifestFile]:
        files = []
        for entry in self._repo.entries(tree).values():
            entry_path = f"{path}/{entry.name}" if path else entry.name
            if entry.is_directory:
                files.extend(self._files_under(entry.sha, entry_path, commit, problems))
                continue
            data = self._files.blob(entry, entry_path, commit, problems)
            if data is not None or entry.mode not in {MODE_SYMLINK, MODE_SUBMODULE}:
                files.append(ManifestFile(path=entry_path, blob=entry.sha, data=data))
        return files

    def read(self, key: str, folder: str, commit: str, problems: list[Problem]) -> ManifestState:
        state, errors = summarise(self._files_under(folder, key, commit, problems), key)
        problems.extend(Problem(commit, error.path, str(error)) for error in errors)
        return state
