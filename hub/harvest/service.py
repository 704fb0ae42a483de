"""Harvesting GitOps repositories into the store, and the repositories' configuration and status.

Per branch, the new first-parent chain is written in chunks, each its own unit of work and never
redone, so an interrupted backfill continues where it stopped. Git runs in a worker thread.
Platform repositories go first: their manifests name the application repositories to harvest.
"""

import asyncio
import hashlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from hub.errors import (
    AlreadyExists,
    InvalidInput,
    ManagedByFile,
    UnknownRepository,
)
from hub.events.service import Event, event_source, page_url, publish
from hub.git.ancestry import generations, place_members
from hub.git.local import CommitInfo, Credentials, GitFailure, LocalRepository
from hub.git.urls import (
    LOCAL_REFUSED,
    discovery_refusal,
    is_local_url,
    normalise_repository_url,
    redact_url,
    spelled_repository,
)
from hub.harvest import repository
from hub.harvest.config import load_repositories_file
from hub.harvest.content import ManifestReader, Observations, PlatformReader, observe
from hub.harvest.manifests import ManifestState
from hub.harvest.platform import AppSource, AssignmentState
from hub.harvest.ranges import NewRevision, OpenRevision, track
from hub.harvest.repository import AssignmentKey, ErrorRecord, StoredAssignment, StoredManifest
from hub.harvest.schemas import (
    BranchOutcome,
    BranchStatus,
    CredentialsReference,
    HarvestErrorOut,
    HarvestEventData,
    HarvestReport,
    RepositoriesFile,
    RepositoryConfig,
    RepositoryOutcome,
    RepositoryStatus,
)
from hub.models import AssignmentRevision, ManifestRevision, Repository
from hub.placement import repository as placement_repository
from hub.placement.repository import ensure_environment
from hub.placement.service import known
from hub.settings import HubSettings
from hub.types import Clock, Units

log = structlog.get_logger("fleetmark.harvest")

# Chain commits per unit of work: large enough to batch well, small enough to show progress.
CHUNK = 500
# What a discovered reconciler source without a branch tracks: the default branch.
DEFAULT_BRANCH = "HEAD"
# Variables the admin API may name as token sources (the hub's own settings are not among them).
API_TOKEN_VARIABLE_PREFIX = "FLEETMARK_GIT_"  # noqa: S105 - a name prefix, not a secret
RECENT_ERRORS = 10
# The page (docs/pages.md) that shows each repository's fetch: a harvest event's evidence.
REPOSITORIES_PAGE = "/repositories"


class Progress(Protocol):
    """Told about long work, e.g. by the CLI's progress bar."""

    def branch(self, repository: str, branch: str, commits: int) -> None: ...

    def advance(self, commits: int) -> None: ...


class _Silent:
    def branch(self, repository: str, branch: str, commits: int) -> None:
        pass

    def advance(self, commits: int) -> None:
        pass


class CredentialsUnavailable(Exception):
    """The referenced secret cannot be read; the message names the reference, not the secret."""


@dataclass(frozen=True, slots=True)
class _Run:
    units: Units
    cache_dir: Path
    max_file_bytes: int
    git_timeout: float
    clock: Clock
    progress: Progress
    backfill: bool
    allow_local: bool
    credentials_dir: Path | None
    # Where repositories named by reconciler manifests may be (None: anywhere).
    discovery_allowed: list[str] | None
    # The hub's URL, the source of the events a repository's fetch failing or recovering sends.
    source: str


# --- configuration ----------------------------------------------------------------------------


def _configured_row(config: RepositoryConfig, source: str) -> dict[str, Any]:
    return {
        "url": config.normalised_url,
        "clone_url": config.url,
        "role": config.role,
        "source": source,
        "branches": config.branches,
        "credentials": None
        if config.credentials is None
        else config.credentials.model_dump(mode="json", exclude_none=True),
        "enabled": True,
    }


