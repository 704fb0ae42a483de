"""SQL of the ingest path: one set-based statement applies a whole report."""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

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
_RECORD_TYPES = {
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
_RECORD = ", ".join(f"{column} {kind}" for column, kind in _RECORD_TYPES.items())
_STATE = ", ".join(STATE_COLUMNS)
_KEY_MATCH = " AND ".join(f"i.{column} = t.{column}" for column in _KEY)

# Idempotency is an anti-replay window per (cluster, boot id): the newest sequence plus a
# bitmap of the REPLAY_WINDOW sequences before it. A report is fresh when its sequence is
# newer than the newest, or inside the window with its bit clear. Every other CTE runs only
# for a fresh report. Object rows are written only when their state changed, so a steady
# fleet costs one small update per report, not one per object.
APPLY_REPORT = text(f"""
WITH session AS (
    INSERT INTO agent_session AS s (
        cluster_id, boot_id, agent_version, instance, max_sequence, seen_window,
        started_at, last_report_at)
    VALUES (:cluster_id, :boot_id, :agent_version, :instance, :sequence, 1,
            :received_at, :received_at)
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
        report_count = s.report_count + 1
    WHERE EXCLUDED.max_sequence > s.max_sequence
       OR (s.max_sequence - EXCLUDED.max_sequence < {REPLAY_WINDOW}
           AND (s.seen_window >> (s.max_sequence - EXCLUDED.max_sequence)::int) & 1 = 0)
    RETURNING 1
),
incoming AS (
    SELECT o.* FROM jsonb_to_recordset(CAST(:objects AS jsonb)) AS o({_RECORD})
    WHERE EXISTS (SELECT FROM session)
),
upserted AS (
    INSERT INTO object_state AS t (
        cluster_id, reconciler, kind, namespace, name, {_STATE}, last_transition_at,
        changed_at, first_seen_at, removed_at)
    SELECT :cluster_id, i.reconciler, i.kind, i.namespace, i.name,
           {", ".join(f"i.{column}" for column in STATE_COLUMNS)}, i.last_transition_at,
           :observed_at, :observed_at, NULL
    FROM incoming i
    ON CONFLICT (cluster_id, reconciler, kind, namespace, name) DO UPDATE SET
        {", ".join(f"{column} = EXCLUDED.{column}" for column in STATE_COLUMNS)},
        last_transition_at = EXCLUDED.last_transition_at,
        changed_at = EXCLUDED.changed_at,
        removed_at = NULL
    WHERE t.changed_at <= EXCLUDED.changed_at
      AND (t.removed_at IS NOT NULL
           OR ({", ".join(f"t.{column}" for column in STATE_COLUMNS)})
              IS DISTINCT FROM ({", ".join(f"EXCLUDED.{column}" for column in STATE_COLUMNS)}))
    RETURNING t.id, {", ".join(f"t.{column}" for column in STATE_COLUMNS)}
),
vanished AS (
    UPDATE object_state t SET removed_at = :observed_at, changed_at = :observed_at
    WHERE CAST(:full_snapshot AS boolean) AND EXISTS (SELECT FROM session)
      AND t.cluster_id = :cluster_id AND t.removed_at IS NULL AND t.changed_at < :observed_at
      AND NOT EXISTS (SELECT FROM incoming i WHERE {_KEY_MATCH})
    RETURNING t.id, {", ".join(f"t.{column}" for column in STATE_COLUMNS)}
),
recorded AS (
    INSERT INTO status_transition (observed_at, cluster_id, object_id, {_STATE}, removed)
    SELECT :observed_at, :cluster_id, u.id, {", ".join(f"u.{c}" for c in STATE_COLUMNS)}, false
    FROM upserted u
    UNION ALL
    SELECT :observed_at, :cluster_id, v.id, {", ".join(f"v.{c}" for c in STATE_COLUMNS)}, true
    FROM vanished v
),
heartbeat AS (
    INSERT INTO cluster_heartbeat AS h (cluster_id, bucket_at, report_count, object_count)
    SELECT :cluster_id,
           date_bin(INTERVAL '{HEARTBEAT_BUCKET}', :received_at, TIMESTAMPTZ '2000-01-01 UTC'),
           1, :object_count
    FROM session
    ON CONFLICT (cluster_id, bucket_at) DO UPDATE SET
        report_count = h.report_count + 1,
        object_count = GREATEST(h.object_count, EXCLUDED.object_count)
),
seen AS (
    UPDATE cluster SET
        last_seen_at = GREATEST(last_seen_at, :received_at),
        first_seen_at = COALESCE(first_seen_at, :received_at)
    WHERE id = :cluster_id AND EXISTS (SELECT FROM session)
)
SELECT EXISTS (SELECT FROM session) AS fresh,
       (SELECT count(*) FROM incoming) AS accepted,
       (SELECT count(*) FROM upserted) + (SELECT count(*) FROM vanished) AS changed
""")  # noqa: S608 - composed from the constants above, never from input


@dataclass(frozen=True, slots=True)
class AppliedReport:
    fresh: bool
    accepted: int
    changed: int


async def apply_report(
    session: AsyncSession,
    *,
    cluster_id: int,
    boot_id: str,
    agent_version: str,
    instance: str,
    sequence: int,
    observed_at: datetime,
    received_at: datetime,
    full_snapshot: bool,
    objects_json: str,
    object_count: int,
) -> AppliedReport:
    row = (
        await session.execute(
            APPLY_REPORT,
            {
                "cluster_id": cluster_id,
                "boot_id": boot_id,
                "agent_version": agent_version,
                "instance": instance,
                "sequence": sequence,
                "observed_at": observed_at,
                "received_at": received_at,
                "full_snapshot": full_snapshot,
                "objects": objects_json,
                "object_count": object_count,
            },
        )
    ).one()
    return AppliedReport(fresh=row.fresh, accepted=row.accepted, changed=row.changed)
