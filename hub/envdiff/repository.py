"""SQL of the environment diff, over the desired_version view and the deployed_version summary.

The diff itself only reads, in one statement whose cost follows the assignments compared
(docs/contributing.md, "The environment diff"); the refresh of the summary (what each cluster
runs, `deployed_cluster`, summed up per part of the fleet, `deployed_part`) and `replace_kept`
are the job's.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping, TextClause, delete, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.database import plan_for_values
from hub.models import DeployedRefresh, EnvironmentDiffCell, EnvironmentDiffConfig
from hub.models.observed import FLUX_SOURCE_KINDS
from hub.sorting import Order

# Held while refreshing the summary ("envdiff" in ASCII): one replica at a time.
REFRESH_LOCK = 0x656E7664696666


@dataclass(frozen=True, slots=True)
class Filters:
    workload: str | None = None
    cluster_type: str | None = None
    # A deployment target's full name (`<workload>-<target>`) or its name within the workload.
    deployment_target: str | None = None
    only_differences: bool = True
    # Platform config keys left out of the comparison.
    ignored_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DiffPage:
    total: int
    # When deployed_version was last refreshed; None: it holds nothing.
    deployed_at: datetime | None
    # Per row of the page, in order: its assignments, one per environment that has it, each
    # with `members` (clusters of its cluster type) and `deployed` (summary rows as JSON).
    rows: list[list[RowMapping]]


async def source_spellings(session: AsyncSession) -> list[str]:
    """Every repository URL as agents reported it, in the summary."""
    rows = await session.scalars(
        text("SELECT DISTINCT source_url FROM deployed_version WHERE source_url IS NOT NULL")
    )
    return list(rows)


# Rows pair the compared environments' assignments by (workload, cluster type): in Kalypso a
# deployment target belongs to one environment, while cluster types carry their names from
# one environment to the next. Where one environment has several of a workload's targets on
# one cluster type, that (workload, cluster type) pairs by target name instead. A summary row
# follows an assignment when its path is the assignment's and its ref the pinned revision,
# else the branch (or, for the default branch, no ref or HEAD).
_DIFF_PAGE = """
WITH spelling AS (
    SELECT * FROM unnest(CAST(:spellings AS text[]), CAST(:spelled AS text[]))
        AS s(source_url, repository)
),
desired AS (
    SELECT DISTINCT ON (v.environment_id, v.workload, v.cluster_type, v.deployment_target)
           v.*, v.config - CAST(:ignored AS text[]) AS compared_config,
           COALESCE(v.app_pinned_ref, v.app_branch) AS ref
    FROM desired_version v
    WHERE v.environment_id = ANY(CAST(:environments AS integer[]))
      AND (CAST(:workload AS text) IS NULL OR v.workload = CAST(:workload AS text))
      AND (CAST(:cluster_type AS text) IS NULL OR v.cluster_type = CAST(:cluster_type AS text))
    ORDER BY v.environment_id, v.workload, v.cluster_type, v.deployment_target,
             v.platform_repository, v.platform_branch
),
counted AS (
    SELECT d.*,
           count(*) OVER (PARTITION BY d.workload, d.cluster_type, d.environment_id) AS sharing
    FROM desired d
),
keyed AS MATERIALIZED (
    SELECT c.*,
           CASE WHEN max(c.sharing) OVER (PARTITION BY c.workload, c.cluster_type) > 1
                THEN c.deployment_target ELSE '' END AS pair
    FROM counted c
),
following AS MATERIALIZED (
    SELECT k.environment_id, k.workload, k.cluster_type, k.pair, g.version,
           CASE WHEN g.version IS NULL THEN g.applied_sha END AS commit, g.clusters,
           g.message, g.condition = 'live_drift' AS live_drift,
           CASE
               WHEN g.condition = 'failing' THEN 'failing'
               WHEN g.condition <> 'applied' THEN 'drifted'
               WHEN k.version IS NOT NULL AND g.version IS DISTINCT FROM k.version
                   THEN 'drifted'
               ELSE 'in_sync'
           END AS state
    FROM keyed k
    -- Each summary row's repository first (OFFSET 0: a subquery of its own). Joined to the
    -- assignments on it with the rest, the spellings were a filter the planner, guessing one
    -- row, checked for every pair of a summary row and a spelling: 200,000 of them, 30 ms.
    JOIN (
        SELECT g.*, s.repository
        FROM deployed_version g
        JOIN spelling s ON s.source_url = g.source_url
        WHERE g.condition <> 'member'
        OFFSET 0
    ) AS g
      ON g.environment_id = k.environment_id AND g.cluster_type = k.cluster_type
     AND g.source_path = COALESCE(k.app_path, '') AND g.repository = k.app_repository
    WHERE CASE WHEN k.ref IS NULL THEN COALESCE(g.source_ref, '') IN ('', 'HEAD')
               ELSE g.source_ref IN (k.ref, 'refs/heads/' || k.ref) END
),
deviating AS (
    SELECT DISTINCT workload, cluster_type, pair FROM following WHERE state <> 'in_sync'
),
grouped AS (
    SELECT k.workload, k.cluster_type, k.pair,
           count(*) < :environment_count
           OR count(DISTINCT jsonb_build_array(k.version, k.app_pinned_ref)) > 1
           OR count(DISTINCT k.compared_config) > 1 AS meant_to_differ
    FROM keyed k
    GROUP BY k.workload, k.cluster_type, k.pair
    HAVING CAST(:target AS text) IS NULL
        OR bool_or(k.deployment_target IN (
               CAST(:target AS text), k.workload || '-' || CAST(:target AS text)))
),
selected AS (
    SELECT g.workload, g.cluster_type, g.pair,
           row_number() OVER (ORDER BY {order}) AS ordinal
    FROM grouped g
    LEFT JOIN deviating d USING (workload, cluster_type, pair)
    WHERE NOT :only_differences OR g.meant_to_differ OR d.workload IS NOT NULL
),
page AS (
    SELECT * FROM selected ORDER BY ordinal LIMIT :limit OFFSET :offset
),
deployed AS (
    SELECT f.environment_id, f.workload, f.cluster_type, f.pair,
           jsonb_agg(jsonb_build_object(
               'version', f.version, 'commit', f.commit, 'state', f.state,
               'clusters', f.clusters, 'live_drift', f.live_drift, 'message', f.message)
               ORDER BY f.clusters DESC, f.version, f.commit) AS groups
    FROM following f
    JOIN page p USING (workload, cluster_type, pair)
    GROUP BY f.environment_id, f.workload, f.cluster_type, f.pair
),
members AS (
    SELECT environment_id, cluster_type, clusters FROM deployed_version
    WHERE condition = 'member'
)
SELECT (SELECT count(*) FROM selected) AS total,
       (SELECT min(refreshed_at) FROM deployed_version) AS deployed_at,
       p.ordinal, k.*, NULLIF(k.pair, '') AS paired_target,
       COALESCE(m.clusters, 0) AS members, COALESCE(d.groups, '[]') AS deployed