async def sync_repositories_file(session: AsyncSession, configured: RepositoriesFile) -> None:
    """The file is the truth for its repositories (added, changed, or no longer harvested)
    and, when it declares one, for the promotion order of the environments."""
    if configured.environments is not None:
        await placement_repository.order_environments(session, configured.environments)
    await repository.upsert_configured(
        session, [_configured_row(item, "file") for item in configured.repositories]
    )
    await repository.disable_file_repositories(
        session, [item.normalised_url for item in configured.repositories]
    )


def _check_api_credentials(
    reference: CredentialsReference, allowed_dir: Path | None
) -> dict[Path, Path]:
    """An admin token must not turn the hub's own secrets into git credentials for a URL of
    its choosing: variables need the FLEETMARK_GIT_ prefix, files must lie in
    FLEETMARK_GIT_CREDENTIALS_DIR. Each file named, with where it resolves to now."""
    if reference.token_env is not None and not reference.token_env.startswith(
        API_TOKEN_VARIABLE_PREFIX
    ):
        raise InvalidInput(
            f"credentials.token_env: through the API only variables named "
            f"{API_TOKEN_VARIABLE_PREFIX}* may be referenced"
        )
    resolved = {}
    for path in reference.files():
        if allowed_dir is None:
            raise InvalidInput(
                "credentials: files can be referenced through the API only when "
                "FLEETMARK_GIT_CREDENTIALS_DIR is set; use token_env or the repositories file"
            )
        resolved[path] = path.resolve()
        if not resolved[path].is_relative_to(allowed_dir.resolve()):
            raise InvalidInput(f"credentials: {path} is outside FLEETMARK_GIT_CREDENTIALS_DIR")
    return resolved


async def add_repository(
    session: AsyncSession,
    config: RepositoryConfig,
    *,
    credentials_dir: Path | None,
    allow_local: bool,
    now: datetime,
) -> RepositoryStatus:
    if not allow_local and is_local_url(config.url):
        raise InvalidInput(f"url: {LOCAL_REFUSED.format(url=config.url)}")
    if config.credentials is not None:
        _check_api_credentials(config.credentials, credentials_dir)
    existing = await repository.find_repository(session, config.normalised_url)
    if existing is not None and existing.source == "file":
        raise ManagedByFile(
            f"{existing.url} is configured in the repositories file; change it there"
        )
    if existing is not None and existing.source == "api" and existing.enabled:
        raise AlreadyExists(f"{existing.url} is already configured; remove it first to change it")
    await repository.upsert_configured(session, [_configured_row(config, "api")])
    added = await repository.find_repository(session, config.normalised_url)
    assert added is not None
    return next(item for item in await list_repositories(session, now=now) if item.id == added.id)


async def remove_repository(session: AsyncSession, repository_id: int) -> None:
    """Stop harvesting a repository added through the API; what was harvested stays."""
    existing = await repository.get_repository(session, repository_id)
    if existing is None:
        listed = known(
            [
                f"{item.id} {item.url}"
                for item in await repository.list_repositories(session)
                if item.enabled
            ]
        )
        raise UnknownRepository(f"repository {repository_id} is unknown ({listed})")
    if existing.source == "file":
        raise ManagedByFile(
            f"{existing.url} is configured in the repositories file; remove it there"
        )
    await repository.disable_repository(session, repository_id)


