"""The environment diff: for any set of environments, per workload and cluster type, what each
is meant to run and what its clusters run, side by side, with the differences and why.

Data flow: environment names -> ids and promotion order -> URL spellings mapped to repositories
-> a page of rows (repository.diff_page) -> the pure comparison (compare.py) -> the answer.
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import RowMapping
from sqlalchemy.ext.asyncio import AsyncSession

from hub.client.schemas.diff import DiffOptions
from hub.envdiff import compare, repository
from hub.envdiff.compare import DifferenceKind, Side
from hub.envdiff.repository import Filters
from hub.envdiff.schemas import (
    AppSource,
    Deployed,
    DeployedVersion,
    Desired,
    Difference,
    DiffFilters,
    DiffRow,
    DiffRowPage,
    EnvironmentCell,
    EnvironmentDiff,
)
from hub.errors import InvalidInput
from hub.git.urls import spelled_repository
from hub.placement import repository as placement_repository
from hub.placement import service as placement_service
from hub.sorting import OWN_ORDER, Order
from hub.text import short_sha

__all__ = [
    "COLUMNS",
    "FULL_PASS_EVERY",
    "Increment",
    "Refresh",
    "deployed_parts",
    "environment_diff",
    "increment_since_last",
    "keep_diff",
    "read_again",
    "refresh_deployed_part",
    "resolve_versions_again",
    "set_refreshed",
]

log = structlog.get_logger("fleetmark.envdiff")

# The columns a diff sorts its rows by.
COLUMNS = tuple(repository.DIFF_SORTS)
# Rows of the diff the job reads per page while keeping the diff of every environment.
KEPT_PAGE = 500


def _check_names(environments: Sequence[str]) -> None:
    repeated = sorted(name for name, count in Counter(environments).items() if count > 1)
    if repeated:
        raise InvalidInput(f"environment: {', '.join(repeated)} given more than once")
    if len(environments) < 2:
        given = environments[0] if environments else "none"
        raise InvalidInput(
            f"environment: give at least two environments to compare (given: {given})"
        )


async def _resolve(
    session: AsyncSession, environments: Sequence[str]
) -> dict[str, tuple[int, int | None]]:
    placed = await placement_service.environments(session, environments)
    return {environment.name: (environment.id, environment.position) for environment in placed}


async def _repositories(session: AsyncSession) -> dict[str, str]:
    """Reported URL spelling -> normalised repository URL (hub/git/urls.py)."""
    spelled = {}
    for spelling in await repository.source_spellings(session):
        normalised = spelled_repository(spelling)
        if normalised is not None:
            spelled[spelling] = normalised
    return spelled


def _deployed(
    groups: Sequence[Mapping[str, Any]], members: int, desired: str | None
) -> tuple[compare.Deployed, list[DeployedVersion]]:
    """A cell's summary rows summed up, with its deployed versions, most clusters first."""
    states = dict.fromkeys(("in_sync", "drifted", "failing"), 0)
    versions: dict[tuple[str | None, str | None], int] = {}
    live_drift, failure = 0, None
    for group in groups:
        clusters, key = group["clusters"], (group["version"], group["commit"])
        states[group["state"]] += clusters
        versions[key] = versions.get(key, 0) + clusters
        if group["live_drift"]:
            live_drift += clusters
        if group["state"] == "failing" and failure is None:
            failure = group["message"]
    listed = sorted(
        versions.items(), key=lambda item: (-item[1], item[0][0] or "", item[0][1] or "")
    )
    summary = compare.Deployed(
        clusters=members,
        in_sync=states["in_sync"],
        drifted=states["drifted"],
        failing=states["failing"],
        live_drift=live_drift,
        not_reporting=max(members - sum(states.values()), 0),
        other_versions=tuple(
            version or (short_sha(commit) if commit else "nothing applied yet")
            for (version, commit), _ in listed
            if desired is None or version != desired
        ),
        failure=failure,
    )
    wire = [
        DeployedVersion(version=version, commit=commit, clusters=count)
        for (version, commit), count in listed
    ]
    return summary, wire


def _side(environment: str, row: RowMapping | None, deployed: compare.Deployed) -> Side:
    if row is None:
        return Side(environment=environment, assigned=False)
    return Side(
        environment=environment,
        assigned=True,
        version=row["version"],
        pinned_ref=row["app_pinned_ref"],
        version_since=row["manifests_committed_at"],
        config=row["config"],
        deployed=deployed,
    )


def _unassigned(side: Side) -> EnvironmentCell:
    return EnvironmentCell(
        environment=side.environment,
        state=compare.cell_state(side),
        assigned=False,
        deployment_target=None,
        namespace=None,
        platform_commit=None,
        app=None,
        desired=None,
        config={},
        deployed=None,
    )