FROM (SELECT 1) one
LEFT JOIN page p ON true
LEFT JOIN keyed k
  ON k.workload = p.workload AND k.cluster_type = p.cluster_type AND k.pair = p.pair
LEFT JOIN members m ON m.environment_id = k.environment_id AND m.cluster_type = k.cluster_type
LEFT JOIN deployed d
  ON d.environment_id = k.environment_id AND d.workload = k.workload
 AND d.cluster_type = k.cluster_type AND d.pair = k.pair
ORDER BY p.ordinal, k.environment_id
"""

# The columns a diff sorts its rows by, each as the columns of `grouped` it orders them by.
# Ties, and no column, keep the diff's own order: workload, cluster type, target.
DIFF_SORTS = {"workload": ("workload", "pair"), "cluster_type": ("cluster_type",)}
_OWN_ORDER = ("workload", "cluster_type", "pair")


def _diff_page(order: Order) -> TextClause:
    """The diff statement with its rows numbered in `order`."""
    direction = "DESC" if order.descending else "ASC"
    chosen = [] if order.column is None else DIFF_SORTS[order.column]
    keys = [f"g.{key} {direction} NULLS LAST" for key in chosen]
    keys += [f"g.{key}" for key in _OWN_ORDER]
    return text(_DIFF_PAGE.replace("{order}", ", ".join(keys)))


async def diff_page(
    session: AsyncSession,
    environment_ids: Sequence[int],
    filters: Filters,
    repositories: Mapping[str, str],
    *,
    order: Order,
    limit: int,
    offset: int,
) -> DiffPage:
    """A page of rows in `order`; `repositories` maps each reported URL spelling to its
    repository's normalised URL."""
    spellings = sorted(repositories)
    # Planned for the filters and environments asked: a generic plan took twice as long.
    await plan_for_values(session)
    result = await session.execute(
        _diff_page(order),
        {
            "spellings": spellings,
            "spelled": [repositories[spelling] for spelling in spellings],
            "environments": list(environment_ids),
            "environment_count": len(environment_ids),
            "ignored": list(filters.ignored_keys),
            "workload": filters.workload,
            "cluster_type": filters.cluster_type,
            "target": filters.deployment_target,
            "only_differences": filters.only_differences,
            "limit": limit,
            "offset": offset,
        },
    )
    rows: dict[int, list[RowMapping]] = {}
    total, deployed_at = 0, None
    for row in result.mappings():
        total, deployed_at = row["total"], row["deployed_at"]
        if row["ordinal"] is not None:
            rows.setdefault(row["ordinal"], []).append(row)
    return DiffPage(total=total, deployed_at=deployed_at, rows=list(rows.values()))