async def list_repositories(session: AsyncSession, *, now: datetime) -> list[RepositoryStatus]:
    branches: dict[int, list[BranchStatus]] = {}
    for row in await repository.branch_statuses(session):
        branches.setdefault(row.repository_id, []).append(
            BranchStatus(
                name=row.name,
                environment=row.environment,
                head_sha=row.head_sha,
                head_committed_at=row.head_committed_at,
                harvested_at=row.harvested_at,
                lag_seconds=None
                if row.harvested_at is None
                else max(0.0, (now - row.harvested_at).total_seconds()),
                commits=row.commits,
                deleted_at=row.deleted_at,
            )
        )
    errors: dict[int, list[HarvestErrorOut]] = {}
    totals: dict[int, int] = {}
    for row in await repository.recent_errors(session, RECENT_ERRORS):
        totals[row.repository_id] = row.total
        errors.setdefault(row.repository_id, []).append(
            HarvestErrorOut.model_validate(row, from_attributes=True)
        )
    return [
        RepositoryStatus.model_validate(
            {
                "id": item.id,
                "url": item.url,
                "clone_url": item.clone_url,
                "role": item.role,
                "source": item.source,
                "enabled": item.enabled,
                "configured_branches": item.branches,
                "credentials": _credentials_kind(item.credentials),
                "fetched_at": item.fetched_at,
                "fetch_error": item.fetch_error,
                "branches": branches.get(item.id, []),
                "error_count": totals.get(item.id, 0),
                "recent_errors": errors.get(item.id, []),
            }
        )
        for item in await repository.list_repositories(session)
    ]


def _credentials_kind(reference: dict[str, Any] | None) -> str | None:
    kinds = ("token_file", "token_env", "ssh_key_file")
    return next((kind for kind in kinds if reference and kind in reference), None)


# --- running a harvest ------------------------------------------------------------------------


async def harvest_repositories(
    units: Units,
    settings: HubSettings,
    *,
    clock: Clock,
    only: str | None = None,
    backfill: bool = False,
    progress: Progress | None = None,
) -> HarvestReport:
    """Harvest every enabled repository (or `only` the one with that URL), each step in a unit
    of work of its own (a chunk of commits, a branch's head): what a harvest cut short did
    stays. The caller holds the harvest lock. `backfill` re-reads every branch from its root
    commit."""
    started = time.perf_counter()
    if settings.repositories_file is not None:
        configured = load_repositories_file(settings.repositories_file)
        async with units() as session:
            await sync_repositories_file(session, configured)
    run = _Run(
        units=units,
        cache_dir=settings.effective_git_cache_dir,
        max_file_bytes=settings.harvest_max_file_bytes,
        git_timeout=settings.git_timeout,
        clock=clock,
        progress=progress or _Silent(),
        backfill=backfill,
        allow_local=settings.local_repositories_allowed,
        credentials_dir=settings.git_credentials_dir,
        discovery_allowed=settings.discovery_allowed_urls,
        source=event_source(settings),
    )
    wanted = None if only is None else normalise_repository_url(only)
    outcomes: list[RepositoryOutcome] = []
    # Application repositories are listed after the platform ones ran: those discover them.
    for role in ("platform", "app"):
        async with units() as session:
            every = await repository.list_repositories(session)
        clone_urls = {item.id: item.clone_url for item in every}
        for item in every:
            if item.enabled and item.role == role and (wanted is None or item.url == wanted):
                outcomes.append(await _harvest_repository(run, item, clone_urls))
    if wanted is not None and not outcomes:
        listed = known([item.url for item in every if item.enabled])
        raise UnknownRepository(f"repository {wanted} is unknown ({listed})")
    return HarvestReport(repositories=outcomes, seconds=time.perf_counter() - started)


