"""SQL of drift: the drift job's set-based evaluation of every live object, the counts per
cluster and the drift periods it keeps, and the reads of the API. An evaluation works in
parts of the fleet, or of what changed (`object_drift`'s changed rows, `cluster_drift`,
`drift_period`, `drift_evaluation`); reads page with `cluster_drift` and take `drift_object`
rows for the clusters on the page only.
"""

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    DateTime,
    Integer,
    Row,
    String,
    TextClause,
    and_,
    any_,
    case,
    cast,
    column,
    false,
    func,
    literal,
    or_,
    select,
    table,
    text,
    true,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, array, insert
from sqlalchemy.ext.asyncio import AsyncSession

from hub.database import plan_for_values
from hub.drift.schemas import Reason
from hub.git.ancestry import reaches
from hub.models import (
    Cluster,
    ClusterDrift,
    ClusterDriftReasons,
    ClusterType,
    DriftEvaluation,
    DriftPeriod,
    Environment,
    ObjectState,
    Repository,
)
from hub.models.observed import FLUX_SOURCE_KINDS
from hub.sorting import Order

# Advisory lock key held while evaluating drift ("drift" in ASCII): one replica at a time.
DRIFT_LOCK = 0x6472696674

drift_object = table(
    "drift_object",
    column("cluster_id", Integer),
    column("cluster", String),
    column("environment_id", Integer),
    column("environment", String),
    column("environment_position", Integer),
    column("cluster_type_id", Integer),
    column("cluster_type", String),
    column("last_seen_at", DateTime(timezone=True)),
    column("object_id", BigInteger),
    column("reconciler", String),
    column("kind", String),
    column("namespace", String),
    column("name", String),
    column("source_url", String),
    column("source_ref", String),
    column("source_path", String),
    column("repository", String),
    column("branch", String),
    column("revision", String),
    column("applied_revision", String),
    column("applied_sha", String),
    column("head_sha", String),
    column("commits_behind", Integer),
    column("behind_since", DateTime(timezone=True)),
    column("ready", Boolean),
    column("reason", String),
    column("message", String),
    column("live_drift", Boolean),
    column("suspended", Boolean),
    column("config_mismatches", JSONB),
    column("reasons", ARRAY(String)),
)


# --- evaluation -------------------------------------------------------------------------------


async def repository_ids(session: AsyncSession) -> dict[str, int]:
    """Harvested repositories by normalised URL."""
    rows = await session.execute(select(Repository.url, Repository.id))
    return {url: repository_id for url, repository_id in rows}


# What the evaluation writes per object; compared with the stored row (in one hash join) to
# leave unchanged rows, most of them most of the time, untouched.
_JUDGED_COLUMNS = (
    "cluster_id",
    "reconciler",
    "kind",
    "namespace",
    "name",
    "source_url",
    "source_ref",
    "source_path",
    "branch_id",
    "revision",
    "applied_revision",
    "applied_sha",
    "head_sha",
    "commits_behind",
    "behind_since",
    "ready",
    "reason",
    "message",
    "live_drift",
    "suspended",
    "config_mismatches",
    "reasons",
)
_LIST = ", ".join(_JUDGED_COLUMNS)

# The applied commit `ac` descends from the head of branch `b`.
_AHEAD = reaches(
    "ac.id",
    repository="b.repository_id",
    floor="head.generation",
    settled="""COALESCE((
        SELECT true FROM branch_commit m WHERE m.commit_id = walk.id AND m.mainline LIMIT 1
    ), false)""",
    found="""walk.id = b.head_commit_id OR COALESCE((
                SELECT bool_or(h.position <= d.position) FROM branch_commit d
                JOIN branch_commit h
                  ON h.branch_id = d.branch_id AND h.commit_id = b.head_commit_id
                WHERE d.commit_id = walk.id AND d.mainline), false)""",
)


# The harvested repository each reported URL spelling stands for, as rows (`_spellings`).
_SPELLING = """WITH spelling AS (
    SELECT * FROM unnest(CAST(:spellings AS text[]), CAST(:repository_ids AS int[]))
        AS s(url, repository_id)
),"""


def _spellings(repositories: dict[str, int]) -> dict[str, list[Any]]:
    return {"spellings": list(repositories), "repository_ids": list(repositories.values())}


@dataclass(frozen=True, slots=True)
class _Selection:
    """Which objects an evaluation judges: the rows of object_state `o` (a FROM item) and a
    condition on the verdicts `d` it may drop, with the common table expressions they read."""

    objects: str
    verdicts: str
    ctes: str = ""


