"""Fleet counts from a per-cluster summary kept by triggers; objects by name.

GET /api/v1/fleet counted every live object of the fleet per request through
fleet_cluster_state (10,000 clusters, 200,000 objects: about a quarter of a second). Each
cluster's live objects counted by state are now kept in `cluster_object_count`, and the view
reads them from there: same name, columns and rows, so the dashboards that read it gain too.

The counts are kept by statement-level triggers on object_state, which add up the change of
each cluster's counts from the rows a statement inserted, updated or deleted, as they were
before and after it. Ingest cannot keep them itself: its statement updates rows whose earlier
state it does not see (PostgreSQL 15 has no RETURNING OLD, and a report of the same cluster
committed while the statement waited for its agent's session row is newer than its
snapshot); the triggers see the rows as they were updated, for every statement that writes
object_state. Changes are added, never recounted, so concurrent statements do not overwrite
each other's, and clusters are locked in id order. A cluster being deleted takes its row
with it (the foreign key cascades; the triggers skip clusters no longer there).

Deployment history by object name still finds the objects of a name by reading every object's
row: an index on (name, id) found them from the index alone, but with it every report cost
PostgreSQL three to six times the CPU (0.59 against 2.2 to 3.3 ms a report at 1,000 reports/s,
benchmarks/ingest.py), so there is none.

Revision ID: 0019_fast_reads
Revises: 0018_history_rollups
Create Date: 2026-11-26 00:19:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_fast_reads"
down_revision: str | None = "0018_history_rollups"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNTS = ("objects", "ready", "failing", "progressing", "suspended", "drifted")

# Each count of the rows of `d` (sign, cluster_id, ready, suspended, drifted): +1 for a live
# row after the statement, -1 for one before it; the states as fleet_object_state has them.
_SUMS = """
    sum(d.sign) AS objects,
    COALESCE(sum(d.sign) FILTER (WHERE NOT d.suspended AND d.ready), 0) AS ready,
    COALESCE(sum(d.sign) FILTER (WHERE NOT d.suspended AND NOT d.ready), 0) AS failing,
    COALESCE(sum(d.sign) FILTER (WHERE NOT d.suspended AND d.ready IS NULL), 0) AS progressing,
    COALESCE(sum(d.sign) FILTER (WHERE d.suspended), 0) AS suspended,
    COALESCE(sum(d.sign) FILTER (WHERE d.drifted), 0) AS drifted
"""
_LIVE = "cluster_id, ready, suspended, drifted FROM {} WHERE removed_at IS NULL"
_ADDED = ", ".join(f"{name} = n.{name} + EXCLUDED.{name}" for name in COUNTS)

COUNT_FUNCTION = f"""
CREATE FUNCTION cluster_object_count_change() RETURNS trigger LANGUAGE plpgsql AS $function$
DECLARE
    changed text := CASE TG_OP
        WHEN 'INSERT' THEN 'SELECT 1, {_LIVE.format("new_rows")}'
        WHEN 'DELETE' THEN 'SELECT -1, {_LIVE.format("old_rows")}'
        ELSE 'SELECT 1, {_LIVE.format("new_rows")} UNION ALL SELECT -1, {_LIVE.format("old_rows")}'
    END;
BEGIN
    EXECUTE format($statement$
        INSERT INTO cluster_object_count AS n (cluster_id, {", ".join(COUNTS)})
        SELECT s.* FROM (
            SELECT d.cluster_id, {_SUMS}
            FROM (%s) AS d (sign, cluster_id, ready, suspended, drifted)
            WHERE EXISTS (SELECT FROM cluster c WHERE c.id = d.cluster_id)
            GROUP BY d.cluster_id
        ) s
        WHERE ({", ".join(COUNTS)}) <> ({", ".join("0" for _ in COUNTS)})
        ORDER BY s.cluster_id
        ON CONFLICT (cluster_id) DO UPDATE SET {_ADDED}
    $statement$, changed);
    RETURN NULL;
