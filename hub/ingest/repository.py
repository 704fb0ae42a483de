"""SQL of the ingest path: reports that arrive together are applied by one set-based statement.

A report travels to the statement as a JSON array of its values in ReportRow order (a part of a
snapshot adds SnapshotPartRow's), its records nested in it as arrays in RecordRow order: no keys
to send and parse. Those rows are the one ordered definition of each: the statement's column
lists and casts are made from their fields. hub/ingest/batcher.py sends the reports that queue
up meanwhile in one statement.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, NamedTuple, get_args, get_origin, get_type_hints

import orjson
from psycopg import AsyncRawCursor
from psycopg.types.json import Jsonb

from hub.clusters.repository import ClusterIdentity, cluster_identity_sql
from hub.database import Statements
from hub.ingest.schemas import MAX_SNAPSHOT_PARTS
from hub.models.observed import HEARTBEAT_BUCKET, REPLAY_WINDOW, SNAPSHOT_PARTS_KEPT

# The PostgreSQL type the statement casts a row's value to as it reads it from the array;
# jsonb values (a report's records, its skipped kinds) are kept as they are.
Text = Annotated[str, "text"]
Boolean = Annotated[bool, "boolean"]
Integer = Annotated[int, "integer"]
Bigint = Annotated[int, "bigint"]
Timestamptz = Annotated[datetime, "timestamptz"]


class RecordRow(NamedTuple):
    """One record of a report as the ingest statement takes it."""

    reconciler: Text
    kind: Text
    namespace: Text
    name: Text
    source_url: Text | None
    source_ref: Text | None
    source_path: Text | None
    url_ref: Text | None
    applied_revision: Text | None
    applied_sha: Text | None
    applied_version: Text | None
    attempted_revision: Text | None
    attempted_sha: Text | None
    ready: Boolean | None
    reason: Text | None
    message: Text | None
    health: Text | None
    drifted: Boolean
    suspended: Boolean
    last_transition_at: Timestamptz | None


class ReportRow(NamedTuple):
    """One report as the ingest statement takes it: who sent it, when, and its records."""

    token_hash: Text
    cluster_name: Text
    boot_id: Text
    agent_version: Text
    instance: Text
    sequence: Bigint
    observed_at: Timestamptz
    received_at: Timestamptz
    not_after: Timestamptz
    not_before: Timestamptz
    full_snapshot: Boolean
    claimed_environment: Text | None
    claimed_cluster_type: Text | None
    agent_placement: Boolean
    records: Annotated[Sequence[RecordRow], "jsonb"]
    skipped_kinds: Annotated[Sequence[Mapping[str, str]], "jsonb"]


class SnapshotPartRow(NamedTuple):
    """Where a part of a snapshot sent in several reports stands: values that follow the
    report's, read by APPLY_SNAPSHOT_PARTS only."""

    snapshot_id: Text
    part_index: Integer
    part_count: Integer


def _sql_type(hint: object) -> str:
    for annotated in (hint, *get_args(hint)):  # Text, or Text | None
        if get_origin(annotated) is Annotated:
            kind: str = annotated.__metadata__[0]
            return kind
    raise TypeError(f"{hint} names no PostgreSQL type")


def _select(row: type[NamedTuple], start: int = 0) -> str:
    """The columns of `row`, read from its values in the JSON array r from place `start`."""
    hints = get_type_hints(row, include_extras=True)
    casts = []
    for index, column in enumerate(row._fields, start=start):
        kind = _sql_type(hints[column])
        casts.append(
            f"r -> {index} AS {column}"
            if kind == "jsonb"
            else f"(r ->> {index})::{kind} AS {column}"
        )
    return ", ".join(casts)


_KEY = ("reconciler", "kind", "namespace", "name")
# An object's state: what a record holds but its key and its own time.
STATE_COLUMNS = tuple(
    column for column in RecordRow._fields if column not in {*_KEY, "last_transition_at"}
)
_RECORD = _select(RecordRow)
_STATE = ", ".join(STATE_COLUMNS)
_KEY_COLUMNS = ", ".join(_KEY)
_REPORT = _select(ReportRow)
_PART = _select(SnapshotPartRow, start=len(ReportRow._fields))


def _columns(alias: str) -> str:
    return ", ".join(f"{alias}.{column}" for column in STATE_COLUMNS)


_PARTS_KEPT = f"{SNAPSHOT_PARTS_KEPT.total_seconds():.0f} seconds"
# Parts a cluster keeps, of every snapshot not yet complete: as many as one snapshot may have.
SNAPSHOT_PARTS_PER_CLUSTER = MAX_SNAPSHOT_PARTS