# How an object's applied revision compares with the head of the branch it follows. Commits are
# placed by their positions on the branch's first-parent chain (hub/git/ancestry.py): a
# member at position p that is not on the chain is an ancestor of chain commit p only, so the
# last chain commit it fully contains is p - 1. "ahead": the applied commit descends from the
# head: it lies on another harvested branch's chain at or after it, or its harvested parents
# lead there (a commit rewritten away by a force-push, as the gate reads it; _AHEAD). Platform
# config is compared, per assignment of the object's cluster type on the branch, between the
# revision valid at the applied position and the open one, for the (branch, cluster type,
# position) triples behind objects share rather than per object. `selection`: which objects
# are judged (_Selection). The verdicts are written in object order: the stored ones are then
# read before (or in step with) the writes, never again for each new verdict, which a plan
# made for an empty table did, as it filled up: 40 s instead of 1 s for 20,000 objects. The
# selection leads, and each object's cluster is looked up by it: a store with no statistics
# yet had the clusters read first, and the objects a round selects read again for each of
# their objects: 30 s or more for 20,000 objects, with ingest at 1,000 reports/s waiting.
def _evaluate(selection: _Selection) -> TextClause:
    return text(f"""
{_SPELLING}{selection.ctes}
tracking AS (
    SELECT o.id AS object_id, o.cluster_id, c.cluster_type_id, o.reconciler, o.kind,
           o.namespace, o.name, o.source_url, o.url_ref AS source_ref, o.source_path,
           o.applied_revision, o.applied_sha, o.applied_version, o.ready, o.reason, o.message,
           o.drifted AS live_drift, o.suspended
    FROM {selection.objects}
    CROSS JOIN LATERAL (
        SELECT c.cluster_type_id FROM cluster c
        WHERE c.id = o.cluster_id AND c.decommissioned_at IS NULL
    ) AS c
    WHERE o.removed_at IS NULL AND NOT (o.reconciler = 'flux' AND o.kind = ANY(:source_kinds))
),
judged AS MATERIALIZED (
    SELECT t.*, b.id AS branch_id, head.sha AS head_sha, hb.position AS head_position,
        CASE
            WHEN head.sha IS NULL THEN 'untracked'
            WHEN t.applied_sha IS NULL AND t.applied_revision IS NOT NULL
             AND t.applied_version IS NULL THEN 'unknown_revision'
            WHEN t.applied_sha IS NULL AND t.applied_revision IS NOT NULL THEN 'no_commit'
            WHEN t.applied_sha IS NULL THEN 'not_applied'
            WHEN ac.id = b.head_commit_id THEN 'at_head'
            WHEN ab.position IS NOT NULL THEN 'behind'
            WHEN ac.id IS NULL THEN 'unknown_revision'
            WHEN {_AHEAD} THEN 'ahead'
            ELSE 'diverged'
        END AS revision,
        ab.position - CASE WHEN ab.mainline THEN 0 ELSE 1 END AS applied_position
    FROM tracking t
    LEFT JOIN spelling sp ON sp.url = t.source_url
    LEFT JOIN git_branch b
      ON b.repository_id = sp.repository_id AND b.deleted_at IS NULL
     AND b.name = CASE WHEN t.source_ref LIKE 'refs/heads/%' THEN substr(t.source_ref, 12)
                       ELSE t.source_ref END
    LEFT JOIN git_commit head ON head.id = b.head_commit_id
    LEFT JOIN branch_commit hb ON hb.branch_id = b.id AND hb.commit_id = b.head_commit_id
    LEFT JOIN git_commit ac ON ac.repository_id = b.repository_id AND ac.sha = t.applied_sha
    LEFT JOIN branch_commit ab ON ab.branch_id = b.id AND ab.commit_id = ac.id
),
lagging AS (
    SELECT DISTINCT j.branch_id, j.cluster_type_id, j.applied_position
    FROM judged j
    WHERE j.revision = 'behind' AND j.cluster_type_id IS NOT NULL
      AND j.branch_id IN (SELECT branch_id FROM assignment)
),
mismatch AS (
    SELECT l.branch_id, l.cluster_type_id, l.applied_position,
           jsonb_agg(jsonb_build_object(
               'deployment_target', a.deployment_target_name,
               'applied_config_hash', applied.config_hash,
               'desired_config_hash', desired.config_hash,
               'keys', to_jsonb(ARRAY(
                   SELECT k.key FROM (
                       SELECT jsonb_object_keys(COALESCE(applied.config, '{{}}')) AS key
                       UNION SELECT jsonb_object_keys(desired.config)
                   ) k
                   WHERE applied.config -> k.key IS DISTINCT FROM desired.config -> k.key
                   ORDER BY k.key
               ))
           ) ORDER BY a.deployment_target_name) AS mismatches
    FROM lagging l
    JOIN cluster_type ct ON ct.id = l.cluster_type_id
    JOIN assignment a ON a.branch_id = l.branch_id AND a.cluster_type_name = ct.name
    JOIN assignment_revision desired
      ON desired.assignment_id = a.id AND desired.valid_until_commit_id IS NULL
    LEFT JOIN LATERAL (
        SELECT r.config_hash, r.config FROM assignment_revision r
        JOIN branch_commit f ON f.branch_id = a.branch_id AND f.commit_id = r.valid_from_commit_id
        LEFT JOIN branch_commit u
          ON u.branch_id = a.branch_id AND u.commit_id = r.valid_until_commit_id
        WHERE r.assignment_id = a.id AND f.position <= l.applied_position
          AND (r.valid_until_commit_id IS NULL OR u.position > l.applied_position)
        ORDER BY f.position DESC LIMIT 1
    ) applied ON true
    WHERE applied.config_hash IS DISTINCT FROM desired.config_hash
    GROUP BY l.branch_id, l.cluster_type_id, l.applied_position
),
evaluated AS MATERIALIZED (
    SELECT j.object_id, j.cluster_id, j.reconciler, j.kind, j.namespace, j.name, j.source_url,
           j.source_ref, j.source_path, j.branch_id, j.revision, j.applied_revision,
           j.applied_sha, j.head_sha,
           CASE WHEN j.revision = 'behind' THEN j.head_position - j.applied_position END
               AS commits_behind,
           missing.committed_at AS behind_since,
           j.ready, j.reason, j.message, j.live_drift, j.suspended,
           m.mismatches AS config_mismatches,
           array_remove(ARRAY[
               CASE WHEN j.revision IN ('behind', 'diverged', 'unknown_revision', 'not_applied')
                    THEN j.revision END,
               CASE WHEN j.ready IS FALSE THEN 'failing' END,
               CASE WHEN m.mismatches IS NOT NULL THEN 'config_mismatch' END,
               CASE WHEN j.live_drift THEN 'live_drift' END
           ]::varchar[], NULL) AS reasons
    FROM judged j
    LEFT JOIN LATERAL (
        SELECT mc.committed_at FROM branch_commit bc JOIN git_commit mc ON mc.id = bc.commit_id
        WHERE j.revision = 'behind' AND bc.branch_id = j.branch_id
          AND bc.position = j.applied_position + 1 AND bc.mainline
    ) missing ON true
    LEFT JOIN mismatch m
      ON j.revision = 'behind' AND m.branch_id = j.branch_id
     AND m.cluster_type_id = j.cluster_type_id AND m.applied_position = j.applied_position
),
written AS (
    INSERT INTO object_drift AS d (object_id, {_LIST}, changed_at)
    SELECT e.object_id, {", ".join(f"e.{name}" for name in _JUDGED_COLUMNS)}, :now
    FROM evaluated e
    LEFT JOIN object_drift stored ON stored.object_id = e.object_id
    WHERE stored.object_id IS NULL
       OR ({", ".join(f"stored.{name}" for name in _JUDGED_COLUMNS)})
          IS DISTINCT FROM ({", ".join(f"e.{name}" for name in _JUDGED_COLUMNS)})
    ORDER BY e.object_id
    ON CONFLICT (object_id) DO UPDATE SET
        {", ".join(f"{name} = EXCLUDED.{name}" for name in _JUDGED_COLUMNS)},
        changed_at = EXCLUDED.changed_at
    RETURNING d.cluster_id
),
dropped AS (
    DELETE FROM object_drift d
    WHERE {selection.verdicts}
      AND NOT EXISTS (SELECT 1 FROM evaluated e WHERE e.object_id = d.object_id)
    RETURNING d.cluster_id
)
SELECT (SELECT count(*) FROM evaluated) AS objects,
       (SELECT count(*) FROM written) AS changed,
       (SELECT count(*) FROM dropped) AS dropped,
       ARRAY(SELECT cluster_id FROM written UNION SELECT cluster_id FROM dropped) AS clusters
""")  # noqa: S608 - composed from constants, never from input


def _in_part(column: str) -> str:
    """SQL: the cluster id `column` lies in the part of the fleet [:first, :end)."""
    return f"{column} >= :first AND {column} < :end"


# Every object of the clusters of a part of the fleet.
_PART_OBJECTS = f"(SELECT * FROM object_state WHERE {_in_part('cluster_id')}) AS o"  # noqa: S608
_PART = _Selection(objects=_PART_OBJECTS, verdicts=_in_part("d.cluster_id"))
# The objects named by :objects (ids, ascending), those a round found changed (_TOUCHED).
_LISTED = _Selection(
    objects="unnest(CAST(:objects AS bigint[])) AS t (object_id) "
    "JOIN object_state o ON o.id = t.object_id",
    verdicts="d.object_id = ANY(CAST(:objects AS bigint[]))",
)

_EVALUATE_PART = _evaluate(_PART)
_EVALUATE_LISTED = _evaluate(_LISTED)

