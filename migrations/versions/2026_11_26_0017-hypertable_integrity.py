"""The history tables keep their integrity by triggers, not foreign keys; TimescaleDB's default
time indexes go; compression is laid out for the queries.

Foreign keys -> triggers. On TimescaleDB a hypertable's foreign keys are added to each new
chunk, and adding one takes a SHARE ROW EXCLUSIVE lock on the referenced table: every ingest
transaction that had written a `cluster` row deadlocked with the one creating the chunk, at
every chunk boundary. The triggers below give what the foreign keys gave, without a lock on
the table: a transition names an object of its cluster, and takes a KEY SHARE lock on that
object's row (as a foreign key check does) so that it cannot be deleted meanwhile; a heartbeat
names a cluster, likewise; deleting objects (or a cluster, whose objects go with it) deletes
their transitions and heartbeats. The same on plain PostgreSQL, so the store has one way.

The time columns stay: `status_transition` by `observed_at` (the agent's time of the change),
`cluster_heartbeat` by `bucket_at` (the hub's time of receipt). Every question asked of the
history is a range of `observed_at`, so chunks are excluded by it; partitioning by the time of
receipt would leave every chunk a candidate for every question. The price is that an agent's
spool, delivering hours late, writes into older chunks: TimescaleDB accepts rows into a
compressed chunk (they stay uncompressed in it until the compression policy recompresses the
chunk), and FLEETMARK_COMPRESS_AFTER (14 days by default) is far beyond the hours a spool holds,
so replays nearly always land in chunks not compressed yet.

Compression: a chunk holds a few transitions per object, so segments per object (or per
cluster) were too small to compress and every query decompressed hundreds of them. Segments
are now a whole chunk ordered by cluster, object and time; each batch of 1,000 rows keeps the
min and max of these columns, so a question about one cluster or one object decompresses the
one or two batches that hold it. Heartbeats are ordered by cluster and bucket. Set only where
TimescaleDB may compress (its Timescale-licensed build); chunks already compressed keep their
layout until they are recompressed.

Revision ID: 0017_hypertable_integrity
Revises: 0016_unknown_revision_forms
Create Date: 2026-11-26 02:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_hypertable_integrity"
down_revision: str | None = "0016_unknown_revision_forms"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FOREIGN_KEYS = [
    # (constraint, table, column, referenced table)
    ("fk_status_transition_cluster_id_cluster", "status_transition", "cluster_id", "cluster"),
    (
        "fk_status_transition_object_id_object_state",
        "status_transition",
        "object_id",
        "object_state",
    ),
    ("fk_cluster_heartbeat_cluster_id_cluster", "cluster_heartbeat", "cluster_id", "cluster"),
]
# What create_hypertable added before migration 0001 asked it not to: the models do not have
# them, no question needs them (time ranges are chunk ranges), and ingest paid for them.
DEFAULT_TIME_INDEXES = ["status_transition_observed_at_idx", "cluster_heartbeat_bucket_at_idx"]
COMPRESSION = {
    # table: (segment by, order by)
    "status_transition": ("", "cluster_id, object_id, observed_at DESC"),
    "cluster_heartbeat": ("", "cluster_id, bucket_at DESC"),
}
PREVIOUS_COMPRESSION = {
    "status_transition": ("cluster_id, object_id", "observed_at DESC"),
    "cluster_heartbeat": ("cluster_id", "bucket_at DESC"),
}

TRIGGERS = """
CREATE FUNCTION status_transition_names_object() RETURNS trigger
LANGUAGE plpgsql AS $function$
BEGIN
    PERFORM 1 FROM object_state o
    WHERE o.id = NEW.object_id AND o.cluster_id = NEW.cluster_id
    FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE foreign_key_violation USING
            MESSAGE = format('status_transition: no object %s in cluster %s',
                             NEW.object_id, NEW.cluster_id),
            TABLE = 'status_transition';
    END IF;
    RETURN NEW;
END
$function$;