def _resolve_credentials(item: Repository, credentials_dir: Path | None) -> Credentials:
    """The secrets `item` references, read now. A reference the admin API made is checked
    again as it is used (a file it was allowed to name may since have become a link to
    elsewhere); the files are read where they resolve to, never through a link swapped in."""
    if not item.credentials:
        return Credentials()
    parsed = CredentialsReference.model_validate(item.credentials)
    files = {path: path.resolve() for path in parsed.files()}
    if item.source == "api":
        try:
            files = _check_api_credentials(parsed, credentials_dir)
        except InvalidInput as exc:
            raise CredentialsUnavailable(exc.detail) from None
    token = None
    if parsed.token_file is not None:
        token = _read_token(parsed.token_file, files[parsed.token_file])
    if parsed.token_env is not None:
        token = os.environ.get(parsed.token_env, "").strip()
        if not token:
            raise CredentialsUnavailable(f"credentials: variable {parsed.token_env} is not set")
    if parsed.ssh_key_file is not None and not files[parsed.ssh_key_file].is_file():
        raise CredentialsUnavailable(
            f"credentials: ssh_key_file {parsed.ssh_key_file} does not exist"
        )
    return Credentials(
        username=parsed.username,
        token=token,
        ssh_key_file=None if parsed.ssh_key_file is None else files[parsed.ssh_key_file],
        known_hosts_file=None
        if parsed.known_hosts_file is None
        else files[parsed.known_hosts_file],
    )


def _read_token(named: Path, resolved: Path) -> str:
    try:
        # O_NOFOLLOW: the file the checks resolved, not a link put in its place since.
        descriptor = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with open(descriptor, encoding="utf-8") as stream:
            token = stream.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialsUnavailable(
            f"credentials: cannot read token_file {named} ({type(exc).__name__})"
        ) from None
    if not token:
        raise CredentialsUnavailable(f"credentials: token_file {named} is empty")
    return token


