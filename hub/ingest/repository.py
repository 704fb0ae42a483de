"""SQL of the ingest path: one set-based statement authenticates and applies a whole report."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import orjson
from psycopg import AsyncRawCursor
from psycopg.types.numeric import Int8

from hub.clusters.repository import CLUSTER_IDENTITY_SQL, ClusterIdentity
from hub.database import Statements
from hub.models.observed import HEARTBEAT_BUCKET, REPLAY_WINDOW

STATE_COLUMNS = (
    "source_url",
    "source_ref",
    "source_path",
    "applied_revision",
    "applied_sha",
    "applied_version",
    "attempted_revision",
    "attempted_sha",
    "ready",
    "reason",
    "message",
    "health",
    "drifted",
    "suspended",
)
# A record travels as a JSON array of its values in this order: no keys to send and parse.
RECORD_TYPES = {
    "reconciler": "text",
    "kind": "text",
    "namespace": "text",
    "name": "text",
    "source_url": "text",
    "source_ref": "text",
    "source_path": "text",
    "applied_revision": "text",
    "applied_sha": "text",
    "applied_version": "text",
    "attempted_revision": "text",
    "attempted_sha": "text",
    "ready": "boolean",
    "reason": "text",
    "message": "text",
    "health": "text",
    "drifted": "boolean",
    "suspended": "boolean",
    "last_transition_at": "timestamptz",
}
_KEY = ("reconciler", "kind", "namespace", "name")
_RECORD = ", ".join(
    f"(r ->> {index})::{kind} AS {column}"
    for index, (column, kind) in enumerate(RECORD_TYPES.items())
)
# One record: its values in RECORD_TYPES order.
Record = tuple[object, ...]
_STATE = ", ".join(STATE_COLUMNS)
_KEY_COLUMNS = ", ".join(_KEY)

# The statement is the whole unit of work, sent on a Statements connection: on its own it
# is one round trip per report. It finds the cluster by token hash; only when the token is
# valid and names the cluster the report is for does anything get written, and the caller
# turns an empty or mismatched identity into 401/403.
#
# Idempotency is an anti-replay window per (cluster, boot id): the newest sequence plus a
# bitmap of the REPLAY_WINDOW sequences before it. A report is fresh when its sequence is
# newer than the newest, or inside the window with its bit clear. Every other CTE runs only
# for a fresh report. Object rows are written only when their state changed, so a steady
# fleet costs one small update per report, not one per object. A fresh report places a
# cluster that registration left open: without an environment, into the one the agent names
# (and its cluster type); with an environment but no cluster type, into the cluster type the
# agent names there (unless it names another environment). Both are created when new.
#
# Records arrive as positional JSON arrays (two thirds of the bytes of keyed objects, and
# cheaper to parse than json_to_recordset's per-object hash tables); vanished objects are
# found with a hashed NOT IN (the keys are never NULL) rather than a nested-loop anti-join.
#
# Parameters: $1 token hash, $2 cluster name, $3 boot id, $4 agent version, $5 instance,
# $6 sequence, $7 observed_at, $8 received_at, $9 full snapshot, $10 records (jsonb),
# $11 record count, $12 claimed environment, $13 claimed cluster type, $14 skipped kinds
# (jsonb; kept from the newest sequence only).
APPLY_REPORT = f"""
WITH me AS ({CLUSTER_IDENTITY_SQL}),
target AS (
    SELECT id, environment, cluster_type FROM me WHERE name = $2
),
session AS (
    INSERT INTO agent_session AS s (
        cluster_id, boot_id, agent_version, instance, max_sequence, seen_window,
        started_at, last_report_at, skipped_kinds)
    SELECT target.id, $3, $4, $5, $6, 1, $8, $8, $14::jsonb FROM target
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
    RETURNING s.cluster_id
),
incoming AS (
    SELECT {_RECORD} FROM jsonb_array_elements($10::jsonb) AS r
    WHERE EXISTS (SELECT FROM session)
),
upserted AS (
    INSERT INTO object_state AS t (
        cluster_id, reconciler, kind, namespace, name, {_STATE}, last_transition_at,
        changed_at, first_seen_at, removed_at)
    SELECT s.cluster_id, i.reconciler, i.kind, i.namespace, i.name,
           {", ".join(f"i.{column}" for column in STATE_COLUMNS)}, i.last_transition_at,
           $7, $7, NULL
    FROM incoming i CROSS JOIN session s
    ON CONFLICT (cluster_id, reconciler, kind, namespace, name) DO UPDATE SET
        {", ".join(f"{column} = EXCLUDED.{column}" for column in STATE_COLUMNS)},
        last_transition_at = EXCLUDED.last_transition_at,
        changed_at = EXCLUDED.changed_at,
        removed_at = NULL
    WHERE t.changed_at <= EXCLUDED.changed_at
      AND (t.removed_at IS NOT NULL
           OR ({", ".join(f"t.{column}" for column in STATE_COLUMNS)})
              IS DISTINCT FROM ({", ".join(f"EXCLUDED.{column}" for column in STATE_COLUMNS)}))
    RETURNING t.id, t.cluster_id, {", ".join(f"t.{column}" for column in STATE_COLUMNS)}
),
vanished AS (
    UPDATE object_state t SET removed_at = $7, changed_at = $7
    FROM session s
    WHERE $9::boolean
      AND t.cluster_id = s.cluster_id AND t.removed_at IS NULL AND t.changed_at < $7
      AND (t.reconciler, t.kind, t.namespace, t.name) NOT IN (SELECT {_KEY_COLUMNS} FROM incoming)
    RETURNING t.id, t.cluster_id, {", ".join(f"t.{column}" for column in STATE_COLUMNS)}
),
recorded AS (
    INSERT INTO status_transition (observed_at, cluster_id, object_id, {_STATE}, removed)
    SELECT $7, u.cluster_id, u.id, {", ".join(f"u.{c}" for c in STATE_COLUMNS)}, false
    FROM upserted u
    UNION ALL
    SELECT $7, v.cluster_id, v.id, {", ".join(f"v.{c}" for c in STATE_COLUMNS)}, true
    FROM vanished v
),
heartbeat AS (
    INSERT INTO cluster_heartbeat AS h (cluster_id, bucket_at, report_count, object_count)
    SELECT s.cluster_id,
           date_bin(INTERVAL '{HEARTBEAT_BUCKET}', $8, TIMESTAMPTZ '2000-01-01 UTC'),
           1, $11
    FROM session s
    ON CONFLICT (cluster_id, bucket_at) DO UPDATE SET
        report_count = h.report_count + 1,
        object_count = GREATEST(h.object_count, EXCLUDED.object_count)
),
placed_environment AS (
    INSERT INTO environment AS e (name)
    SELECT COALESCE(target.environment, $12::text) FROM target
    WHERE EXISTS (SELECT FROM session)
      AND ((target.environment IS NULL AND $12::text IS NOT NULL)
           OR (target.environment IS NOT NULL AND target.cluster_type IS NULL
               AND $13::text IS NOT NULL
               AND ($12::text IS NULL OR $12::text = target.environment)))
    ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
    RETURNING e.id
),
placed_cluster_type AS (
    INSERT INTO cluster_type AS ct (environment_id, name)
    SELECT p.id, $13::text FROM placed_environment p WHERE $13::text IS NOT NULL
    ON CONFLICT (environment_id, name) DO UPDATE SET name = EXCLUDED.name
    RETURNING ct.id
),
seen AS (
    UPDATE cluster c SET
        last_seen_at = GREATEST(c.last_seen_at, $8),
        first_seen_at = COALESCE(c.first_seen_at, $8),
        environment_id = COALESCE((SELECT id FROM placed_environment), c.environment_id),
        cluster_type_id = CASE WHEN EXISTS (SELECT FROM placed_environment)
                               THEN (SELECT id FROM placed_cluster_type)
                               ELSE c.cluster_type_id END
    FROM session s
    WHERE c.id = s.cluster_id
)
SELECT me.id, me.name, me.environment, me.cluster_type,
       EXISTS (SELECT FROM session) AS fresh,
       (SELECT count(*) FROM incoming) AS accepted,
       (SELECT count(*) FROM upserted) + (SELECT count(*) FROM vanished) AS changed