# The objects whose verdict may have changed since :since, by id: written by a report (their
# state, or their removal); following a repository whose branches the harvest moved, deleted or
# found again; of a live cluster placed since (in another environment or cluster type, which
# decides its platform config, or brought back into service by a new token: `placed_at`), or
# that the last count did not see as it is now (registered since, or placed elsewhere); and
# those of decommissioned clusters with a verdict, to drop. The count alone would miss a
# placement that commits during a round, after this statement and before the count, which
# records it already. What only time changes (staleness) is not in a verdict: the periods and
# events read it anew every round. The clusters are found first, then their objects (OFFSET 0):
# planned as a join, every object was read and then filtered.
_TOUCHED = text(f"""
{_SPELLING}
placed AS MATERIALIZED (
    SELECT c.id FROM cluster c
    LEFT JOIN cluster_drift n ON n.cluster_id = c.id
    WHERE c.decommissioned_at IS NULL
      AND (c.placed_at >= :since OR n.cluster_id IS NULL
           OR n.cluster_type_id IS DISTINCT FROM c.cluster_type_id)
)
SELECT o.id FROM object_state o WHERE o.written_at >= :since
UNION
SELECT o.id FROM spelling sp
CROSS JOIN LATERAL (
    SELECT o.id FROM object_state o WHERE o.source_url = sp.url OFFSET 0
) AS o
WHERE sp.repository_id IN (SELECT repository_id FROM git_branch WHERE changed_at >= :since)
UNION
SELECT o.id FROM placed p
CROSS JOIN LATERAL (
    SELECT o.id FROM object_state o WHERE o.cluster_id = p.id OFFSET 0
) AS o
UNION
SELECT d.object_id FROM cluster c JOIN object_drift d ON d.cluster_id = c.id
WHERE c.decommissioned_at IS NOT NULL
ORDER BY 1
""")  # noqa: S608 - composed from constants, never from input


@dataclass(frozen=True, slots=True)
class Evaluated:
    # Objects judged, verdicts written anew, verdicts dropped, and the clusters of those.
    objects: int
    changed: int
    dropped: int
    clusters: frozenset[int]

    def __add__(self, other: "Evaluated") -> "Evaluated":
        return Evaluated(
            self.objects + other.objects,
            self.changed + other.changed,
            self.dropped + other.dropped,
            self.clusters | other.clusters,
        )


@dataclass(frozen=True, slots=True)
class Part:
    """Every object of the clusters with first <= id < end."""

    first: int
    end: int


async def _without_jit(session: AsyncSession) -> None:
    """The round's statements read many rows once: compiling them (JIT) would cost more than it
    saves, 0.66 s for _TOUCHED at 10,000 clusters, when it finds nothing."""
    await session.execute(text("SET LOCAL jit = off"))


@dataclass(frozen=True, slots=True)
class Listed:
    """The objects with these ids (ascending)."""

    ids: Sequence[int]


async def touched(
    session: AsyncSession, *, repositories: dict[str, int], since: datetime
) -> list[int]:
    """The ids of the objects whose verdict may have changed since `since` (_TOUCHED),
    ascending; `repositories` as for evaluate()."""
    # Planned for its `since`: a prepared statement's generic plan, made for any, would read
    # every object rather than those written since.
    await plan_for_values(session)
    await _without_jit(session)
    found = await session.scalars(
        _TOUCHED,
        _spellings(repositories) | {"since": since},
    )
    return list(found)


async def evaluate(
    session: AsyncSession,
    *,
    repositories: dict[str, int],
    now: datetime,
    selection: Part | Listed,
) -> Evaluated:
    """Judge the live objects of the registered clusters that `selection` names;
    `repositories`: the harvested repository each reported URL spelling stands for."""
    await _without_jit(session)
    values: dict[str, Any] = _spellings(repositories) | {
        "source_kinds": list(FLUX_SOURCE_KINDS),
        "now": now,
    }
    if isinstance(selection, Part):
        statement = _EVALUATE_PART
        values |= {"first": selection.first, "end": selection.end}
    else:
        statement = _EVALUATE_LISTED
        values["objects"] = list(selection.ids)
    row = (await session.execute(statement, values)).one()
    return Evaluated(row.objects, row.changed, row.dropped, frozenset(row.clusters))


# Reasons the evaluation stores; staleness is the reader's.
STORED_REASONS = tuple(reason.value for reason in Reason if reason is not Reason.STALE)
_COUNTS = ("objects", "drifted", "untracked", *STORED_REASONS)
_TOTALS = ("rank", "cluster_type_id", *_COUNTS)


# Per registered cluster its place in a listing: by promotion order, cluster type and name,
# compared byte by byte (names are Kubernetes-style ASCII) since that is cheaper than a
# locale's rules; and its objects counted, anew for the clusters `recounted` names (the
# condition on a cluster id column) and those not counted yet, as they were for the others.
# Rows that did not change are left as they are.
def _count_clusters(recounted: Callable[[str], str]) -> TextClause:
    counts = ", ".join(
        f"CASE WHEN {recounted('c.id')} OR stored.cluster_id IS NULL "
        f"THEN COALESCE(r.{name}, 0) ELSE stored.{name} END AS {name}"
        for name in _COUNTS
    )
    return text(f"""
WITH recount AS MATERIALIZED (
    SELECT d.cluster_id, count(*)::int AS objects,
           (count(*) FILTER (WHERE d.reasons <> '{{}}'))::int AS drifted,
           (count(*) FILTER (WHERE d.revision = 'untracked'))::int AS untracked,
           {
        ", ".join(
            f"(count(*) FILTER (WHERE '{reason}' = ANY(d.reasons)))::int AS {reason}"
            for reason in STORED_REASONS
        )
    }
    FROM object_drift d
    WHERE {recounted("d.cluster_id")}
    GROUP BY d.cluster_id
),
counted AS MATERIALIZED (
    SELECT c.id AS cluster_id,
           (row_number() OVER (
               ORDER BY e.position NULLS LAST, e.name COLLATE "C" NULLS LAST,
                        ct.name COLLATE "C" NULLS LAST, c.name COLLATE "C"))::int AS rank,
           c.cluster_type_id, {counts}
    FROM cluster c
    LEFT JOIN environment e ON e.id = c.environment_id
    LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
    LEFT JOIN recount r ON r.cluster_id = c.id
    LEFT JOIN cluster_drift stored ON stored.cluster_id = c.id
    WHERE c.decommissioned_at IS NULL
),
written AS (
    INSERT INTO cluster_drift AS t (cluster_id, {", ".join(_TOTALS)})
    SELECT c.cluster_id, {", ".join(f"c.{name}" for name in _TOTALS)}
    FROM counted c
    LEFT JOIN cluster_drift stored ON stored.cluster_id = c.cluster_id
    WHERE stored.cluster_id IS NULL
       OR ({", ".join(f"stored.{name}" for name in _TOTALS)})
          IS DISTINCT FROM ({", ".join(f"c.{name}" for name in _TOTALS)})
    ON CONFLICT (cluster_id) DO UPDATE SET
        {", ".join(f"{name} = EXCLUDED.{name}" for name in _TOTALS)}
    RETURNING 1
)
DELETE FROM cluster_drift t
WHERE NOT EXISTS (SELECT 1 FROM counted c WHERE c.cluster_id = t.cluster_id)
""")  # noqa: S608 - composed from constants, never from input