def _cache_path(cache_dir: Path, url: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", url.rsplit("/", 1)[-1])[:40] or "repository"
    return cache_dir / f"{name}-{hashlib.sha256(url.encode()).hexdigest()[:12]}.git"


def _fetch_refusal(run: _Run, item: Repository, clone_urls: Mapping[int, str]) -> str | None:
    """Why `item` is not to be fetched (checked at every fetch: the settings, or what named a
    discovered repository, may have changed since it was stored); None when it may be."""
    if not run.allow_local and is_local_url(item.clone_url):
        return LOCAL_REFUSED.format(url=item.clone_url)
    if item.source != "discovered":
        return None
    found_in = None if item.discovered_from_id is None else clone_urls.get(item.discovered_from_id)
    return discovery_refusal(item.clone_url, found_in, run.discovery_allowed)


async def _fetched(session: AsyncSession, run: _Run, item: Repository, error: str | None) -> None:
    """Record a fetch's result, announcing a fetch that began to fail (fleetmark.harvest.failing)
    or succeeded again (.recovered)."""
    now = run.clock()
    await repository.set_fetch_result(
        session, item.id, fetched_at=None if error else now, error=error
    )
    if (error is None) == (item.fetch_error is None):
        return
    data = HarvestEventData(
        repository=item.url,
        role=item.role,
        error=error,
        previous_error=item.fetch_error,
        evidence_url=page_url(run.source, REPOSITORIES_PAGE),
    )
    event = Event(
        type="fleetmark.harvest.recovered" if error is None else "fleetmark.harvest.failing",
        subject=f"repositories/{data.repository}",
        time=now,
        data=data.model_dump(mode="json"),
    )
    await publish(session, [event], source=run.source)


async def _harvest_repository(
    run: _Run, item: Repository, clone_urls: Mapping[int, str]
) -> RepositoryOutcome:
    """One repository; whatever goes wrong is recorded and the next repository still runs."""
    outcome = RepositoryOutcome.model_validate({"url": item.url, "role": item.role, "branches": []})
    problems: list[ErrorRecord] = []
    try:
        if (refusal := _fetch_refusal(run, item, clone_urls)) is not None:
            raise GitFailure(f"not fetched: {refusal}")
        credentials = _resolve_credentials(item, run.credentials_dir)
        local = await asyncio.to_thread(
            LocalRepository.sync,
            item.clone_url,
            _cache_path(run.cache_dir, item.url),
            credentials,
            display_url=redact_url(item.clone_url),
            timeout=run.git_timeout,
        )
    except (GitFailure, CredentialsUnavailable) as exc:
        log.warning("fetch failed", repository=item.url, error=str(exc))
        async with run.units() as session:
            await _fetched(session, run, item, str(exc))
            await repository.record_errors(
                session, item.id, [ErrorRecord(None, None, str(exc))], run.clock()
            )
        outcome.errors = 1
        return outcome
    with local:
        try:
            async with run.units() as session:
                await _fetched(session, run, item, None)
            branches = await _branches_to_harvest(run, item, local, problems)
            for name, (head, environment_id) in branches.items():
                try:
                    outcome.branches.append(
                        await _harvest_branch(run, item, local, name, head, environment_id)
                    )
                except GitFailure as exc:
                    problems.append(ErrorRecord(None, None, f"branch {name}: {exc}"))
        except Exception as exc:
            # A defect or an unexpected git state must not stop the other repositories.
            log.exception("harvest failed", repository=item.url)
            problems.append(ErrorRecord(None, None, f"harvest failed: {type(exc).__name__}: {exc}"))
    if problems:
        async with run.units() as session:
            await repository.record_errors(session, item.id, problems, run.clock())
    outcome.errors += len(problems) + sum(branch.errors for branch in outcome.branches)
    return outcome


async def _branches_to_harvest(
    run: _Run, item: Repository, local: LocalRepository, problems: list[ErrorRecord]
) -> dict[str, tuple[str, int | None]]:
    """Branch name -> (remote head, environment id); vanished branches are recorded."""
    heads = await asyncio.to_thread(local.branch_heads)
    async with run.units() as session:
        environments = await repository.environment_ids(session)
        if item.branches is not None:
            names = list(item.branches)
            if DEFAULT_BRANCH in names:
                default = await asyncio.to_thread(local.default_branch)
                names = [name for name in names if name != DEFAULT_BRANCH]
                if default is not None:
                    names.append(default)
            for name in names:
                if name not in heads:
                    problems.append(
                        ErrorRecord(None, None, f"branch {name!r} does not exist on the remote")
                    )
        else:
            names = [name for name in environments if name in heads]
            if not names:
                known = ", ".join(sorted(environments)) or "none yet"
                problems.append(
                    ErrorRecord(
                        None,
                        None,
                        f"no branch to harvest: no environment ({known}) is a branch of the "
                        "remote; configure `branches` for this repository",
                    )
                )
        vanished = False
        for name, branch_id in (await repository.live_branches(session, item.id)).items():
            if name not in heads:
                problems.append(
                    ErrorRecord(None, None, f"branch {name!r} no longer exists on the remote")
                )
                await repository.set_branch_deleted(session, branch_id, run.clock())
                vanished = True
        if vanished:
            await repository.refresh_reachability(session, item.id)
        result = {}
        for name in dict.fromkeys(names):
            if name not in heads:
                continue
            environment_id = environments.get(name)
            if environment_id is None and item.role == "platform":
                # Kalypso: each branch of the platform repo is an environment.
                environment_id = await ensure_environment(session, name)
            result[name] = (heads[name], environment_id)
    return result


@dataclass(frozen=True, slots=True)
class _Plan:
    chain: list[str]  # new chain commits, oldest first
    fork: str | None  # last chain commit kept
    fork_position: int  # its position (-1: none)
    rewritten: bool


async def _plan(
    run: _Run, local: LocalRepository, branch: repository.BranchState, head: str
) -> _Plan:
    old = None if run.backfill else branch.head_sha
    stored_position = -1 if branch.head_position is None else branch.head_position
    if old is not None:
        ahead = await asyncio.to_thread(local.first_parent_chain, head, old)
        if ahead and ahead[-1][1] == old:
            return _Plan([sha for sha, _ in reversed(ahead)], old, stored_position, False)
    if old is None:
        full = await asyncio.to_thread(local.first_parent_chain, head)
        return _Plan([sha for sha, _ in reversed(full)], None, -1, branch.head_sha is not None)
    # History was rewritten, or the old head left the first-parent chain: keep the chain the
    # stored one shares with the new one, renumber from there.
    async with run.units() as session:
        mainline = await repository.mainline_positions(session, branch.id)
    full = await asyncio.to_thread(local.first_parent_chain, head)
    shared = next((index for index, (sha, _) in enumerate(full) if sha in mainline), len(full))
    fork = full[shared][0] if shared < len(full) else None
    new = [sha for sha, _ in reversed(full[:shared])]
    fork_position = -1 if fork is None else mainline[fork]
    return _Plan(new, fork, fork_position, fork_position < stored_position)


async def _harvest_branch(
    run: _Run,
    item: Repository,
    local: LocalRepository,
    name: str,
    head: str,
    environment_id: int | None,
) -> BranchOutcome:
    async with run.units() as session:
        branch = await repository.ensure_branch(session, item.id, name, environment_id)
    if branch.head_sha == head and not run.backfill:
        async with run.units() as session:
            await repository.set_branch_head(session, branch.id, None, run.clock())
            if branch.deleted_at is not None:
                await repository.refresh_reachability(session, item.id)
        return BranchOutcome(name=name, new_commits=0, head_sha=head, rewritten=False)
    plan = await _plan(run, local, branch, head)
    if plan.rewritten:
        log.info("history rewritten", repository=item.url, branch=name, kept=plan.fork_position + 1)
    run.progress.branch(item.url, name, len(plan.chain))
    start, position, new_commits, errors = plan.fork, plan.fork_position + 1, 0, 0
    chunks = [plan.chain[index : index + CHUNK] for index in range(0, len(plan.chain), CHUNK)]
    for index, chunk in enumerate(chunks or [[]]):
        async with run.units() as session:
            if index == 0 and plan.rewritten:
                await repository.truncate_branch(session, branch.id, plan.fork_position)
            if chunk:
                head_id, added, found = await _harvest_chunk(
                    run,
                    session,
                    item,
                    name,
                    branch.id,
                    environment_id,
                    local,
                    start,
                    chunk,
                    position,
                )
                new_commits += added
                errors += found
            else:  # reset to an older chain commit: nothing new, only the head moves back
                head_id = (await repository.commit_ids(session, item.id, [head]))[head]
            if plan.rewritten or branch.deleted_at is not None:
                await repository.refresh_reachability(session, item.id)
            await repository.set_branch_head(session, branch.id, head_id, run.clock())
        if chunk:
            start, position = chunk[-1], position + len(chunk)
            run.progress.advance(len(chunk))
    return BranchOutcome(
        name=name,
        new_commits=new_commits,
        head_sha=head,
        rewritten=plan.rewritten,
        errors=errors,
    )


@dataclass(slots=True)
class _ChunkRead:
    commits: list[CommitInfo]
    observations: Observations[Any, Any]
    promoted: dict[str, str | None]


def _read_chunk(
    local: LocalRepository,
    role: str,
    start: str | None,
    chunk: Sequence[str],
    stored: set[Any],
    paths: Sequence[str],
    max_bytes: int,
) -> _ChunkRead:
    commits = local.commits(chunk[-1], start)
    trees = {commit.sha: commit.tree for commit in commits}
    start_tree = None if start is None else local.tree_of(start)
    chain = [(sha, trees[sha]) for sha in chunk]
    promoted: dict[str, str | None] = {}
    if role == "platform":
        platform = PlatformReader(local, max_bytes)
        observations: Observations[Any, Any] = observe(platform, chain, start_tree, stored, {})
        promoted = {
            commit.sha: platform.promoted_commit(commit.tree, commit.sha, observations.problems)
            for commit in commits
        }
    else:
        observations = observe(
            ManifestReader(local, max_bytes, paths), chain, start_tree, stored, {}
        )
    return _ChunkRead(commits, observations, promoted)


async def _harvest_chunk(
    run: _Run,
    session: AsyncSession,
    item: Repository,
    branch_name: str,
    branch_id: int,
    environment_id: int | None,
    local: LocalRepository,
    start: str | None,
    chunk: Sequence[str],
    first_position: int,
) -> tuple[int, int, int]:
    """Store one chunk of chain commits: (id of its last commit, commits read, problems)."""
    if item.role == "platform":
        stored_assignments = await repository.open_assignments(session, branch_id)
        stored_keys: set[Any] = set(stored_assignments)
        paths: list[str] = []
    else:
        stored_manifests = await repository.open_manifests(session, branch_id)
        stored_keys = set(stored_manifests)
        paths = await repository.tracked_paths(session, item.id, branch_name)
    read = await asyncio.to_thread(
        _read_chunk, local, item.role, start, chunk, stored_keys, paths, run.max_file_bytes
    )
    parents = {commit.sha: commit.parents for commit in read.commits}
    outside = sorted(
        {parent for commit in read.commits for parent in commit.parents} - parents.keys()
    )
    known = await repository.generations_of(session, item.id, outside)
    generation = generations(((commit.sha, commit.parents) for commit in read.commits), known)
    ids = await repository.upsert_commits(
        session,
        [
            {
                "repository_id": item.id,
                "sha": commit.sha,
                "parent_shas": list(commit.parents),
                "generation": generation[commit.sha],
                "author_name": commit.author_name,
                "author_email": commit.author_email,
                "committed_at": commit.committed_at,
                "message": commit.message,
                "promoted_commit_sha": read.promoted.get(commit.sha),
            }
            for commit in read.commits
        ],
    )
    await repository.insert_members(
        session,
        [
            {
                "branch_id": branch_id,
                "commit_id": ids[member.sha],
                "position": member.position,
                "mainline": member.mainline,
            }
            for member in place_members(chunk, parents, first_position)
        ],
    )
    problems = [ErrorRecord(p.commit, p.path, p.message) for p in read.observations.problems]
    if item.role == "platform":
        problems += await _store_assignments(
            session,
            run,
            item,
            branch_id,
            environment_id,
            stored_assignments,
            read.observations,
            ids,
        )
    else:
        await _store_manifests(session, item, branch_id, stored_manifests, read.observations, ids)
    await repository.record_errors(session, item.id, problems, run.clock())
    return ids[chunk[-1]], len(read.commits), len(problems)


def _stored_assignment(state: AssignmentState | None) -> StoredAssignment | None:
    if state is None:
        return None
    app = state.app
    return StoredAssignment(
        namespace=state.namespace,
        config_hash=state.config_hash,
        reconciler_kind=state.reconciler_kind,
        app_url=None if app is None else spelled_repository(app.url),
        app_branch=None if app is None else app.branch,
        app_path=None if app is None else app.path,
        workload=state.workload,
        app_pinned_ref=None if app is None else app.pinned,
        config=state.config,
    )


_CREDENTIALS_DROPPED = (
    "{} is harvested without the credentials its URL held (a user name or password): "
    "repository content must not carry them; list the repository in the repositories file "
    "with `credentials` (token_file or token_env) instead"
)


async def _discover(
    session: AsyncSession,
    run: _Run,
    item: Repository,
    observations: Observations[AssignmentKey, AssignmentState],
) -> tuple[dict[str, int], list[ErrorRecord]]:
    """Application repositories the reconcilers of `item` point at, by normalised URL, and a
    harvest error, at the commit and folder that first names it, for each one refused or
    recorded without the credentials its URL held."""
    ids: dict[str, int] = {}
    seen: set[AppSource] = set()
    problems: list[ErrorRecord] = []
    for sha, observed in observations.steps:
        for (cluster_type, target), state in observed.items():
            for source in () if state is None else state.sources:
                if source in seen:
                    continue
                seen.add(source)
                where = f"{cluster_type}/{target}"
                refusal = discovery_refusal(source.url, item.clone_url, run.discovery_allowed)
                url = spelled_repository(source.url)
                if refusal is not None or url is None:
                    message = f"repository not harvested: {refusal or source.url}"
                    problems.append(ErrorRecord(sha, where, message))
                    continue
                clone_url = redact_url(source.url)
                if clone_url != source.url:
                    problems.append(ErrorRecord(sha, where, _CREDENTIALS_DROPPED.format(clone_url)))
                ids[url] = await repository.ensure_discovered(
                    session, url, clone_url, source.branch or DEFAULT_BRANCH, item.id
                )
    return ids, problems


async def _store_assignments(
    session: AsyncSession,
    run: _Run,
    item: Repository,
    branch_id: int,
    environment_id: int | None,
    stored: dict[AssignmentKey, OpenRevision[StoredAssignment]],
    observations: Observations[AssignmentKey, AssignmentState],
    ids: dict[str, int],
) -> list[ErrorRecord]:
    """Store the assignments' revisions; the harvest errors of the repositories they name."""
    app_ids, problems = await _discover(session, run, item, observations)
    changes = track(
        stored,
        [
            (sha, {key: _stored_assignment(state) for key, state in observed.items()})
            for sha, observed in observations.steps
        ],
    )
    assignment_ids = await repository.ensure_assignments(
        session, item.id, branch_id, environment_id, [revision.key for revision in changes.new]
    )
    await repository.insert_assignment_revisions(
        session,
        [
            {
                "assignment_id": assignment_ids[revision.key],
                "valid_from_commit_id": ids[revision.valid_from],
                "valid_until_commit_id": _until(revision, ids),
                "namespace": revision.values.namespace,
                "config": revision.values.config,
                "config_hash": revision.values.config_hash,
                "reconciler_kind": revision.values.reconciler_kind,
                "app_repository_id": None
                if revision.values.app_url is None
                else app_ids.get(revision.values.app_url),
                "app_branch": revision.values.app_branch,
                "app_path": revision.values.app_path,
                "workload": revision.values.workload,
                "app_pinned_ref": revision.values.app_pinned_ref,
            }
            for revision in changes.new
        ],
    )
    await repository.close_revisions(
        session, AssignmentRevision, [(revision, ids[sha]) for revision, sha in changes.closed]
    )
    return problems


def _until(revision: NewRevision[Any, Any], ids: dict[str, int]) -> int | None:
    return None if revision.valid_until is None else ids[revision.valid_until]


def _stored_manifest(state: ManifestState | None) -> StoredManifest | None:
    if state is None:
        return None
    return StoredManifest(
        workload_version=state.workload_version,
        version_source=state.version_source,
        images=state.images,
        manifest_digest=state.digest,
    )


async def _store_manifests(
    session: AsyncSession,
    item: Repository,
    branch_id: int,
    stored: dict[str, OpenRevision[StoredManifest]],
    observations: Observations[str, ManifestState],
    ids: dict[str, int],
) -> None:
    changes = track(
        stored,
        [
            (sha, {path: _stored_manifest(state) for path, state in observed.items()})
            for sha, observed in observations.steps
        ],
    )
    await repository.insert_manifest_revisions(
        session,
        [
            {
                "repository_id": item.id,
                "branch_id": branch_id,
                "path": revision.key,
                "valid_from_commit_id": ids[revision.valid_from],
                "valid_until_commit_id": _until(revision, ids),
                "workload_version": revision.values.workload_version,
                "version_source": revision.values.version_source,
                "images": list(revision.values.images),
                "manifest_digest": revision.values.manifest_digest,
            }
            for revision in changes.new
        ],
    )
    await repository.close_revisions(
        session, ManifestRevision, [(revision, ids[sha]) for revision, sha in changes.closed]
    )


__all__ = [
    "CHUNK",
    "Progress",
    "add_repository",
    "harvest_repositories",
    "list_repositories",
    "remove_repository",
    "sync_repositories_file",
]