# The version the applied commit `k.applied_sha` carries on the branch `k.source_ref` names
# (any repository's that holds the commit) at the path `k.source_path`: the manifest revision
# valid at the commit's position on the branch's first-parent chain. The first by branch and
# revision when several are, so that every round resolves a commit alike.
_VERSION = """
        SELECT m.workload_version AS version
        FROM git_branch b
        JOIN git_commit gc ON gc.repository_id = b.repository_id AND gc.sha = k.applied_sha
        JOIN branch_commit p ON p.branch_id = b.id AND p.commit_id = gc.id AND p.mainline
        JOIN manifest_revision m ON m.branch_id = b.id AND m.path = k.source_path
        JOIN branch_commit f ON f.branch_id = b.id AND f.commit_id = m.valid_from_commit_id
        LEFT JOIN branch_commit u
          ON u.branch_id = b.id AND u.commit_id = m.valid_until_commit_id
        WHERE b.name = regexp_replace(k.source_ref, '^refs/heads/', '')
          AND b.deleted_at IS NULL
          AND f.position <= p.position AND (u.position IS NULL OR p.position < u.position)
        ORDER BY b.id, m.id
        LIMIT 1
"""


# What the chosen clusters run (a selection's `clusters`: a condition on `c`, the cluster):
# their live objects summed up per source (URL as reported, ref, path normalised), applied
# commit and condition, a cluster with two objects in one group counted once, each row with the
# version its applied commit carries on that branch and path (looked up once per ref, path and
# commit); and a `member` row per live cluster with its placement. A Flux source object applies
# nothing itself. Counts the clusters it placed: those read that are live. `resolved` is
# materialized so that it is looked up once: inlined, a plan that expected one row of
# per_cluster (tables not yet analyzed) looked every version up again for each row, 24 s for
# 1,000 clusters instead of 0.2 s.
_CLUSTER_ROWS = r"""
WITH chosen AS MATERIALIZED (
    SELECT c.id, c.environment_id, t.name AS cluster_type
    FROM cluster c
    JOIN cluster_type t ON t.id = c.cluster_type_id
    WHERE {clusters} AND c.decommissioned_at IS NULL
),
per_cluster AS (
    SELECT c.environment_id, c.cluster_type, o.source_url, o.url_ref AS source_ref,
           btrim(regexp_replace('/' || COALESCE(o.source_path, '') || '/', '/(\.?/)+', '/', 'g'),
                 '/') AS source_path,
           o.applied_sha, o.applied_version,
           CASE
               WHEN o.ready IS FALSE AND NOT o.suspended THEN 'failing'
               WHEN o.suspended THEN 'suspended'
               WHEN o.drifted THEN 'live_drift'
               ELSE 'applied'
           END AS condition,
           o.cluster_id, min(COALESCE(o.message, o.reason)) AS message
    FROM chosen c
    CROSS JOIN LATERAL (
        SELECT * FROM object_state o WHERE o.cluster_id = c.id OFFSET 0
    ) AS o
    WHERE o.removed_at IS NULL
      AND NOT (o.reconciler = 'flux' AND o.kind = ANY(CAST(:source_kinds AS text[])))
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
),
resolved AS MATERIALIZED (
    SELECT k.source_ref, k.source_path, k.applied_sha, v.version
    FROM (
        SELECT DISTINCT source_ref, source_path, applied_sha FROM per_cluster
        WHERE applied_sha IS NOT NULL
    ) k
    CROSS JOIN LATERAL ({version}) v
),
inserted AS (
    INSERT INTO deployed_cluster (
        cluster_id, environment_id, cluster_type, source_url, source_ref, source_path,
        applied_sha, applied_version, condition, version, message
    )
    SELECT g.cluster_id, g.environment_id, g.cluster_type, g.source_url, g.source_ref,
           g.source_path, g.applied_sha, g.applied_version, g.condition,
           COALESCE(r.version, g.applied_version), g.message
    FROM per_cluster g
    LEFT JOIN resolved r
      ON r.source_ref = g.source_ref AND r.source_path = g.source_path
     AND r.applied_sha = g.applied_sha
    UNION ALL
    SELECT id, environment_id, cluster_type, NULL, NULL, NULL, NULL, NULL, 'member', NULL, NULL
    FROM chosen
    RETURNING condition
)
SELECT count(*) FILTER (WHERE condition = 'member') FROM inserted
"""