# Per cluster `recounted` names, its objects counted per set of reasons.
def _count_reasons(recounted: Callable[[str], str]) -> TextClause:
    return text(f"""
WITH counted AS MATERIALIZED (
    SELECT d.cluster_id, d.reasons, count(*)::int AS objects
    FROM object_drift d
    WHERE {recounted("d.cluster_id")}
    GROUP BY d.cluster_id, d.reasons
),
written AS (
    INSERT INTO cluster_drift_reasons AS t (cluster_id, reasons, objects)
    SELECT c.cluster_id, c.reasons, c.objects
    FROM counted c
    LEFT JOIN cluster_drift_reasons stored
      ON stored.cluster_id = c.cluster_id AND stored.reasons = c.reasons
    WHERE stored.objects IS DISTINCT FROM c.objects
    ON CONFLICT (cluster_id, reasons) DO UPDATE SET objects = EXCLUDED.objects
    RETURNING 1
)
DELETE FROM cluster_drift_reasons t
WHERE {recounted("t.cluster_id")} AND NOT EXISTS (
    SELECT 1 FROM counted c WHERE c.cluster_id = t.cluster_id AND c.reasons = t.reasons
)
""")  # noqa: S608 - composed from constants, never from input


def _every(column: str) -> str:
    return "true"


def _listed(column: str) -> str:
    return f"{column} = ANY(CAST(:clusters AS int[]))"


_COUNT_EVERY = (_count_clusters(_every), _count_reasons(_every))
_COUNT_LISTED = (_count_clusters(_listed), _count_reasons(_listed))


# `cluster_drift` summed per environment and cluster type, anew (a row per cluster type).
_TOTALS_SQL = text(f"""
WITH cleared AS (DELETE FROM drift_total)
INSERT INTO drift_total (
    environment_id, cluster_type_id, clusters, first_rank, last_rank, drifted,
    drifted_clusters, untracked, {", ".join(STORED_REASONS)})
SELECT c.environment_id, c.cluster_type_id, count(*), min(d.rank), max(d.rank), sum(d.drifted),
       count(*) FILTER (WHERE d.drifted > 0), sum(d.untracked),
       {", ".join(f"sum(d.{reason})" for reason in STORED_REASONS)}
FROM cluster_drift d JOIN cluster c ON c.id = d.cluster_id
GROUP BY c.environment_id, c.cluster_type_id
""")  # noqa: S608 - composed from constants, never from input


async def count_per_cluster(session: AsyncSession, clusters: Collection[int] | None) -> None:
    """Bring `cluster_drift`, `cluster_drift_reasons` and `drift_total` in line with
    `object_drift`, whose rows changed for `clusters` only (None: any)."""
    if clusters is None:
        statements, values = _COUNT_EVERY, {}
    else:
        statements, values = _COUNT_LISTED, {"clusters": sorted(clusters)}
    for statement in statements:
        await session.execute(statement, values)
    await session.execute(_TOTALS_SQL)


# Drifted now: objects with a reason, every object of a stale cluster, and each cluster with a
# drifted object or a stale agent (object_id NULL), of the clusters `covered` says (a condition
# on a column naming a cluster). Open periods of what is no longer drifted close, new ones
# open, and open ones gain the reasons they had not seen yet.
def _periods(covered: Callable[[str], str]) -> TextClause:
    return text(f"""
WITH stale AS (
    SELECT id FROM cluster
    WHERE {covered("id")} AND decommissioned_at IS NULL
      AND (last_seen_at IS NULL OR last_seen_at < :stale_before)
),
drifted_object AS (
    SELECT d.cluster_id, d.object_id,
           CASE WHEN s.id IS NULL THEN d.reasons
                ELSE d.reasons || ARRAY['stale']::varchar[] END AS reasons
    FROM object_drift d
    LEFT JOIN stale s ON s.id = d.cluster_id
    WHERE {covered("d.cluster_id")} AND (d.reasons <> '{{}}' OR s.id IS NOT NULL)
),
current AS MATERIALIZED (
    SELECT cluster_id, object_id, reasons FROM drifted_object
    UNION ALL
    SELECT cluster_id, NULL::bigint, array_agg(DISTINCT reason)::varchar[]
    FROM (
        SELECT cluster_id, unnest(reasons) AS reason FROM drifted_object
        UNION ALL
        SELECT id, 'stale' FROM stale
    ) r
    GROUP BY cluster_id
),
open AS MATERIALIZED (
    SELECT id, cluster_id, COALESCE(object_id, 0) AS subject, reasons
    FROM drift_period WHERE {covered("cluster_id")} AND ended_at IS NULL
),
closed AS (
    UPDATE drift_period p SET ended_at = :now
    FROM open o
    WHERE p.id = o.id AND NOT EXISTS (
        SELECT 1 FROM current c
        WHERE c.cluster_id = o.cluster_id AND COALESCE(c.object_id, 0) = o.subject
    )
    RETURNING 1
),
widened AS (
    UPDATE drift_period p SET reasons = ARRAY(
        SELECT r FROM unnest(o.reasons || c.reasons) r
        GROUP BY r ORDER BY array_position(CAST(:order AS varchar[]), r)
    )
    FROM open o
    JOIN current c ON c.cluster_id = o.cluster_id AND COALESCE(c.object_id, 0) = o.subject
    WHERE p.id = o.id AND NOT o.reasons @> c.reasons
    RETURNING 1
),
opened AS (
    INSERT INTO drift_period (cluster_id, object_id, started_at, reasons)
    SELECT c.cluster_id, c.object_id, :now, ARRAY(
        SELECT r FROM unnest(c.reasons) r ORDER BY array_position(CAST(:order AS varchar[]), r)
    )
    FROM current c
    WHERE NOT EXISTS (
        SELECT 1 FROM open o
        WHERE o.cluster_id = c.cluster_id AND o.subject = COALESCE(c.object_id, 0)
    )
    RETURNING 1
)
SELECT (SELECT count(*) FROM opened) AS opened,
       (SELECT count(*) FROM closed) AS closed,
       (SELECT count(*) FROM widened) AS widened
""")  # noqa: S608 - composed from constants, never from input


_PERIODS_PART = _periods(_in_part)
_PERIODS_LISTED = _periods(_listed)


@dataclass(frozen=True, slots=True)
class PeriodChanges:
    opened: int
    closed: int
    widened: int

    def __add__(self, other: "PeriodChanges") -> "PeriodChanges":
        return PeriodChanges(
            self.opened + other.opened, self.closed + other.closed, self.widened + other.widened
        )


