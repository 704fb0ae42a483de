"""Object counts kept by static SQL: the count trigger no longer parses and plans its statement
on every write to object_state.

0019's `cluster_object_count_change` composed its statement for the event it fired on and ran
it with a dynamic EXECUTE, parsed and planned each time: twice per ingest batch (the upsert
fires the INSERT and UPDATE triggers), even when no row changed, 5-6 % of PostgreSQL's CPU per
report. It now runs one static statement per event, whose plan PL/pgSQL keeps, and returns at
once when the statement wrote no row. The counts are the same.

Revision ID: 0056_ingest_triggers
Revises: 0055_dora_source
Create Date: 2026-12-09 10:00:00
"""

from collections.abc import Sequence
from types import ModuleType

from alembic import context, op
from alembic.script import ScriptDirectory

revision: str = "0056_ingest_triggers"
down_revision: str | None = "0055_dora_source"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fast_reads() -> ModuleType:
    """0019, whose counts and statement this function keeps."""
    script = ScriptDirectory.from_config(context.config).get_revision("0019_fast_reads")
    assert script is not None
    module: ModuleType = script.module
    return module


def _count_function(fast_reads: ModuleType) -> str:
    counts = ", ".join(fast_reads.COUNTS)
    live = fast_reads._LIVE  # 0019's own constants, fixed as 0019 is

    def add(rows: str) -> str:
        # 0019's statement: the change of `rows` (sign, cluster_id, ready, suspended, drifted)
        # added to each cluster's counts, clusters in id order, those no longer there skipped.
        return f"""
        INSERT INTO cluster_object_count AS n (cluster_id, {counts})
        SELECT s.* FROM (
            SELECT d.cluster_id, {fast_reads._SUMS}
            FROM ({rows}) AS d (sign, cluster_id, ready, suspended, drifted)
            WHERE EXISTS (SELECT FROM cluster c WHERE c.id = d.cluster_id)
            GROUP BY d.cluster_id
        ) s
        WHERE ({counts}) <> ({", ".join("0" for _ in fast_reads.COUNTS)})
        ORDER BY s.cluster_id
        ON CONFLICT (cluster_id) DO UPDATE SET {fast_reads._ADDED};"""

    added = f"SELECT 1, {live.format('new_rows')}"
    removed = f"SELECT -1, {live.format('old_rows')}"
    # A trigger with transition tables fires for one event, so each branch names only the
    # tables its event has; PL/pgSQL plans a branch's statement when it first runs it and keeps
    # the plan.
    return f"""
CREATE OR REPLACE FUNCTION cluster_object_count_change() RETURNS trigger
LANGUAGE plpgsql AS $function$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF EXISTS (SELECT FROM new_rows) THEN {add(added)}
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT FROM old_rows) THEN {add(removed)}
        END IF;
    ELSIF EXISTS (SELECT FROM new_rows) THEN {add(f"{added} UNION ALL {removed}")}
    END IF;
    RETURN NULL;
END
$function$
"""


def upgrade() -> None:
    op.execute(_count_function(_fast_reads()))


def downgrade() -> None:
    function = str(_fast_reads().COUNT_FUNCTION)
    op.execute(function.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"))