_VANISHED_FROM_SNAPSHOT = f"""
vanished AS (
    UPDATE object_state t
    SET removed_at = f.observed_at, changed_at = f.observed_at, written_at = f.received_at
    FROM fresh f
    WHERE f.full_snapshot
      AND t.cluster_id = f.id AND t.removed_at IS NULL
      AND (t.changed_at < f.observed_at OR t.changed_at > f.not_after)
      AND (t.cluster_id, t.reconciler, t.kind, t.namespace, t.name)
          NOT IN (SELECT cluster_id, {_KEY_COLUMNS} FROM incoming)
    RETURNING t.id, t.cluster_id, t.changed_at, {_columns("t")}
),
"""  # noqa: S608 - composed from the constants above, never from input

_VANISHED_FROM_PARTS = f"""
part AS (
    SELECT f.id AS cluster_id, f.snapshot_id, f.part_index, f.part_count, f.observed_at,
           f.received_at, f.not_after, f.records
    FROM fresh f
),
earlier_part AS (
    SELECT s.cluster_id, s.snapshot_id, s.part_index, s.part_count, s.observed_at, s.keys
    FROM part p
    JOIN snapshot_part s ON (s.cluster_id, s.snapshot_id) = (p.cluster_id, p.snapshot_id)
    WHERE s.part_index <> p.part_index
      AND s.received_at >= p.received_at - INTERVAL '{_PARTS_KEPT}'
),
other_snapshot AS (
    SELECT s.cluster_id, s.snapshot_id,
           sum(count(*)) OVER (PARTITION BY s.cluster_id
                               ORDER BY max(s.received_at) DESC, s.snapshot_id) AS kept_parts
    FROM part p
    JOIN snapshot_part s ON s.cluster_id = p.cluster_id AND s.snapshot_id <> p.snapshot_id
    WHERE s.received_at >= p.received_at - INTERVAL '{_PARTS_KEPT}'
    GROUP BY s.cluster_id, s.snapshot_id
),
crowded_out AS (
    SELECT o.cluster_id, o.snapshot_id
    FROM other_snapshot o
    WHERE o.kept_parts + 1 + (SELECT count(*) FROM earlier_part e WHERE e.cluster_id = o.cluster_id)
          > {SNAPSHOT_PARTS_PER_CLUSTER}
),
completed AS (
    SELECT p.cluster_id, p.snapshot_id, p.not_after, p.received_at,
           LEAST(p.observed_at, min(e.observed_at)) AS observed_at
    FROM part p
    LEFT JOIN earlier_part e USING (cluster_id, snapshot_id)
    GROUP BY p.cluster_id, p.snapshot_id, p.part_count, p.observed_at, p.not_after,
             p.received_at
    HAVING count(DISTINCT e.part_index) = p.part_count - 1
       AND bool_and(e.part_count = p.part_count) IS NOT FALSE
),
stored_part AS (
    INSERT INTO snapshot_part (
        cluster_id, snapshot_id, part_index, part_count, observed_at, received_at, keys)
    SELECT p.cluster_id, p.snapshot_id, p.part_index, p.part_count, p.observed_at,
           p.received_at,
           COALESCE((SELECT jsonb_agg(jsonb_build_array(r -> 0, r -> 1, r -> 2, r -> 3))
                     FROM jsonb_array_elements(p.records) AS r), '[]')
    FROM part p
    WHERE p.cluster_id NOT IN (SELECT cluster_id FROM completed)
    ON CONFLICT (cluster_id, snapshot_id, part_index) DO NOTHING
),
dropped_part AS (
    DELETE FROM snapshot_part s
    USING part p LEFT JOIN completed c ON c.cluster_id = p.cluster_id
    WHERE s.cluster_id = p.cluster_id
      AND (s.received_at < p.received_at - INTERVAL '{_PARTS_KEPT}'
           OR s.snapshot_id = c.snapshot_id OR s.observed_at <= c.observed_at
           OR (s.cluster_id, s.snapshot_id) IN (SELECT cluster_id, snapshot_id FROM crowded_out))
),
named AS (
    SELECT e.cluster_id, k ->> 0 AS reconciler, k ->> 1 AS kind, k ->> 2 AS namespace,
           k ->> 3 AS name
    FROM completed c
    JOIN earlier_part e USING (cluster_id, snapshot_id)
    CROSS JOIN LATERAL jsonb_array_elements(e.keys) AS k
    UNION ALL
    SELECT cluster_id, {_KEY_COLUMNS} FROM incoming
),
vanished AS (
    UPDATE object_state t
    SET removed_at = c.observed_at, changed_at = c.observed_at, written_at = c.received_at
    FROM completed c
    WHERE t.cluster_id = c.cluster_id AND t.removed_at IS NULL
      AND (t.changed_at < c.observed_at OR t.changed_at > c.not_after)
      AND (t.cluster_id, t.reconciler, t.kind, t.namespace, t.name)
          NOT IN (SELECT cluster_id, {_KEY_COLUMNS} FROM named)
    RETURNING t.id, t.cluster_id, t.changed_at, {_columns("t")}
),
"""  # noqa: S608 - composed from the constants above, never from input