async def record_periods(
    session: AsyncSession,
    *,
    now: datetime,
    stale_before: datetime,
    order: Sequence[str],
    clusters: Part | Sequence[int],
) -> PeriodChanges:
    """Bring the drift periods of `clusters` (a part of the fleet, or cluster ids) in line
    with `object_drift` and the agents' staleness at `now`; `order`: the order reasons are
    listed in."""
    values: dict[str, Any] = {"now": now, "stale_before": stale_before, "order": list(order)}
    if isinstance(clusters, Part):
        statement = _PERIODS_PART
        values |= {"first": clusters.first, "end": clusters.end}
    else:
        statement = _PERIODS_LISTED
        values["clusters"] = list(clusters)
    row = (await session.execute(statement, values)).one()
    return PeriodChanges(**row._asdict())


# The clusters whose periods may be due a change though no verdict of theirs changed:
# - stale now and not at the last round, which counted those stale before :stale_before_then:
#   their last report fell behind since, or no open period of theirs says they are stale
#   (registered since, or their periods ended as they were placed elsewhere);
# - not stale now, where an open period of theirs says they were. A period keeps every reason
#   it had, so a cluster stale once stays listed, each round, until its drift ends;
# - with drifted objects and no open period: their periods ended as they were placed
#   elsewhere, whatever the round judged.
_PERIODS_DUE = text("""
WITH held AS MATERIALIZED (
    SELECT cluster_id, bool_or('stale' = ANY(reasons)) AS stale
    FROM drift_period
    WHERE ended_at IS NULL AND object_id IS NULL
    GROUP BY cluster_id
)
SELECT c.id FROM cluster c
LEFT JOIN held h ON h.cluster_id = c.id
LEFT JOIN cluster_drift d ON d.cluster_id = c.id
WHERE CASE WHEN c.decommissioned_at IS NULL
                AND (c.last_seen_at IS NULL OR c.last_seen_at < :stale_before)
           THEN h.stale IS NOT TRUE OR c.last_seen_at >= :stale_before_then
           ELSE h.stale OR (h.cluster_id IS NULL AND d.drifted > 0) END
""")


async def periods_due(
    session: AsyncSession, *, stale_before: datetime, stale_before_then: datetime
) -> list[int]:
    """The ids of the clusters whose periods may be due a change though no verdict of theirs
    changed, since a round that counted those stale before `stale_before_then`
    (_PERIODS_DUE)."""
    found = await session.scalars(
        _PERIODS_DUE, {"stale_before": stale_before, "stale_before_then": stale_before_then}
    )
    return list(found)


async def end_open_periods(session: AsyncSession, cluster_id: int, now: datetime) -> None:
    """End a cluster's open periods at `now` (it was placed elsewhere): drift counts in its
    new place from then on, as the next evaluation opens what is still drifted."""
    await session.execute(
        update(DriftPeriod)
        .where(DriftPeriod.cluster_id == cluster_id, DriftPeriod.ended_at.is_(None))
        .values(ended_at=now)
    )


async def judged_totals(session: AsyncSession) -> tuple[int, int]:
    """The registered clusters' judged objects, and how many of them are drifted, as
    `count_per_cluster` counted them."""
    row = (
        await session.execute(
            select(
                func.coalesce(func.sum(ClusterDrift.objects), 0),
                func.coalesce(func.sum(ClusterDrift.drifted), 0),
            )
        )
    ).one()
    return int(row[0]), int(row[1])


async def last_evaluation(session: AsyncSession) -> DriftEvaluation | None:
    """The last run: when, with which stale-after, and when it last judged every object."""
    found: DriftEvaluation | None = await session.scalar(
        select(DriftEvaluation).where(DriftEvaluation.id == 1)
    )
    return found


async def set_evaluated(
    session: AsyncSession, now: datetime, *, full: bool, stale_after: timedelta
) -> None:
    """Record a run at `now` with that stale-after; with `full`, one that judged every
    object."""
    values: dict[str, Any] = {"evaluated_at": now, "stale_after": stale_after}
    if full:
        values["full_at"] = now
    statement = insert(DriftEvaluation).values(id=1, **values)
    await session.execute(
        statement.on_conflict_do_update(index_elements=[DriftEvaluation.id], set_=values)
    )


async def evaluated_at(session: AsyncSession) -> datetime | None:
    found: datetime | None = await session.scalar(
        select(DriftEvaluation.evaluated_at).where(DriftEvaluation.id == 1)
    )
    return found


# --- scope ------------------------------------------------------------------------------------


async def cluster_type_ids(session: AsyncSession, name: str, environment: int | None) -> list[int]:
    statement = select(ClusterType.id).where(ClusterType.name == name)
    if environment is not None:
        statement = statement.where(ClusterType.environment_id == environment)
    return list(await session.scalars(statement))


async def cluster_id(session: AsyncSession, name: str) -> int | None:
    found: int | None = await session.scalar(select(Cluster.id).where(Cluster.name == name))
    return found


@dataclass(frozen=True, slots=True)
class Scope:
    """Which clusters a drift query looks at, by id (None: any)."""

    environment_id: int | None = None
    cluster_type_ids: Sequence[int] | None = None
    cluster_id: int | None = None


def _placed(scope: Scope) -> list[ColumnElement[bool]]:
    filters: list[ColumnElement[bool]] = [Cluster.decommissioned_at.is_(None)]
    if scope.environment_id is not None:
        filters.append(Cluster.environment_id == scope.environment_id)
    if scope.cluster_type_ids is not None:
        filters.append(Cluster.cluster_type_id.in_(scope.cluster_type_ids))
    if scope.cluster_id is not None:
        filters.append(Cluster.id == scope.cluster_id)
    return filters


# --- current drift ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DriftFilter:
    scope: Scope
    stale_before: datetime
    # Any of these; None: every drifted row.
    reasons: Sequence[str] | None = None
    include_in_sync: bool = False


def _stale(last_seen_at: Any, stale_before: datetime) -> ColumnElement[bool]:
    return or_(last_seen_at.is_(None), last_seen_at < stale_before)


def _matches(reasons: Any, stale: ColumnElement[bool], criteria: DriftFilter) -> Any:
    """Whether a row (or a set of rows sharing `reasons`) is listed: drifted (a reason, or
    its agent stale); with `include_in_sync` every row; with reasons, rows with any of them."""
    if criteria.reasons is not None:
        wanted = [reason for reason in criteria.reasons if reason != "stale"]
        return or_(
            reasons.overlap(cast(wanted, ARRAY(String(32)))) if wanted else false(),
            stale if "stale" in criteria.reasons else false(),
        )
    if criteria.include_in_sync:
        return true()
    return or_(func.cardinality(reasons) > 0, stale)