def _assigned(side: Side, row: RowMapping, deployed: Deployed) -> EnvironmentCell:
    return EnvironmentCell(
        environment=side.environment,
        state=compare.cell_state(side),
        assigned=True,
        deployment_target=row["deployment_target"],
        namespace=row["namespace"],
        platform_commit=row["platform_commit"],
        app=AppSource(
            repository=row["app_repository"],
            branch=row["app_branch"],
            path=row["app_path"],
            pinned_ref=row["app_pinned_ref"],
            commit=row["app_commit"],
        ),
        desired=Desired(
            version=row["version"],
            version_source=row["version_source"],
            images=list(row["images"] or []),
            manifest_digest=row["manifest_digest"],
            manifests_commit=row["manifests_commit"],
            manifests_committed_at=row["manifests_committed_at"],
        ),
        config=dict(sorted(row["config"].items())),
        deployed=deployed,
    )


def _difference(found: compare.Difference) -> Difference:
    return Difference(
        kind=found.kind,
        reason=found.reason,
        detail=found.detail,
        environment=found.environment,
        compared_with=found.compared_with,
        key=found.key,
        values=found.values,
    )


def _row(
    assignments: Sequence[RowMapping],
    names: Mapping[int, str],
    order: Sequence[str],
    ignored: frozenset[str],
) -> DiffRow:
    by_environment = {names[row["environment_id"]]: row for row in assignments}
    sides, cells = [], []
    for name in order:
        row = by_environment.get(name)
        if row is None:
            side = _side(name, None, compare.Deployed())
            sides.append(side)
            cells.append(_unassigned(side))
            continue
        summary, versions = _deployed(row["deployed"], row["members"], row["version"])
        side = _side(name, row, summary)
        sides.append(side)
        cells.append(
            _assigned(
                side,
                row,
                Deployed(
                    clusters=summary.clusters,
                    in_sync=summary.in_sync,
                    drifted=summary.drifted,
                    failing=summary.failing,
                    live_drift=summary.live_drift,
                    not_reporting=summary.not_reporting,
                    versions=versions,
                ),
            )
        )
    first = assignments[0]
    return DiffRow(
        workload=first["workload"],
        cluster_type=first["cluster_type"],
        deployment_target=first["paired_target"],
        environments=cells,
        differences=[_difference(item) for item in compare.differences(sides, order, ignored)],
    )


async def environment_diff(
    session: AsyncSession,
    environments: Sequence[str],
    options: DiffOptions,
    *,
    now: datetime,
    order: Order = OWN_ORDER,
) -> EnvironmentDiff:
    _check_names(environments)
    known = await _resolve(session, environments)
    names = {known[name][0]: name for name in environments}
    promotion = compare.promotion_order(
        environments, {name: position for name, (_, position) in known.items()}
    )
    ignored = tuple(sorted(set(options.ignored_keys or ())))
    filters = Filters(
        workload=options.workload,
        cluster_type=options.cluster_type,
        deployment_target=options.deployment_target,
        only_differences=options.only_differences,
        ignored_keys=ignored,
    )
    page = await repository.diff_page(
        session,
        [known[name][0] for name in environments],
        filters,
        await _repositories(session),
        order=order,
        limit=options.limit,
        offset=options.offset,
    )
    if not page.total:
        # Nothing found: perhaps a name that names nothing.
        await placement_service.check_names(
            session, cluster_type=options.cluster_type, workload=options.workload
        )
    return EnvironmentDiff(
        environments=promotion,
        promotion_order=promotion,
        evaluated_at=now,
        deployed_at=page.deployed_at,
        filters=DiffFilters(
            workload=options.workload,
            cluster_type=options.cluster_type,
            deployment_target=options.deployment_target,
            only_differences=options.only_differences,
            ignored_keys=list(ignored),
        ),
        rows=DiffRowPage(
            items=[_row(rows, names, promotion, frozenset(ignored)) for rows in page.rows],
            total=page.total,
            limit=options.limit,
            offset=options.offset,
        ),
    )


# A refresh reads again the objects of the clusters that changed since the last one (a report
# wrote them, the cluster was placed, registered or decommissioned: hub/envdiff/repository.py),
# looks the versions of what follows a branch the harvest changed up again, and sums up the
# parts of the fleet those lie in; it reads every cluster's when the last refresh that did is
# FULL_PASS_EVERY old, or there is none: the safety net for what the increments cannot see,
# which finds nothing when they saw it all.
FULL_PASS_EVERY = timedelta(minutes=15)


@dataclass(frozen=True, slots=True)
class Refresh:
    refreshed_at: datetime
    # Whether the refresh read every cluster, or those that changed; the clusters it read (the
    # live ones in a full pass).
    full: bool
    clusters: int
    # The parts of the fleet summed up anew.
    parts: int


@dataclass(frozen=True, slots=True)
class Increment:
    """A refresh that reads what changed since `since`: `clusters`, by id."""

    since: datetime
    clusters: list[int]


async def increment_since_last(session: AsyncSession, *, now: datetime) -> Increment | None:
    """What a refresh at `now` reads again; None: every cluster (a full pass)."""
    last = await repository.last_refresh(session)
    if (
        last is None
        or last.full_at is None
        or not timedelta(0) <= now - last.full_at < FULL_PASS_EVERY
    ):
        return None
    since = last.refreshed_at - placement_repository.WRITTEN_OVERLAP
    return Increment(since, await repository.changed_clusters(session, since))


