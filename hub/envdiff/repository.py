"""SQL of the environment diff, over the desired_version view and the deployed_version summary.

The diff itself only reads, in one statement whose cost follows the assignments compared
(docs/contributing.md, "The environment diff"); `refresh_part` and `replace_kept` are the job's.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping, TextClause, delete, insert, text
from sqlalchemy.ext.asyncio import AsyncSession

from hub.database import plan_for_values
from hub.models import EnvironmentDiffCell, EnvironmentDiffConfig
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


async def refresh_part(session: AsyncSession, part: int, first: int, end: int) -> None:
    """Replace one part of the deployed summary by what its clusters (first <= id < end) run
    now."""
    # Room to group the part's objects in memory rather than in sort files on disk.
    await session.execute(text("SET LOCAL work_mem = '64MB'"))
    await session.execute(text("DELETE FROM deployed_part WHERE part = :part"), {"part": part})
    await session.execute(
        text("INSERT INTO deployed_part SELECT :part, * FROM deployed_summary(:first, :end)"),
        {"part": part, "first": first, "end": end},
    )


async def drop_parts_from(session: AsyncSession, parts: int) -> None:
    """Forget parts beyond the fleet's last cluster id."""
    await session.execute(text("DELETE FROM deployed_part WHERE part >= :parts"), {"parts": parts})


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