def _groups(criteria: DriftFilter) -> Any:
    """Per cluster in scope: its listed rows, drifted rows, rows per reason, untracked objects
    and its rank in the listing. A cluster without judged objects stands as one row without
    reasons (listed when its agent is stale: one that never reported, for instance)."""
    totals = ClusterDrift
    stale = _stale(Cluster.last_seen_at, criteria.stale_before)
    whole = func.greatest(func.coalesce(totals.objects, 0), 1)
    columns = (
        Cluster.id.label("cluster_id"),
        Cluster.environment_id,
        Cluster.name,
        totals.rank,
    )
    if criteria.reasons is None:
        drifted = case((stale, whole), else_=func.coalesce(totals.drifted, 0))
        stored = {reason: func.coalesce(getattr(totals, reason), 0) for reason in STORED_REASONS}
        return (
            select(
                *columns,
                (whole if criteria.include_in_sync else drifted).label("rows"),
                drifted.label("drifted"),
                func.coalesce(totals.untracked, 0).label("untracked"),
                *(value.label(reason) for reason, value in stored.items()),
                case((stale, whole), else_=0).label("stale"),
            )
            .outerjoin(totals, totals.cluster_id == Cluster.id)
            .where(*_placed(criteria.scope))
        )
    # Filtered by reason: the clusters' sets of reasons that match, summed per cluster, then
    # joined to every cluster in scope (so untracked objects and environments count alike).
    sets = ClusterDriftReasons
    has_reason = {
        reason: literal(reason, String) == any_(sets.reasons) for reason in STORED_REASONS
    }
    matched = (
        select(
            sets.cluster_id,
            func.sum(sets.objects).label("rows"),
            *(
                func.sum(sets.objects).filter(where).label(reason)
                for reason, where in has_reason.items()
            ),
            func.sum(sets.objects).filter(stale).label("stale"),
        )
        .join(Cluster, Cluster.id == sets.cluster_id)
        .where(*_placed(criteria.scope), _matches(sets.reasons, stale, criteria))
        .group_by(sets.cluster_id)
        .subquery("matched")
    )
    # A silent cluster without judged objects is one row, with no reason but stale.
    alone = and_(
        func.coalesce(totals.objects, 0) == 0,
        _matches(cast([], ARRAY(String(32))), stale, criteria),
    )
    rows = func.coalesce(matched.c.rows, case((alone, 1), else_=0))
    return (
        select(
            *columns,
            rows.label("rows"),
            rows.label("drifted"),
            func.coalesce(totals.untracked, 0).label("untracked"),
            *(func.coalesce(matched.c[reason], 0).label(reason) for reason in STORED_REASONS),
            func.coalesce(matched.c.stale, case((alone, 1), else_=0)).label("stale"),
        )
        .outerjoin(totals, totals.cluster_id == Cluster.id)
        .outerjoin(matched, matched.c.cluster_id == Cluster.id)
        .where(*_placed(criteria.scope))
    )


@dataclass(frozen=True, slots=True)
class PageCluster:
    id: int
    # Listed rows of the clusters before it, in the listing's order.
    before: int


@dataclass(frozen=True, slots=True)
class Listing:
    # Per environment, in promotion order: listed rows, clusters with listed rows, drifted
    # ones, rows per reason, untracked objects.
    counts: list[dict[str, Any]]
    # The clusters whose rows fall on the page, in the listing's order.
    page: list[PageCluster]


def _object(values: dict[str, Any]) -> Any:
    return func.jsonb_build_object(
        *(part for name, value in values.items() for part in (literal(name), value))
    )


# The listing without filters (drifted rows of the clusters in scope, an environment or some
# of its cluster types at most), from the job's totals. Which clusters are in scope, and
# where, is as the last evaluation placed them (a range of ranks per environment and cluster
# type in `drift_total`), as their reasons are; clusters registered since then have no rank
# and count as they are placed now. Per environment: what `drift_total` holds, with every
# stale cluster's rows made every row of it (its agent is stale now, whatever its objects).
# The page: the drifted clusters by rank within those ranges (ix_cluster_drift_drifted), and
# the stale ones. OFFSET 0 keeps each lookup a lookup: planned as joins, on guesses of how many
# clusters there are, they became passes over every cluster.
_LISTED_FROM_TOTALS = text(f"""
WITH scope AS MATERIALIZED (
    SELECT t.* FROM drift_total t
    WHERE (CAST(:environment AS int) IS NULL OR t.environment_id = :environment)
      AND (CAST(:cluster_types AS int[]) IS NULL OR t.cluster_type_id = ANY(:cluster_types))
),
silent AS MATERIALIZED (
    SELECT c.id, c.name, c.environment_id, c.cluster_type_id, c.decommissioned_at
    FROM cluster c WHERE c.last_seen_at IS NULL OR c.last_seen_at < :stale_before
),
stale AS MATERIALIZED (
    SELECT c.id AS cluster_id, c.name, d.rank,
           CASE WHEN d.rank IS NULL THEN c.environment_id ELSE s.environment_id END
               AS environment_id,
           GREATEST(COALESCE(d.objects, 0), 1) AS rows, COALESCE(d.drifted, 0) AS drifted
    FROM silent c
    LEFT JOIN LATERAL (
        SELECT * FROM cluster_drift WHERE cluster_id = c.id OFFSET 0
    ) AS d ON true
    LEFT JOIN LATERAL (
        SELECT * FROM scope WHERE d.rank BETWEEN scope.first_rank AND scope.last_rank OFFSET 0
    ) AS s ON true
    WHERE CASE WHEN d.rank IS NULL
               THEN c.decommissioned_at IS NULL
                    AND (CAST(:environment AS int) IS NULL OR c.environment_id = :environment)
                    AND (CAST(:cluster_types AS int[]) IS NULL
                         OR c.cluster_type_id = ANY(:cluster_types))
               ELSE s.id IS NOT NULL END
),
counted AS (
    SELECT environment_id, sum(rows) AS rows, sum(clusters) AS clusters,
           sum(untracked) AS untracked,
           {", ".join(f"sum({reason}) AS {reason}" for reason in STORED_REASONS)},
           sum(stale) AS stale
    FROM (
        SELECT environment_id, drifted AS rows, drifted_clusters AS clusters, untracked,
               {", ".join(STORED_REASONS)}, 0 AS stale
        FROM scope
        UNION ALL
        SELECT environment_id, rows - drifted, CASE WHEN drifted = 0 THEN 1 ELSE 0 END, 0,
               {", ".join("0" for _ in STORED_REASONS)}, rows
        FROM stale
    ) AS parts
    GROUP BY environment_id
),
listed AS (
    SELECT d.cluster_id, d.rank, c.name, d.drifted AS rows
    FROM scope s
    CROSS JOIN LATERAL (
        SELECT * FROM cluster_drift
        WHERE rank BETWEEN s.first_rank AND s.last_rank AND drifted > 0 OFFSET 0
    ) AS d
    CROSS JOIN LATERAL (SELECT * FROM cluster WHERE id = d.cluster_id OFFSET 0) AS c
    WHERE c.last_seen_at >= :stale_before
    UNION ALL
    SELECT cluster_id, rank, name, rows FROM stale
),
running AS (
    SELECT cluster_id, rows,
           sum(rows) OVER (ORDER BY rank NULLS LAST, name COLLATE "C") AS through
    FROM listed
)
SELECT 'count' AS part,
       jsonb_build_object(
           'environment', e.name, 'position', e.position, 'rows', n.rows,
           'clusters', n.clusters, 'drifted', n.rows, 'drifted_clusters', n.clusters,
           'untracked', n.untracked, 'stale', n.stale,
           {", ".join(f"'{reason}', n.{reason}" for reason in STORED_REASONS)}) AS data
FROM counted n LEFT JOIN environment e ON e.id = n.environment_id
UNION ALL
SELECT 'page', jsonb_build_object('id', cluster_id, 'before', through - rows)
FROM running
WHERE through > :offset AND through - rows < :offset + :limit
""")  # noqa: S608 - composed from constants, never from input