def _parts(clusters: Iterable[int]) -> set[int]:
    return {cluster // placement_repository.PART_CLUSTERS for cluster in clusters}


async def resolve_versions_again(session: AsyncSession, since: datetime) -> set[int]:
    """Look the versions of what follows a branch the harvest changed since `since` up again,
    and sum up the parts of the clusters whose versions changed; those parts."""
    parts = _parts(await repository.resolve_versions_again(session, since))
    if parts:
        await repository.sum_parts(session, parts, placement_repository.PART_CLUSTERS)
    return parts


async def read_again(session: AsyncSession, clusters: Sequence[int]) -> set[int]:
    """Read again what `clusters` run, and sum up the parts they lie in; those parts."""
    parts = _parts(clusters)
    if clusters:
        await repository.read_clusters(session, repository.Clusters(clusters))
        await repository.sum_parts(session, parts, placement_repository.PART_CLUSTERS)
    return parts


async def deployed_parts(session: AsyncSession) -> list[tuple[int, int]]:
    """The parts of the fleet a full pass reads, one unit of work each; the summary's rows of
    parts beyond them are dropped."""
    parts = await placement_repository.fleet_parts(session)
    await repository.drop_parts_from(session, len(parts), placement_repository.PART_CLUSTERS)
    return parts


async def refresh_deployed_part(session: AsyncSession, part: int, first: int, end: int) -> int:
    """Read again what the clusters with first <= id < end run, and sum up their part.
    Returns how many live clusters it read."""
    clusters = await repository.read_clusters(session, repository.Part(first, end))
    await repository.sum_parts(session, [part], end - first)
    return clusters


async def set_refreshed(session: AsyncSession, *, now: datetime, full: bool) -> None:
    await repository.set_refreshed(session, now, full=full)


def _kept_cells(row: DiffRow, now: datetime) -> list[dict[str, Any]]:
    """EnvironmentDiffCell's columns for each environment of a row, with the differences
    that are about it."""
    cells = []
    for order, cell in enumerate(row.environments):
        about = [item for item in row.differences if item.environment == cell.environment]
        deployed = cell.deployed
        cells.append(
            {
                "workload": row.workload,
                "cluster_type": row.cluster_type,
                "paired_target": row.deployment_target,
                "environment": cell.environment,
                "environment_order": order,
                "state": cell.state.value,
                "assigned": cell.assigned,
                "deployment_target": cell.deployment_target,
                "desired_version": None if cell.desired is None else cell.desired.version,
                "pinned_ref": None if cell.app is None else cell.app.pinned_ref,
                "clusters": 0 if deployed is None else deployed.clusters,
                "in_sync": 0 if deployed is None else deployed.in_sync,
                "drifted": 0 if deployed is None else deployed.drifted,
                "failing": 0 if deployed is None else deployed.failing,
                "not_reporting": 0 if deployed is None else deployed.not_reporting,
                "deployed": []
                if deployed is None
                else [item.model_dump() for item in deployed.versions],
                "reasons": [item.reason.value for item in about],
                "details": [item.detail for item in about],
                "evaluated_at": now,
            }
        )
    return cells


def _kept_config(row: DiffRow, order: Mapping[str, int]) -> list[dict[str, Any]]:
    """EnvironmentDiffConfig's columns for each value of each config key that differs."""
    return [
        {
            "workload": row.workload,
            "cluster_type": row.cluster_type,
            "paired_target": row.deployment_target,
            "key": item.key,
            "environment": environment,
            "environment_order": order[environment],
            "value": value,
        }
        for item in row.differences
        if item.kind is DifferenceKind.CONFIG and item.key is not None and item.values
        for environment, value in item.values.items()
    ]


async def keep_diff(session: AsyncSession, *, now: datetime) -> int:
    """Keep the diff of every environment, in promotion order, every row with its cells, as
    GET /api/v1/diff answers it; none with fewer than two environments. The caller commits.
    Returns how many rows are kept."""
    placed = await placement_repository.environments(session)
    names = [environment.name for environment in placed]
    positions = {environment.name: environment.position for environment in placed}
    cells: list[dict[str, Any]] = []
    config: list[dict[str, Any]] = []
    kept = 0
    while len(names) > 1:
        diff = await environment_diff(
            session,
            names,
            DiffOptions(only_differences=False, limit=KEPT_PAGE, offset=kept),
            now=now,
        )
        order = {name: index for index, name in enumerate(diff.environments)}
        for row in diff.rows.items:
            cells += _kept_cells(row, now)
            config += _kept_config(row, order)
        kept += len(diff.rows.items)
        if not diff.rows.items or kept >= diff.rows.total:
            break
    for cell in cells:
        cell["environment_position"] = positions[cell["environment"]]
    await repository.replace_kept(session, cells, config)
    return kept