FROM (VALUES (1)) AS one (x) LEFT JOIN me ON true
""".encode()  # noqa: S608 - composed from the constants above, never from input


@dataclass(frozen=True, slots=True)
class AppliedReport:
    cluster: ClusterIdentity | None  # None: the token is unknown, revoked or decommissioned
    fresh: bool
    accepted: int
    changed: int


async def apply_report(
    statements: Statements,
    *,
    token_hash: str,
    cluster_name: str,
    boot_id: str,
    agent_version: str,
    instance: str,
    sequence: int,
    observed_at: datetime,
    received_at: datetime,
    full_snapshot: bool,
    records: Sequence[Record],
    claimed_environment: str | None,
    claimed_cluster_type: str | None,
    skipped_kinds: Sequence[Mapping[str, str]],
) -> AppliedReport:
    async with statements.connection() as connection:
        cursor = AsyncRawCursor(connection)
        await cursor.execute(
            APPLY_REPORT,
            (
                token_hash,
                cluster_name,
                boot_id,
                agent_version,
                instance,
                Int8(sequence),
                observed_at,
                received_at,
                full_snapshot,
                orjson.dumps(records).decode(),
                Int8(len(records)),
                claimed_environment,
                claimed_cluster_type,
                orjson.dumps(skipped_kinds).decode(),
            ),
            prepare=True,
        )
        row = await cursor.fetchone()
    assert row is not None
    cluster_id, name, environment, cluster_type, fresh, accepted, changed = row
    cluster = (
        None if cluster_id is None else ClusterIdentity(cluster_id, name, environment, cluster_type)
    )
    return AppliedReport(cluster=cluster, fresh=fresh, accepted=accepted, changed=changed)