# How this statement works: docs/contributing.md, "The ingest statement".
def _apply_reports(*, parts: bool) -> bytes:
    """The ingest statement; with `parts`, for reports that are parts of a snapshot."""
    columns = f", {_PART}" if parts else ""
    vanished = _VANISHED_FROM_PARTS if parts else _VANISHED_FROM_SNAPSHOT
    return f"""
WITH report AS (
    SELECT a.ord, {_REPORT}{columns}
    FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS a (r, ord)
),
me AS (
    SELECT r.ord, c.id, c.name, c.environment, c.cluster_type
    FROM report r
    CROSS JOIN LATERAL ({cluster_identity_sql("r.token_hash")} OFFSET 0) AS c
),
target AS (
    SELECT r.*, me.id, me.environment, me.cluster_type
    FROM report r JOIN me USING (ord)
    WHERE me.name = r.cluster_name
),
session AS (
    INSERT INTO agent_session AS s (
        cluster_id, boot_id, agent_version, instance, max_sequence, seen_window,
        started_at, last_report_at, skipped_kinds)
    SELECT t.id, t.boot_id, t.agent_version, t.instance, t.sequence, 1,
           t.received_at, t.received_at, t.skipped_kinds
    FROM target t
    ON CONFLICT (cluster_id, boot_id) DO UPDATE SET
        agent_version = EXCLUDED.agent_version,
        instance = EXCLUDED.instance,
        max_sequence = GREATEST(s.max_sequence, EXCLUDED.max_sequence),
        seen_window = CASE
            WHEN EXCLUDED.max_sequence > s.max_sequence THEN
                CASE WHEN EXCLUDED.max_sequence - s.max_sequence >= {REPLAY_WINDOW} THEN 1
                     ELSE ((s.seen_window << (EXCLUDED.max_sequence - s.max_sequence)::int)
                           & {2**REPLAY_WINDOW - 1}) | 1
                END
            ELSE s.seen_window | (1::bigint << (s.max_sequence - EXCLUDED.max_sequence)::int)
        END,
        last_report_at = EXCLUDED.last_report_at,
        report_count = s.report_count + 1,
        skipped_kinds = CASE WHEN EXCLUDED.max_sequence > s.max_sequence
                             THEN EXCLUDED.skipped_kinds ELSE s.skipped_kinds END
    WHERE EXCLUDED.max_sequence > s.max_sequence
       OR (s.max_sequence - EXCLUDED.max_sequence < {REPLAY_WINDOW}
           AND (s.seen_window >> (s.max_sequence - EXCLUDED.max_sequence)::int) & 1 = 0)
    RETURNING s.cluster_id, s.report_count
),
fresh AS (
    SELECT t.*, s.report_count = COALESCE(prior.report_count, 0) + 1 AS snapshot_current
    FROM target t
    JOIN session s ON s.cluster_id = t.id
    LEFT JOIN agent_session prior ON prior.cluster_id = t.id AND prior.boot_id = t.boot_id
),
incoming AS (
    SELECT f.id AS cluster_id, f.observed_at, f.received_at, f.not_before, f.snapshot_current,
           {_RECORD}
    FROM fresh f CROSS JOIN LATERAL jsonb_array_elements(f.records) AS r
),
changing AS (
    SELECT i.cluster_id, i.reconciler, i.kind, i.namespace, i.name, {_columns("i")},
           i.last_transition_at, i.observed_at, i.received_at, b.began_at, p.id AS previous_of,
           p.applied_revision AS previous_revision, p.applied_sha AS previous_sha,
           p.applied_version AS previous_version
    FROM incoming i
    CROSS JOIN LATERAL (
        SELECT LEAST(i.observed_at, GREATEST(COALESCE(i.last_transition_at, i.observed_at),
                                             i.not_before)) AS began_at
    ) AS b
    LEFT JOIN LATERAL (
        SELECT o.id, o.removed_at, {_columns("o")} FROM object_state o
        WHERE (o.cluster_id, o.reconciler, o.kind, o.namespace, o.name)
              = (i.cluster_id, i.reconciler, i.kind, i.namespace, i.name)
        OFFSET 0
    ) AS o ON true
    LEFT JOIN LATERAL (
        SELECT p.id, p.applied_revision, p.applied_sha, p.applied_version
        FROM object_state p
        WHERE p.id = o.id AND p.removed_at IS NULL AND p.changed_at < i.observed_at
          AND (p.applied_sha IS NOT NULL OR p.applied_version IS NOT NULL)
        FOR NO KEY UPDATE
    ) AS p ON true
    WHERE NOT i.snapshot_current OR o.id IS NULL OR o.removed_at IS NOT NULL
       OR ({_columns("o")}) IS DISTINCT FROM ({_columns("i")})
),
upserted AS (
    INSERT INTO object_state AS t (
        cluster_id, reconciler, kind, namespace, name, {_STATE}, last_transition_at,
        changed_at, first_seen_at, removed_at, applied_since, ready_since, written_at)
    SELECT c.cluster_id, c.reconciler, c.kind, c.namespace, c.name, {_columns("c")},
           c.last_transition_at, c.observed_at, c.observed_at, NULL, c.began_at,
           CASE WHEN c.ready THEN c.began_at END, c.received_at
    FROM changing c
    ON CONFLICT (cluster_id, reconciler, kind, namespace, name) DO UPDATE SET
        {", ".join(f"{column} = EXCLUDED.{column}" for column in STATE_COLUMNS)},
        last_transition_at = EXCLUDED.last_transition_at,
        changed_at = EXCLUDED.changed_at,
        removed_at = NULL,
        written_at = EXCLUDED.written_at,
        applied_since = CASE
            WHEN t.removed_at IS NOT NULL THEN EXCLUDED.applied_since
            WHEN t.applied_revision IS NOT DISTINCT FROM EXCLUDED.applied_revision
            THEN t.applied_since ELSE EXCLUDED.changed_at END,
        ready_since = CASE
            WHEN EXCLUDED.ready IS NOT TRUE THEN NULL
            WHEN t.removed_at IS NOT NULL THEN EXCLUDED.ready_since
            WHEN t.ready THEN t.ready_since
            ELSE EXCLUDED.changed_at END
    WHERE (t.changed_at <= EXCLUDED.changed_at OR t.changed_at > (SELECT max(not_after) FROM fresh))
      AND (t.removed_at IS NOT NULL
           OR ({_columns("t")}) IS DISTINCT FROM ({_columns("EXCLUDED")}))
    RETURNING t.id, t.cluster_id, t.changed_at, {_columns("t")}
),{vanished}recorded AS (
    INSERT INTO status_transition (
        observed_at, cluster_id, object_id, {_STATE}, removed, previous_recorded,
        previous_revision, previous_sha, previous_version)
    SELECT u.changed_at, u.cluster_id, u.id, {_columns("u")}, false,
           c.previous_of IS NOT NULL, c.previous_revision, c.previous_sha, c.previous_version
    FROM upserted u
    LEFT JOIN changing c ON c.previous_of = u.id
    UNION ALL
    SELECT v.changed_at, v.cluster_id, v.id, {_columns("v")}, true, false, NULL, NULL, NULL
    FROM vanished v
),
heartbeat AS (
    INSERT INTO cluster_heartbeat AS h (cluster_id, bucket_at, report_count, object_count)
    SELECT f.id,
           date_bin(INTERVAL '{HEARTBEAT_BUCKET}', f.received_at, TIMESTAMPTZ '2000-01-01 UTC'),
           1, jsonb_array_length(f.records)
    FROM fresh f
    ON CONFLICT (cluster_id, bucket_at) DO UPDATE SET
        report_count = h.report_count + 1,
        object_count = GREATEST(h.object_count, EXCLUDED.object_count)
),
placement AS (
    SELECT f.id, e.id AS environment_id, e.name AS environment,
           CASE WHEN d.cluster_types IS NULL OR f.claimed_cluster_type = ANY(d.cluster_types)
                THEN f.claimed_cluster_type END AS cluster_type
    FROM fresh f
    JOIN environment e ON e.name = COALESCE(f.environment, f.claimed_environment)
    CROSS JOIN LATERAL (
        SELECT bool_or(true) AS scheduled,
               array_agg(t.name) FILTER (WHERE t.name IS NOT NULL) AS cluster_types
        FROM scheduling_target st
        LEFT JOIN LATERAL unnest(st.cluster_types) AS t (name) ON true
        WHERE st.environment_id = e.id
    ) AS d
    WHERE f.agent_placement
      AND ((f.environment IS NULL AND (e.position IS NOT NULL OR d.scheduled))
           OR (f.environment IS NOT NULL AND f.cluster_type IS NULL
               AND f.claimed_cluster_type IS NOT NULL
               AND (f.claimed_environment IS NULL OR f.claimed_environment = f.environment)))
),
placed_cluster_type AS (
    INSERT INTO cluster_type AS ct (environment_id, name)
    SELECT DISTINCT p.environment_id, p.cluster_type
    FROM placement p
    WHERE p.cluster_type IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM cluster_type x
        WHERE (x.environment_id, x.name) = (p.environment_id, p.cluster_type))
    ORDER BY p.environment_id, p.cluster_type
    ON CONFLICT (environment_id, name) DO NOTHING
    RETURNING ct.id, ct.environment_id, ct.name
),
placed AS (
    SELECT p.id, p.environment_id, p.environment, COALESCE(x.id, n.id) AS cluster_type_id,
           COALESCE(x.name, n.name) AS cluster_type
    FROM placement p
    LEFT JOIN cluster_type x ON (x.environment_id, x.name) = (p.environment_id, p.cluster_type)
    LEFT JOIN placed_cluster_type n
      ON (n.environment_id, n.name) = (p.environment_id, p.cluster_type)
),
seen AS (
    UPDATE cluster c SET
        last_seen_at = GREATEST(c.last_seen_at, f.received_at),
        first_seen_at = COALESCE(c.first_seen_at, f.received_at),
        claimed_environment = f.claimed_environment,
        claimed_cluster_type = f.claimed_cluster_type,
        environment_id = COALESCE(c.environment_id, p.environment_id),
        cluster_type_id = CASE
            WHEN c.environment_id IS NULL OR c.environment_id = p.environment_id
            THEN COALESCE(c.cluster_type_id, p.cluster_type_id)
            ELSE c.cluster_type_id END,
        placed_at = CASE
            WHEN c.environment_id IS NULL AND p.id IS NOT NULL
              OR c.environment_id = p.environment_id AND c.cluster_type_id IS NULL
                 AND p.cluster_type_id IS NOT NULL
            THEN f.received_at ELSE c.placed_at END
    FROM fresh f
    LEFT JOIN placed p ON p.id = f.id
    WHERE c.id = f.id
),
changed AS (
    SELECT cluster_id, count(*) AS changed
    FROM (SELECT cluster_id FROM upserted UNION ALL SELECT cluster_id FROM vanished) AS c
    GROUP BY cluster_id
)
SELECT me.id, me.name, COALESCE(me.environment, p.environment),
       COALESCE(me.cluster_type, p.cluster_type), f.id IS NOT NULL AS fresh,
       COALESCE(changed.changed, 0) AS changed
FROM report r
LEFT JOIN me USING (ord)
LEFT JOIN fresh f USING (ord)
LEFT JOIN placed p ON p.id = f.id
LEFT JOIN changed ON changed.cluster_id = f.id
ORDER BY r.ord
""".encode()  # noqa: S608 - composed from the constants above, never from input