async def drift_listing(
    session: AsyncSession, criteria: DriftFilter, *, limit: int, offset: int
) -> Listing:
    """Counts and the page's clusters in one statement: the page is where the running count
    of listed rows, in listing order, crosses [offset, offset + limit). Without filters but
    scope, from the job's totals (_LISTED_FROM_TOTALS); otherwise from one pass over the
    clusters in scope."""
    scope = criteria.scope
    if criteria.reasons is None and not criteria.include_in_sync and scope.cluster_id is None:
        rows = await session.execute(
            _LISTED_FROM_TOTALS,
            {
                "environment": scope.environment_id,
                "cluster_types": None
                if scope.cluster_type_ids is None
                else list(scope.cluster_type_ids),
                "stale_before": criteria.stale_before,
                "offset": offset,
                "limit": limit,
            },
        )
        return _listing(rows)
    groups = _groups(criteria).cte("groups")
    sums = ("rows", "drifted", "untracked", *STORED_REASONS, "stale")
    counts = (
        select(
            literal("count").label("part"),
            _object(
                {
                    "environment": Environment.name,
                    "position": Environment.position,
                    "clusters": func.count().filter(groups.c.rows > 0),
                    "drifted_clusters": func.count().filter(groups.c.drifted > 0),
                    **{name: func.sum(groups.c[name]) for name in sums},
                }
            ).label("data"),
        )
        .select_from(groups)
        .outerjoin(Environment, Environment.id == groups.c.environment_id)
        .group_by(Environment.name, Environment.position)
    )
    # Clusters registered since the last evaluation have no rank yet: they come last.
    running = (
        select(
            groups.c.cluster_id,
            groups.c.rows,
            func.sum(groups.c.rows)
            .over(order_by=(groups.c.rank.asc().nulls_last(), groups.c.name.collate("C")))
            .label("through"),
        )
        .where(groups.c.rows > 0)
        .subquery("running")
    )
    before = running.c.through - running.c.rows
    page = select(
        literal("page").label("part"),
        _object({"id": running.c.cluster_id, "before": before}).label("data"),
    ).where(running.c.through > offset, before < offset + limit)
    return _listing(await session.execute(union_all(counts, page)))


def _listing(rows: Any) -> Listing:
    found = Listing([], [])
    for row in rows:
        data: dict[str, Any] = row.data
        if row.part == "count":
            found.counts.append(data)
        else:
            found.page.append(PageCluster(data["id"], data["before"]))
    found.counts.sort(key=_promotion_order)
    found.page.sort(key=lambda cluster: cluster.before)
    return found


def _promotion_order(counts: dict[str, Any]) -> tuple[bool, int, bool, str]:
    """Declared order first, then by name; clusters placed in no environment last."""
    position, name = counts["position"], counts["environment"]
    return position is None, position or 0, name is None, name or ""


async def drift_rows(
    session: AsyncSession, criteria: DriftFilter, cluster_ids: Sequence[int]
) -> Any:
    """The listed drift_object rows of those clusters, in their order, then by object."""
    view = drift_object
    stale = _stale(view.c.last_seen_at, criteria.stale_before)
    # One array, not a list of values: the statement reads the same for any page, so the
    # connection prepares it once instead of planning the view anew for every request.
    ids = cast(list(cluster_ids), ARRAY(Integer))
    statement = (
        select(view)
        .where(view.c.cluster_id == any_(ids), _matches(view.c.reasons, stale, criteria))
        .order_by(
            func.array_position(ids, view.c.cluster_id),
            view.c.reconciler.nulls_first(),
            view.c.kind,
            view.c.namespace,
            view.c.name,
        )
    )
    return (await session.execute(statement)).mappings().all()


def _open_since(stale: ColumnElement[bool]) -> ColumnElement[Any]:
    """When the open drift period of a drifted row began: its object's, or for a row without
    an object its cluster's (as `open_since` reads them)."""
    view, p = drift_object, DriftPeriod
    objects = select(func.min(p.started_at)).where(
        p.ended_at.is_(None), p.object_id == view.c.object_id
    )
    clusters = select(func.min(p.started_at)).where(
        p.ended_at.is_(None), p.object_id.is_(None), p.cluster_id == view.c.cluster_id
    )
    drifted = or_(func.cardinality(view.c.reasons) > 0, stale)
    return case(
        (drifted & view.c.object_id.is_(None), clusters.scalar_subquery()),
        (drifted, objects.scalar_subquery()),
    )


def _reason_places(stale: ColumnElement[bool]) -> ColumnElement[Any]:
    """A row's reasons, stale included, as their places in Reason, ascending: rows compare by
    their first reason, then their next, as their lists of reasons read."""
    reasons = drift_object.c.reasons
    places = [
        case((stale if reason is Reason.STALE else literal(reason.value) == any_(reasons), place))
        for place, reason in enumerate(Reason)
    ]
    return func.array_remove(array(places), None)


# The columns a drift listing sorts by, each as what it orders drift_object rows by (given
# whether a row's agent is stale). Either way None comes last, and ties keep the listing's
# own order.
DRIFT_SORTS: Mapping[str, Callable[[ColumnElement[bool]], list[Any]]] = {
    "cluster": lambda _: [drift_object.c.cluster.collate("C")],
    "placement": lambda _: [
        drift_object.c.environment_position,
        drift_object.c.environment.collate("C"),
        drift_object.c.cluster_type.collate("C"),
    ],
    "object": lambda _: [drift_object.c.kind, drift_object.c.name],
    "drifted_since": lambda stale: [_open_since(stale)],
    "reasons": lambda stale: [_reason_places(stale)],
}


async def sorted_rows(
    session: AsyncSession,
    criteria: DriftFilter,
    cluster_ids: Sequence[int],
    order: Order,
    *,
    limit: int,
    offset: int,
) -> Any:
    """A page of the listed drift_object rows of those clusters (every cluster with rows
    listed) in `order`, ties in the listing's own: its clusters by rank, then by object.

    Unlike the listing's own order, which pages by the clusters' counts, this reads every
    object of the clusters listed: its cost follows their objects. Their sort keys alone are
    sorted, then the page's rows read: sorting whole rows, a page far down a fleet's 120,000
    objects took twice as long (0.5 s against 0.25 s), its sort spilling to disk.
    """
    view = drift_object
    stale = _stale(view.c.last_seen_at, criteria.stale_before)
    chosen = [] if order.column is None else DRIFT_SORTS[order.column](stale)
    # (key, descending, NULLS FIRST)
    keys: list[tuple[Any, bool, bool]] = [
        *((key, order.descending, False) for key in chosen),
        (ClusterDrift.rank, False, False),
        (view.c.cluster.collate("C"), False, False),
        (view.c.reconciler, False, True),
        (view.c.kind, False, False),
        (view.c.namespace, False, False),
        (view.c.name, False, False),
        (view.c.object_id, False, False),
    ]

    def ordered(values: Sequence[Any]) -> list[Any]:
        found = []
        for value, (_, descending, nulls_first) in zip(values, keys, strict=True):
            directed = value.desc() if descending else value.asc()
            found.append(directed.nulls_first() if nulls_first else directed.nulls_last())
        return found

    page = (
        select(
            view.c.cluster_id,
            view.c.object_id,
            *(key.label(f"key_{index}") for index, (key, _, _) in enumerate(keys)),
        )
        .outerjoin(ClusterDrift, ClusterDrift.cluster_id == view.c.cluster_id)
        .where(
            view.c.cluster_id == any_(cast(list(cluster_ids), ARRAY(Integer))),
            _matches(view.c.reasons, stale, criteria),
        )
        .order_by(*ordered([key for key, _, _ in keys]))
        .limit(limit)
        .offset(offset)
        .subquery("page")
    )
    # Each row looked up by its cluster, through the view's indexes (OFFSET 0: planned as a
    # join, the lookup became a pass over the view).
    row = (
        select(view)
        .where(
            view.c.cluster_id == page.c.cluster_id,
            view.c.object_id.is_not_distinct_from(page.c.object_id),
        )
        .offset(0)
        .lateral("row")
    )
    statement = (
        select(row)
        .select_from(page)
        .join(row, true())
        .order_by(*ordered([page.c[f"key_{index}"] for index in range(len(keys))]))
    )
    return (await session.execute(statement)).mappings().all()