CREATE TRIGGER status_transition_names_object
BEFORE INSERT OR UPDATE OF object_id, cluster_id ON status_transition
FOR EACH ROW EXECUTE FUNCTION status_transition_names_object();

CREATE FUNCTION cluster_heartbeat_names_cluster() RETURNS trigger
LANGUAGE plpgsql AS $function$
BEGIN
    PERFORM 1 FROM cluster c WHERE c.id = NEW.cluster_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE foreign_key_violation USING
            MESSAGE = format('cluster_heartbeat: no cluster %s', NEW.cluster_id),
            TABLE = 'cluster_heartbeat';
    END IF;
    RETURN NEW;
END
$function$;

CREATE TRIGGER cluster_heartbeat_names_cluster
BEFORE INSERT OR UPDATE OF cluster_id ON cluster_heartbeat
FOR EACH ROW EXECUTE FUNCTION cluster_heartbeat_names_cluster();

CREATE FUNCTION object_state_deletes_transitions() RETURNS trigger
LANGUAGE plpgsql AS $function$
BEGIN
    DELETE FROM status_transition t USING deleted d WHERE t.object_id = d.id;
    RETURN NULL;
END
$function$;

CREATE TRIGGER object_state_deletes_transitions
AFTER DELETE ON object_state REFERENCING OLD TABLE AS deleted
FOR EACH STATEMENT EXECUTE FUNCTION object_state_deletes_transitions();

CREATE FUNCTION cluster_deletes_heartbeats() RETURNS trigger
LANGUAGE plpgsql AS $function$
BEGIN
    DELETE FROM cluster_heartbeat h USING deleted d WHERE h.cluster_id = d.id;
    RETURN NULL;
END
$function$;

CREATE TRIGGER cluster_deletes_heartbeats
AFTER DELETE ON cluster REFERENCING OLD TABLE AS deleted
FOR EACH STATEMENT EXECUTE FUNCTION cluster_deletes_heartbeats();
"""


def _hypertables() -> set[str]:
    if not _timescaledb():
        return set()
    query = sa.text("SELECT hypertable_name FROM timescaledb_information.hypertables")
    return set(op.get_bind().execute(query).scalars())


def _timescaledb() -> bool:
    return (
        op.get_bind()
        .execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'timescaledb'"))
        .scalar()
        is not None
    )


def _may_compress() -> bool:
    return (
        op.get_bind()
        .execute(sa.text("SELECT current_setting('timescaledb.license', true) = 'timescale'"))
        .scalar()
        is True
    )


def _compress(layout: dict[str, tuple[str, str]]) -> None:
    hypertables = _hypertables()
    if not hypertables or not _may_compress():
        return
    for table, (segment_by, order_by) in layout.items():
        if table in hypertables:
            op.execute(
                f"ALTER TABLE {table} SET (timescaledb.compress, "
                f"timescaledb.compress_segmentby = '{segment_by}', "
                f"timescaledb.compress_orderby = '{order_by}')"
            )


def upgrade() -> None:
    for constraint, table, _, _ in FOREIGN_KEYS:
        op.drop_constraint(constraint, table, type_="foreignkey")
    op.execute(TRIGGERS)
    for index in DEFAULT_TIME_INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {index}")
    _compress(COMPRESSION)


def downgrade() -> None:
    _compress(PREVIOUS_COMPRESSION)
    op.execute("""
        DROP TRIGGER cluster_deletes_heartbeats ON cluster;
        DROP FUNCTION cluster_deletes_heartbeats();
        DROP TRIGGER object_state_deletes_transitions ON object_state;
        DROP FUNCTION object_state_deletes_transitions();
        DROP TRIGGER cluster_heartbeat_names_cluster ON cluster_heartbeat;
        DROP FUNCTION cluster_heartbeat_names_cluster();
        DROP TRIGGER status_transition_names_object ON status_transition;
        DROP FUNCTION status_transition_names_object();
    """)
    for constraint, table, column, referenced in FOREIGN_KEYS:
        op.create_foreign_key(constraint, table, referenced, [column], ["id"], ondelete="CASCADE")