APPLY_REPORTS = _apply_reports(parts=False)
APPLY_SNAPSHOT_PARTS = _apply_reports(parts=True)


@dataclass(frozen=True, slots=True)
class AppliedReport:
    cluster: ClusterIdentity | None  # None: the token is unknown, revoked or decommissioned
    fresh: bool
    changed: int


def encode(report: ReportRow, part: SnapshotPartRow | None) -> tuple[bytes, bytes]:
    """The statement that applies `report`, one of a snapshot's parts when `part` is given, and
    the report as an element of its JSON array."""
    # orjson takes plain tuples only: tuple() makes one of each row.
    if part is None:
        return APPLY_REPORTS, orjson.dumps(report, default=tuple)
    return APPLY_SNAPSHOT_PARTS, orjson.dumps(report + part, default=tuple)


def _json_array(documents: list[bytes]) -> bytes:
    return b"[" + b",".join(documents) + b"]"


async def apply_reports(
    statements: Statements, statement: bytes, documents: list[bytes]
) -> list[AppliedReport]:
    """Apply reports encoded for the same statement in one run of it; their results in order."""
    async with statements.connection() as connection:
        cursor = AsyncRawCursor(connection)
        await cursor.execute(statement, (Jsonb(documents, dumps=_json_array),), prepare=True)
        rows = await cursor.fetchall()
    return [_applied(row) for row in rows]


def _applied(row: tuple[Any, ...]) -> AppliedReport:
    cluster_id, name, environment, cluster_type, fresh, changed = row
    cluster = (
        None if cluster_id is None else ClusterIdentity(cluster_id, name, environment, cluster_type)
    )
    return AppliedReport(cluster=cluster, fresh=fresh, changed=changed)