async def open_since(
    session: AsyncSession, object_ids: Sequence[int], cluster_ids: Sequence[int]
) -> tuple[dict[int, datetime], dict[int, datetime]]:
    """Start of the open drift period of those objects, and of those clusters."""
    p = DriftPeriod
    objects = select(p.object_id, p.cluster_id, p.started_at).where(
        p.ended_at.is_(None), p.object_id == any_(cast(list(object_ids), ARRAY(BigInteger)))
    )
    clusters = select(p.object_id, p.cluster_id, p.started_at).where(
        p.ended_at.is_(None),
        p.object_id.is_(None),
        p.cluster_id == any_(cast(list(cluster_ids), ARRAY(Integer))),
    )
    found_objects: dict[int, datetime] = {}
    found_clusters: dict[int, datetime] = {}
    for object_id, cluster_id, started_at in await session.execute(union_all(objects, clusters)):
        if object_id is None:
            found_clusters[cluster_id] = started_at
        else:
            found_objects[object_id] = started_at
    return found_objects, found_clusters


# --- history ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    scope: Scope
    objects: bool
    since: datetime | None
    # None: now, and every period begun by then counts, one begun this very moment too.
    until: datetime | None
    now: datetime
    open_only: bool = False


def _history_filters(criteria: HistoryFilter) -> list[ColumnElement[bool]]:
    p = DriftPeriod
    filters = [
        *_placed(criteria.scope),
        p.object_id.is_not(None) if criteria.objects else p.object_id.is_(None),
    ]
    if criteria.until is not None:
        filters.append(p.started_at < criteria.until)
    if criteria.since is not None:
        filters.append(or_(p.ended_at.is_(None), p.ended_at > criteria.since))
    if criteria.open_only:
        filters.append(p.ended_at.is_(None))
    return filters


def _overlap(criteria: HistoryFilter) -> ColumnElement[Any]:
    """Seconds of a period within [since, until), an open period lasting until now."""
    p = DriftPeriod
    end = func.least(func.coalesce(p.ended_at, criteria.now), criteria.until or criteria.now)
    start = p.started_at if criteria.since is None else func.greatest(p.started_at, criteria.since)
    return func.greatest(func.extract("epoch", end - start), 0)


async def history_subjects(
    session: AsyncSession, criteria: HistoryFilter, *, limit: int, offset: int
) -> Any:
    """A page of clusters (or objects) with a period in the range, with their drifted time in
    it, and how many there are in all."""
    p = DriftPeriod
    identity = (
        ObjectState.reconciler,
        ObjectState.kind,
        ObjectState.namespace,
        ObjectState.name,
    )
    statement = (
        select(
            p.cluster_id,
            p.object_id,
            Cluster.name.label("cluster"),
            Environment.name.label("environment"),
            ClusterType.name.label("cluster_type"),
            *identity,
            func.sum(_overlap(criteria)).label("drifted_seconds"),
            func.bool_or(p.ended_at.is_(None)).label("open"),
        )
        .join(Cluster, Cluster.id == p.cluster_id)
        .outerjoin(Environment, Environment.id == Cluster.environment_id)
        .outerjoin(ClusterType, ClusterType.id == Cluster.cluster_type_id)
        .outerjoin(ObjectState, ObjectState.id == p.object_id)
        .where(*_history_filters(criteria))
        .group_by(
            p.cluster_id,
            p.object_id,
            Cluster.name,
            Environment.position,
            Environment.name,
            ClusterType.name,
            *identity,
        )
        .order_by(
            Environment.position.asc().nulls_last(),
            Environment.name.asc().nulls_last(),
            ClusterType.name.asc().nulls_last(),
            Cluster.name,
            *(part.nulls_first() for part in identity),
        )
        .limit(limit)
        .offset(offset)
    )
    return (await session.execute(statement)).mappings().all()


async def history_total(session: AsyncSession, criteria: HistoryFilter) -> int:
    p = DriftPeriod
    subjects = (
        select(p.cluster_id, p.object_id)
        .join(Cluster, Cluster.id == p.cluster_id)
        .where(*_history_filters(criteria))
        .distinct()
        .subquery()
    )
    return await session.scalar(select(func.count()).select_from(subjects)) or 0


async def history_periods(
    session: AsyncSession, criteria: HistoryFilter, subjects: Sequence[tuple[int, int | None]]
) -> Any:
    """The periods in the range of those (cluster id, object id) subjects, newest first."""
    p = DriftPeriod
    keys = [(cluster, item or 0) for cluster, item in subjects]
    statement = (
        select(p.cluster_id, p.object_id, p.started_at, p.ended_at, p.reasons)
        .join(Cluster, Cluster.id == p.cluster_id)
        .where(
            *_history_filters(criteria),
            tuple_(p.cluster_id, func.coalesce(p.object_id, 0)).in_(keys),
        )
        .order_by(p.started_at.desc(), p.id.desc())
    )
    return (await session.execute(statement)).mappings().all() if keys else []


_CLUSTERS = text("""
SELECT e.name AS environment, c.name AS cluster, t.name AS cluster_type,
       COALESCE(d.drifted, 0) > 0 AS drifted,
       COALESCE(c.last_seen_at < :stale_before, false) AS stale
FROM cluster c
JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type t ON t.id = c.cluster_type_id
LEFT JOIN cluster_drift d ON d.cluster_id = c.id
WHERE c.decommissioned_at IS NULL
ORDER BY e.name, c.name
""")


async def cluster_standing(session: AsyncSession, stale_before: datetime) -> Sequence[Row[Any]]:
    """Every placed live cluster: its environment and cluster type, whether an object of it is
    drifted (as `cluster_drift` counted), and whether its agent is stale (a cluster that never
    reported is not: it has no report to go silent after)."""
    return (await session.execute(_CLUSTERS, {"stale_before": stale_before})).all()