END
$function$
"""

# One trigger per event: a trigger with transition tables can have only one.
TRIGGERS = {
    "insert": "INSERT ON object_state REFERENCING NEW TABLE AS new_rows",
    "update": "UPDATE ON object_state REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "delete": "DELETE ON object_state REFERENCING OLD TABLE AS old_rows",
}

BACKFILL = f"""
INSERT INTO cluster_object_count (cluster_id, {", ".join(COUNTS)})
SELECT d.cluster_id, {_SUMS}
FROM (SELECT 1, {_LIVE.format("object_state")}) AS d (sign, cluster_id, ready, suspended, drifted)
GROUP BY d.cluster_id
"""

FLEET_CLUSTER_STATE = f"""
CREATE OR REPLACE VIEW fleet_cluster_state AS
SELECT
    c.id AS cluster_id,
    c.name AS cluster,
    c.environment_id,
    e.name AS environment,
    e.position AS environment_position,
    c.cluster_type_id,
    ct.name AS cluster_type,
    c.registered_at,
    c.first_seen_at,
    c.last_seen_at,
    {", ".join(f"COALESCE(n.{name}, 0) AS {name}" for name in COUNTS)}
FROM cluster c
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
LEFT JOIN cluster_object_count n ON n.cluster_id = c.id
WHERE c.decommissioned_at IS NULL
"""

# 0004's definition, restated: a migration is a fixed step, not code shared with later ones.
COUNTED_FLEET_CLUSTER_STATE = """
CREATE OR REPLACE VIEW fleet_cluster_state AS
SELECT
    c.id AS cluster_id,
    c.name AS cluster,
    c.environment_id,
    e.name AS environment,
    e.position AS environment_position,
    c.cluster_type_id,
    ct.name AS cluster_type,
    c.registered_at,
    c.first_seen_at,
    c.last_seen_at,
    count(o.object_id) AS objects,
    count(o.object_id) FILTER (WHERE o.state = 'ready') AS ready,
    count(o.object_id) FILTER (WHERE o.state = 'failing') AS failing,
    count(o.object_id) FILTER (WHERE o.state = 'progressing') AS progressing,
    count(o.object_id) FILTER (WHERE o.state = 'suspended') AS suspended,
    count(o.object_id) FILTER (WHERE o.drifted) AS drifted
FROM cluster c
LEFT JOIN environment e ON e.id = c.environment_id
LEFT JOIN cluster_type ct ON ct.id = c.cluster_type_id
LEFT JOIN fleet_object_state o ON o.cluster_id = c.id
WHERE c.decommissioned_at IS NULL
GROUP BY c.id, e.name, e.position, ct.name
"""


def upgrade() -> None:
    op.create_table(
        "cluster_object_count",
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in COUNTS),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["cluster.id"],
            name=op.f("fk_cluster_object_count_cluster_id_cluster"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_id", name=op.f("pk_cluster_object_count")),
    )
    # Filled and kept from here on in one transaction: no write falls between the two.
    op.execute("LOCK TABLE object_state IN SHARE MODE")
    op.execute(BACKFILL)
    op.execute(COUNT_FUNCTION)
    for event, definition in TRIGGERS.items():
        op.execute(
            f"CREATE TRIGGER cluster_object_count_{event} AFTER {definition} "
            "FOR EACH STATEMENT EXECUTE FUNCTION cluster_object_count_change()"
        )
    # Replaced in place, so the comment and any grants to dashboard readers stay.
    op.execute(FLEET_CLUSTER_STATE)


def downgrade() -> None:
    op.execute(COUNTED_FLEET_CLUSTER_STATE)
    for event in TRIGGERS:
        op.execute(f"DROP TRIGGER cluster_object_count_{event} ON object_state")
    op.execute("DROP FUNCTION cluster_object_count_change()")
    op.drop_table("cluster_object_count")