@dataclass(frozen=True, slots=True)
class Part:
    """The clusters with first <= id < end."""

    first: int
    end: int


@dataclass(frozen=True, slots=True)
class Clusters:
    """The clusters with these ids."""

    ids: Sequence[int]


_CLUSTER_ROWS_OF_PART = text(
    _CLUSTER_ROWS.format(clusters="c.id >= :first AND c.id < :end", version=_VERSION)
)
_CLUSTER_ROWS_OF = text(
    _CLUSTER_ROWS.format(clusters="c.id = ANY(CAST(:ids AS integer[]))", version=_VERSION)
)


async def read_clusters(session: AsyncSession, selection: Part | Clusters) -> int:
    """Replace the deployed_cluster rows of the clusters `selection` names by what they run
    now: none for a cluster decommissioned, or not placed. Returns how many clusters have
    rows now."""
    # Room to group a part's objects in memory rather than in sort files on disk.
    await session.execute(text("SET LOCAL work_mem = '64MB'"))
    values: dict[str, Any] = {"source_kinds": list(FLUX_SOURCE_KINDS)}
    if isinstance(selection, Part):
        await session.execute(
            text("DELETE FROM deployed_cluster WHERE cluster_id >= :first AND cluster_id < :end"),
            {"first": selection.first, "end": selection.end},
        )
        statement = _CLUSTER_ROWS_OF_PART
        values |= {"first": selection.first, "end": selection.end}
    else:
        ids = list(selection.ids)
        await session.execute(
            text("DELETE FROM deployed_cluster WHERE cluster_id = ANY(CAST(:ids AS integer[]))"),
            {"ids": ids},
        )
        statement = _CLUSTER_ROWS_OF
        values["ids"] = ids
    return int((await session.execute(statement, values)).scalar_one())


# The parts asked for summed up anew from deployed_cluster: per part, its clusters' rows
# counted per group.
_SUM_PARTS = """
INSERT INTO deployed_part (
    part, environment_id, cluster_type, source_url, source_ref, source_path, applied_sha,
    applied_version, condition, version, clusters, message
)
SELECT p.part, d.environment_id, d.cluster_type, d.source_url, d.source_ref, d.source_path,
       d.applied_sha, d.applied_version, d.condition, d.version, count(*), min(d.message)
FROM unnest(CAST(:parts AS integer[])) AS p(part)
JOIN deployed_cluster d
  ON d.cluster_id >= p.part * :size AND d.cluster_id < (p.part + 1) * :size
GROUP BY p.part, d.environment_id, d.cluster_type, d.source_url, d.source_ref, d.source_path,
         d.applied_sha, d.applied_version, d.condition, d.version
"""


async def sum_parts(session: AsyncSession, parts: Collection[int], size: int) -> None:
    """Replace the deployed_part rows of `parts` (of `size` cluster ids each) by their
    clusters' deployed_cluster rows summed up."""
    values = {"parts": sorted(parts), "size": size}
    await session.execute(
        text("DELETE FROM deployed_part WHERE part = ANY(CAST(:parts AS integer[]))"), values
    )
    await session.execute(text(_SUM_PARTS), values)


# The clusters whose deployed_cluster rows may be out of date since :since: those with objects
# a report wrote since (their state, or their removal); and those whose member row does not
# place them as the cluster table does: registered, registered again, placed elsewhere,
# decommissioned (its rows to drop). Each side read once, joined by hash.
_CHANGED = """
WITH placed AS (
    SELECT c.id, c.environment_id, t.name AS cluster_type
    FROM cluster c
    JOIN cluster_type t ON t.id = c.cluster_type_id
    WHERE c.decommissioned_at IS NULL
),
member AS (
    SELECT cluster_id, environment_id, cluster_type FROM deployed_cluster
    WHERE condition = 'member'
)
SELECT DISTINCT cluster_id FROM object_state WHERE written_at >= :since
UNION
SELECT COALESCE(p.id, m.cluster_id)
FROM placed p
FULL JOIN member m ON m.cluster_id = p.id
WHERE p.id IS NULL OR m.cluster_id IS NULL
   OR m.environment_id IS DISTINCT FROM p.environment_id
   OR m.cluster_type IS DISTINCT FROM p.cluster_type
"""


async def changed_clusters(session: AsyncSession, since: datetime) -> list[int]:
    # Planned for its `since`: a generic plan, made for any, would read every object.
    await plan_for_values(session)
    rows = await session.scalars(text(_CHANGED), {"since": since})
    return sorted(rows)


async def harvested_since(session: AsyncSession, since: datetime) -> bool:
    """Whether the harvest moved, deleted or found again a branch since `since`: the versions
    the summary resolved may have changed."""
    found = await session.scalar(
        text("SELECT EXISTS (SELECT FROM git_branch WHERE changed_at >= :since)"),
        {"since": since},
    )
    return bool(found)


# The versions of the deployed_cluster rows that follow a branch the harvest moved, deleted or
# found again since :since (by its name, as _VERSION looks a branch up), looked up again, and
# the rows whose version is not that one any more given it: no object read. A branch that moves
# rarely changes a version applied already; one found again, or a commit applied before the
# harvest saw it, does.
_VERSIONS_AGAIN = text(f"""
WITH moved AS (
    SELECT DISTINCT name FROM git_branch WHERE changed_at >= :since
),
resolved AS MATERIALIZED (
    SELECT k.source_ref, k.source_path, k.applied_sha, v.version
    FROM (
        SELECT DISTINCT source_ref, source_path, applied_sha FROM deployed_cluster
        WHERE applied_sha IS NOT NULL
          AND regexp_replace(source_ref, '^refs/heads/', '') IN (SELECT name FROM moved)
    ) k
    LEFT JOIN LATERAL ({_VERSION}) v ON true
)
UPDATE deployed_cluster d SET version = COALESCE(r.version, d.applied_version)
FROM resolved r
WHERE (d.source_ref, d.source_path, d.applied_sha) = (r.source_ref, r.source_path, r.applied_sha)
  AND d.version IS DISTINCT FROM COALESCE(r.version, d.applied_version)
RETURNING d.cluster_id
""")  # noqa: S608 - composed from constants, never from input


async def resolve_versions_again(session: AsyncSession, since: datetime) -> set[int]:
    """Look the versions of the rows that follow a branch the harvest changed since `since` up
    again; the clusters whose rows it changed."""
    if not await harvested_since(session, since):
        return set()
    return set(await session.scalars(_VERSIONS_AGAIN, {"since": since}))


async def drop_parts_from(session: AsyncSession, parts: int, size: int) -> None:
    """Forget parts (of `size` cluster ids) beyond the fleet's last cluster id."""
    await session.execute(text("DELETE FROM deployed_part WHERE part >= :parts"), {"parts": parts})
    await session.execute(
        text("DELETE FROM deployed_cluster WHERE cluster_id >= :end"), {"end": parts * size}
    )


async def last_refresh(session: AsyncSession) -> DeployedRefresh | None:
    """The last refresh: when, and when it last read every cluster."""
    found: DeployedRefresh | None = await session.scalar(
        select(DeployedRefresh).where(DeployedRefresh.id == 1)
    )
    return found


async def set_refreshed(session: AsyncSession, now: datetime, *, full: bool) -> None:
    """Record a refresh as of `now`; with `full`, one that read every cluster."""
    values: dict[str, Any] = {"refreshed_at": now}
    if full:
        values["full_at"] = now
    statement = insert(DeployedRefresh).values(id=1, **values)
    await session.execute(
        statement.on_conflict_do_update(index_elements=[DeployedRefresh.id], set_=values)
    )


async def replace_kept(
    session: AsyncSession, cells: Sequence[dict[str, Any]], config: Sequence[dict[str, Any]]
) -> None:
    """The kept diff of every environment becomes `cells` and `config` (the columns of
    EnvironmentDiffCell and EnvironmentDiffConfig), all at once for readers."""
    for model, rows in ((EnvironmentDiffCell, cells), (EnvironmentDiffConfig, config)):
        await session.execute(delete(model))
        if rows:
            await session.execute(insert(model), list(rows))
    await session.flush()
